//! The tree the rules read: the files under a folder of the package, each as its path (relative
//! to the package root, `src/llm/sse.rs`) and its text, and the views of a text the rules look
//! at (code without comments, production code without unit tests). Knows no rule.

use std::fs;
use std::path::Path;

/// One file: its path relative to the package root, and its text.
pub type File = (String, String);

/// The package root, where `src/`, `tests/` and `build.rs` are.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The files under `folder` (relative to the root), at any depth, whose name ends in `.ext`,
/// sorted by path.
pub fn files(folder: &str, ext: &str) -> Vec<File> {
    let mut paths = Vec::new();
    walk(&root().join(folder), ext, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let rel = path
                .strip_prefix(root())
                .expect("under the package root")
                .display()
                .to_string();
            let text = fs::read_to_string(&path).expect("readable source");
            (rel, text)
        })
        .collect()
}

fn walk(dir: &Path, ext: &str, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).expect("readable source dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            walk(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

/// The Rust sources of the library and the binary.
pub fn rust_sources() -> Vec<File> {
    files("src", "rs")
}

/// The built-in Fennel files.
pub fn fennel_sources() -> Vec<File> {
    files("src", "fnl")
}

/// The names of the entries directly in `src/` (`llm`, `cancel.rs`, `lib.rs`).
pub fn top_level_of_src() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root().join("src"))
        .expect("readable src")
        .map(|entry| {
            entry
                .expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// A planted tree for a rule's own test: (path, text) pairs made owned.
pub fn planted(files: &[(&str, &str)]) -> Vec<File> {
    files
        .iter()
        .map(|(rel, text)| (rel.to_string(), text.to_string()))
        .collect()
}

/// Fails with every offence a rule found in the tree, under a line saying what to do about it.
pub fn assert_none(offences: &[String], what: &str) {
    assert!(offences.is_empty(), "{what}:\n{}", offences.join("\n"));
}

/// Code lines only: comments and doc comments are allowed to mention anything.
pub fn code(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text before a file's `#[cfg(test)]` module: what ships.
pub fn before_unit_tests(text: &str) -> impl Iterator<Item = &str> {
    text.lines().take_while(|l| !l.starts_with("#[cfg(test)]"))
}

/// Production code only: the text before a file's `#[cfg(test)]` module, without comments.
pub fn production_code(text: &str) -> String {
    code(&before_unit_tests(text).collect::<Vec<_>>().join("\n"))
}

/// The identifier `s` starts with (`llm::sse` → `llm`).
pub fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}
