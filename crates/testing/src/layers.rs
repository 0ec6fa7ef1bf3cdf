//! The layer-order check of every crate's `tests/layers.rs`: a crate's top-level modules listed
//! bottom up ([`Layering`]), and every `crate::` path in a module's files naming a module of its
//! own layer or of one below it, so that dependencies run one way with no circle. A folder may
//! order its own submodules the same way (`within`). Read from the source files, so a new
//! import that points up fails the crate's test. Also the check that a target built without a
//! test harness (`test = false`) holds no unit tests ([`assert_no_unit_tests`]).

use std::fs;
use std::path::{Path, PathBuf};

/// A crate's layers, bottom up: each module may use only itself and those before it.
#[derive(Clone, Copy, Debug)]
pub struct Layering<'a> {
    /// The top-level modules of `src/` (those `lib.rs` declares), bottom up.
    pub layers: &'a [&'a str],
    /// Top-level modules whose own submodules are layered too, bottom up: inside such a module
    /// a file may name (as `crate::module::sub`) only its own submodule or those before it.
    pub within: &'a [(&'a str, &'a [&'a str])],
}

/// One `crate::` path that breaks the order.
#[derive(Debug, PartialEq)]
pub struct Violation {
    /// The line of the path in its file, from 1.
    pub line: usize,
    /// The module (or re-exported item) the path names, at the level that breaks the order.
    pub named: String,
    /// Why that breaks the order.
    pub why: &'static str,
}

/// The text of `source` without its `//` comments (doc comments included), lines kept.
fn code_of(source: &str) -> String {
    source
        .lines()
        .map(|line| line.find("//").map_or(line, |at| &line[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names a path reaches at the start of `rest` (after `crate::` or `crate::x::`), each with
/// the text that follows it: one (`x::..`), or those of a brace group (`{x::.., y}`).
fn names_after(rest: &str) -> Vec<(String, &str)> {
    let ident = |s: &str| -> (String, usize) {
        let trimmed = s.trim_start();
        let name: String = trimmed
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let end = s.len() - trimmed.len() + name.len();
        (name, end)
    };
    if !rest.starts_with('{') {
        let (name, end) = ident(rest);
        return vec![(name, &rest[end..])];
    }
    let (mut depth, mut names, mut start) = (0, Vec::new(), 1);
    for (at, c) in rest.char_indices() {
        match c {
            '{' => depth += 1,
            '}' | ',' if depth == 1 => {
                let (name, end) = ident(&rest[start..at]);
                if !name.is_empty() {
                    names.push((name, &rest[start + end..at]));
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

impl Layering<'_> {
    /// The `crate::` paths of `source`, the text of a file at `module` (its top-level module,
    /// then its submodule where that module is layered within), that name a module above it or
    /// a crate-root re-export (which would hide where the item lives).
    pub fn violations(&self, module: &[&str], source: &str) -> Vec<Violation> {
        let level = |name: &str| self.layers.iter().position(|layer| *layer == name);
        let own = level(module[0])
            .unwrap_or_else(|| panic!("module `{}` is not in the layers", module[0]));
        let code = code_of(source);
        let mut found = Vec::new();
        for (at, _) in code.match_indices("crate::") {
            if code[..at].ends_with('$') {
                continue; // `$crate::` in a macro names the crate that expands it.
            }
            let line = code[..at].matches('\n').count() + 1;
            for (named, rest) in names_after(&code[at + "crate::".len()..]) {
                let why = match level(&named) {
                    None => Some("names a crate-root re-export or an unknown module, not a layer"),
                    Some(other) if other > own => Some("names a higher layer"),
                    Some(_) if named == module[0] => {
                        found.extend(self.inner_violations(module, rest, line));
                        None
                    }
                    Some(_) => None,
                };
                if let Some(why) = why {
                    found.push(Violation { line, named, why });
                }
            }
        }
        found
    }

    /// The violations of a path into the file's own top-level module (`rest` after its name),
    /// where that module layers its submodules.
    fn inner_violations(&self, module: &[&str], rest: &str, line: usize) -> Vec<Violation> {
        let Some((_, order)) = self.within.iter().find(|(name, _)| *name == module[0]) else {
            return Vec::new();
        };
        let Some(own) = module.get(1) else {
            return Vec::new(); // The folder's `mod.rs` declares its layers.
        };
        let level = |name: &str| order.iter().position(|layer| *layer == name);
        let own = level(own).unwrap_or_else(|| panic!("`{own}` is not in {}'s layers", module[0]));
        let Some(rest) = rest.strip_prefix("::") else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for (named, _) in names_after(rest) {
            let why = match level(&named) {
                None => "names an item of the folder's root or an unknown module, not a layer",
                Some(other) if other > own => "names a higher layer",
                Some(_) => continue,
            };
            found.push(Violation { line, named, why });
        }
        found
    }

    /// Every broken import under `src`, one line each (`file:line: ...`); empty when the crate
    /// keeps its layers. Also flags `super::super`, which climbs out of a folder.
    pub fn check(&self, src: &Path) -> Vec<String> {
        let mut broken = Vec::new();
        for file in rust_files(src) {
            let relative = file.strip_prefix(src).unwrap();
            if relative == Path::new("lib.rs") {
                continue; // The root declares the layers and re-exports them.
            }
            let module: Vec<&str> = relative
                .components()
                .map(|c| c.as_os_str().to_str().unwrap().trim_end_matches(".rs"))
                .filter(|name| *name != "mod")
                .collect();
            let source = fs::read_to_string(&file).unwrap();
            if code_of(&source).contains("super::super") {
                broken.push(format!(
                    "{}: `super::super` climbs out of its folder; name the module with `crate::`",
                    relative.display()
                ));
            }
            for v in self.violations(&module, &source) {
                broken.push(format!(
                    "{}:{}: `{}` {} (module `{}`)",
                    relative.display(),
                    v.line,
                    v.named,
                    v.why,
                    module.join("::")
                ));
            }
        }
        broken
    }

    /// Panics unless the crate at `manifest_dir` (its `CARGO_MANIFEST_DIR`) keeps its layers:
    /// [`assert_declared`](Self::assert_declared), then no broken import ([`check`](Self::check)).
    pub fn assert_kept(&self, manifest_dir: &str) {
        let src = Path::new(manifest_dir).join("src");
        self.assert_declared(&src);
        let broken = self.check(&src);
        assert!(
            broken.is_empty(),
            "imports against the layers:\n{}",
            broken.join("\n")
        );
    }

    /// Panics unless `lib.rs` under `src` declares exactly the layers (`mod x;` or `pub mod x;`
    /// lines), and each layered folder's `mod.rs` exactly its own.
    pub fn assert_declared(&self, src: &Path) {
        let declared = |file: PathBuf| -> Vec<String> {
            let text = fs::read_to_string(&file).unwrap();
            let mut names: Vec<String> = text
                .lines()
                .map(|l| {
                    l.trim_start_matches("pub(crate) ")
                        .trim_start_matches("pub ")
                })
                .filter_map(|l| l.strip_prefix("mod "))
                .map(|l| l.trim_end_matches(';').to_string())
                .collect();
            names.sort_unstable();
            names
        };
        let sorted = |layers: &[&str]| -> Vec<String> {
            let mut names: Vec<String> = layers.iter().map(|s| s.to_string()).collect();
            names.sort_unstable();
            names
        };
        assert_eq!(
            declared(src.join("lib.rs")),
            sorted(self.layers),
            "a module of lib.rs missing from the layers, or the reverse"
        );
        for (folder, order) in self.within {
            assert_eq!(
                declared(src.join(folder).join("mod.rs")),
                sorted(order),
                "a module of {folder}/mod.rs missing from its layers, or the reverse"
            );
        }
    }
}

/// Panics if a `.rs` file under `dir` holds a unit test (`#[test]` or `#[cfg(test)]` outside
/// comments): for the targets whose `Cargo.toml` says `test = false`, so that `cargo test`
/// links no test program of them, and where such a test would never run.
pub fn assert_no_unit_tests(dir: &Path) {
    let holding: Vec<String> = rust_files(dir)
        .into_iter()
        .filter(|file| {
            let code = code_of(&fs::read_to_string(file).unwrap());
            code.contains("#[test]") || code.contains("#[cfg(test)]")
        })
        .map(|file| file.display().to_string())
        .collect();
    assert!(
        holding.is_empty(),
        "unit tests where Cargo.toml says `test = false` (they would never run): {}",
        holding.join(", ")
    );
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

#[cfg(test)]
mod tests {
    use super::*;

    const LAYERING: Layering = Layering {
        layers: &["error", "image", "rng", "flex", "pipeline"],
        within: &[("flex", &["memory", "gemm", "conv"])],
    };

    fn found(module: &[&str], source: &str) -> Vec<(usize, String)> {
        let violations = LAYERING.violations(module, source);
        violations.into_iter().map(|v| (v.line, v.named)).collect()
    }

    #[test]
    fn an_upward_import_and_a_root_re_export_are_caught() {
        let source = "//! use crate::pipeline::X; in a comment is fine\n\
                      use crate::error::Error;\n\
                      use crate::{rng::Rng,\n    pipeline::HostBatch};\n\
                      fn f() { crate::Pipeline::start(); $crate::pipeline::x() }\n";
        // `rng` sits above `image`, `pipeline` further up, `Pipeline` is a root re-export.
        let want = [(3, "rng"), (3, "pipeline"), (5, "Pipeline")];
        assert_eq!(
            found(&["image"], source),
            want.map(|(l, n)| (l, n.to_string()))
        );
    }

    #[test]
    fn a_layered_folder_orders_its_submodules() {
        let source = "use crate::flex::memory::buffers;\n\
                      use crate::flex::conv::passes;\n\
                      use crate::flex::{gemm::x, conv::y};\n\
                      use crate::flex::dims4;\n\
                      use crate::error::Error;\n";
        // From `flex::gemm`: `conv` is above it, `dims4` no submodule; `memory` is below.
        let want = [(2, "conv"), (3, "conv"), (4, "dims4")];
        assert_eq!(
            found(&["flex", "gemm"], source),
            want.map(|(l, n)| (l, n.to_string()))
        );
        // Outside the folder, any of its submodules may be named.
        assert!(found(&["pipeline"], source).is_empty());
    }
}
