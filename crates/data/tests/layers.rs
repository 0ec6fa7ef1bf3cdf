//! The layers of `src/`, bottom up, written once ([`LAYERS`]): every `crate::` path in a
//! module names a module of its own layer or of one below it, so the dependencies run one way
//! with no circle. Read from the source files, so a new import that points up fails here.

use std::fs;
use std::path::{Path, PathBuf};

/// The top-level modules of `src/`, bottom up: each may use only itself and those before it.
const LAYERS: [&str; 11] = [
    // Beside everything.
    "error",
    "atomic_file",
    // TF's queues, coordinator and queue runners.
    "queue",
    // The vocabulary the layers above share.
    "buffer_pool",
    "image",
    "bounding_box",
    "rng",
    "codec",
    // The image ops, the dataset formats, and the threads that wire them.
    "transforms",
    "format",
    "pipeline",
];

/// One `crate::` path that breaks the order.
#[derive(Debug, PartialEq)]
struct Violation {
    line: usize,
    named: String,
    why: &'static str,
}

/// The text of `source` without its `//` comments (doc comments included), lines kept.
fn code_of(source: &str) -> String {
    source
        .lines()
        .map(|line| line.find("//").map_or(line, |at| &line[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level names a `crate::` path at the start of `rest` reaches: one (`crate::x::..`),
/// or those of a brace group (`crate::{x::.., y}`).
fn names_after(rest: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    if !rest.starts_with('{') {
        return vec![ident(rest)];
    }
    let (mut depth, mut names, mut start) = (0, Vec::new(), 1);
    for (at, c) in rest.char_indices() {
        match c {
            '{' => depth += 1,
            '}' | ',' if depth == 1 => {
                let name = ident(&rest[start..at]);
                if !name.is_empty() {
                    names.push(name);
                }
                start = at + 1;
                if c == '}' {
                    break;
                }
            }
            '}' => depth -= 1,
            _ => {}
        }
    }
    names
}

/// The `crate::` paths of `source`, the text of a file in module `module`, that name a module
/// above it or a crate-root re-export (which would hide where the item lives).
fn violations(module: &str, source: &str) -> Vec<Violation> {
    let level = |name: &str| LAYERS.iter().position(|layer| *layer == name);
    let own = level(module).unwrap_or_else(|| panic!("module `{module}` is not in LAYERS"));
    let code = code_of(source);
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        if code[..at].ends_with('$') {
            continue; // `$crate::` in a macro names the crate that expands it.
        }
        let line = code[..at].matches('\n').count() + 1;
        for named in names_after(&code[at + "crate::".len()..]) {
            let why = match level(&named) {
                None => "names a crate-root re-export or an unknown module, not a layer",
                Some(other) if other > own => "names a higher layer",
                Some(_) => continue,
            };
            found.push(Violation { line, named, why });
        }
    }
    found
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_module_uses_only_its_own_layer_and_those_below() {
    let src = src();
    let mut broken = Vec::new();
    for file in rust_files(&src) {
        let relative = file.strip_prefix(&src).unwrap();
        if relative == Path::new("lib.rs") {
            continue; // The root declares the layers and re-exports them.
        }
        let first = relative.components().next().unwrap().as_os_str();
        let module = first.to_str().unwrap().trim_end_matches(".rs");
        let source = fs::read_to_string(&file).unwrap();
        assert!(
            !code_of(&source).contains("super::super"),
            "{}: `super::super` climbs out of its folder; name the module with `crate::`",
            relative.display()
        );
        for v in violations(module, &source) {
            let named = &v.named;
            broken.push(format!(
                "{}:{}: `crate::{named}` {} (module `{module}`)",
                relative.display(),
                v.line,
                v.why
            ));
        }
    }
    assert!(
        broken.is_empty(),
        "imports against LAYERS:\n{}",
        broken.join("\n")
    );
}

#[test]
fn lib_rs_declares_exactly_the_layers() {
    let lib = fs::read_to_string(src().join("lib.rs")).unwrap();
    let mut declared: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.trim_start_matches("pub ").strip_prefix("mod "))
        .map(|l| l.trim_end_matches(';'))
        .collect();
    declared.sort_unstable();
    let mut layers = LAYERS.to_vec();
    layers.sort_unstable();
    assert_eq!(
        declared, layers,
        "a module of lib.rs missing from LAYERS, or the reverse"
    );
}

#[test]
fn the_check_catches_an_upward_import_and_a_root_re_export() {
    let source = "//! use crate::pipeline::X; in a comment is fine\n\
                  use crate::error::Error;\n\
                  use crate::{rng::Rng,\n    pipeline::HostBatch};\n\
                  fn f() { crate::Pipeline::start(); $crate::pipeline::x() }\n";
    let found: Vec<(usize, String)> = violations("image", source)
        .into_iter()
        .map(|v| (v.line, v.named))
        .collect();
    // `rng` sits above `image`, `pipeline` further up, `Pipeline` is a root re-export.
    let want = [(3, "rng"), (3, "pipeline"), (5, "Pipeline")];
    assert_eq!(found, want.map(|(line, name)| (line, name.to_string())));
}
