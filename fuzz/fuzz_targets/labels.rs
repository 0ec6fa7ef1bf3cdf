//! A label file as `classify --labels` reads one (`parse_labels`: `label<TAB>name` lines or
//! one name per line), whose names must stay bounded by the file's lines.
//!
//! Input: the file (UTF-8; other bytes are refused before parsing, as `read_to_string` does).

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use towers_train::parse_labels;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(labels) = parse_labels(Path::new("labels.txt"), text) {
        assert!(
            labels.len() <= text.lines().count() + 1,
            "{} labels",
            labels.len()
        );
    }
});
