//! Cargo.toml builds the library and towers-serve without a test harness (`test = false`): a
//! unit test in `src/` would never run.

use std::path::Path;

use towers_testing::layers::assert_no_unit_tests;

#[test]
fn the_library_and_towers_serve_hold_no_unit_tests() {
    assert_no_unit_tests(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
}

/// Cargo only warns when a profile override names no package in the build, and the crate then
/// quietly compiles at the `"*"` override's opt-level 3 again: each name must be in Cargo.lock.
#[test]
fn every_crate_the_dev_profile_names_is_in_the_lock_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |file: &str| -> toml::Table {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        toml::from_str(&text).unwrap_or_else(|error| panic!("{file}: {error}"))
    };
    let locked: Vec<String> = read("Cargo.lock")["package"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| package["name"].as_str().unwrap().to_owned())
        .collect();
    let named = read("Cargo.toml")["profile"]["dev"]["package"]
        .as_table()
        .unwrap()
        .clone();
    let missing: Vec<&String> = named
        .keys()
        .filter(|name| *name != "*" && !locked.contains(name))
        .collect();
    assert!(named.len() > 1, "the dev profile names no crate");
    assert!(
        missing.is_empty(),
        "Cargo.toml's dev profile names {missing:?}, not in Cargo.lock"
    );
}
