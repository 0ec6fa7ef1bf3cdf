//! TF's `checkpoint` state file, which names a train directory's newest checkpoint
//! (`prefix_from_state`: `model_checkpoint_path: "..."`), as `--checkpoint DIR` reads it.
//!
//! Input: the file (UTF-8; other bytes are refused before parsing, as `read_to_string` does).

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use towers_models::weights::prefix_from_state;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let dir = Path::new("/train");
    if let Ok(prefix) = prefix_from_state(dir, text) {
        // Relative names stay in the directory; absolute ones are taken as they are.
        assert!(
            prefix.starts_with(dir) || prefix.is_absolute(),
            "{prefix:?}"
        );
    }
});
