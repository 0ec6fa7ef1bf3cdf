//! Cargo.toml builds the library and towers-serve without a test harness (`test = false`): a
//! unit test in `src/` would never run.

use std::path::Path;

use towers_testing::layers::assert_no_unit_tests;

#[test]
fn the_library_and_towers_serve_hold_no_unit_tests() {
    assert_no_unit_tests(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
}
