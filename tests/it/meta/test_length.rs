//! The tests read like the code: no function in `tests/it` is longer than 80 lines,
//! counted from its `fn` line to its closing brace. A longer test is split into named
//! steps, or its variants into one behaviour run per variant.

use std::path::{Path, PathBuf};

/// The most lines a function of the tests may take.
const MOST_LINES: usize = 80;

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// The name of the function a line declares, with its indentation, if it declares one
/// with a body (`fn name(` at the start of the line, after `pub`, `async` and the like).
fn declared_fn(line: &str) -> Option<(&str, &str)> {
    let code = line.trim_start();
    let indent = &line[..line.len() - code.len()];
    let mut words = code;
    for qualifier in ["pub(crate) ", "pub(super) ", "pub ", "async "] {
        words = words.strip_prefix(qualifier).unwrap_or(words);
    }
    let name = words.strip_prefix("fn ")?;
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some((indent, &name[..end]))
}

/// Each function of `source` as its name and length in lines: from its `fn` line to
/// the first line after it that is its closing brace at the same indentation (rustfmt's
/// layout); a one-line function is one line. A declaration without a body (a
/// trait's) ends at its `;` and is skipped.
fn function_lengths(source: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = source.lines().collect();
    let mut lengths = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let Some((indent, name)) = declared_fn(line) else {
            continue;
        };
        if line.trim_end().ends_with(';') {
            continue;
        }
        if line.contains('{') && line.trim_end().ends_with('}') {
            lengths.push((name.to_string(), 1));
            continue;
        }
        let closing = format!("{indent}}}");
        if let Some(end) = lines[start..].iter().position(|l| *l == closing) {
            lengths.push((name.to_string(), end + 1));
        }
    }
    lengths
}

/// Every function in `tests/it` longer than [`MOST_LINES`], as `path::name (N lines)`.
fn too_long() -> Vec<(String, usize)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    let mut long = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).expect("read a test file");
        let relative = file.strip_prefix(&root).unwrap().display().to_string();
        for (name, lines) in function_lengths(&source) {
            if lines > MOST_LINES {
                long.push((format!("{relative}::{name}"), lines));
            }
        }
    }
    long
}

#[test]
fn no_test_function_is_longer_than_80_lines() {
    let long: Vec<String> = too_long()
        .iter()
        .map(|(name, lines)| format!("{name} ({lines} lines)"))
        .collect();
    assert!(
        long.is_empty(),
        "longer than {MOST_LINES} lines: split each into named steps or a behaviour run \
         per variant: {long:#?}"
    );
}

/// The count sees a function's whole body, a nested one's own, and no trait
/// declaration: what the check relies on.
#[test]
fn the_count_runs_from_fn_to_its_closing_brace() {
    let source = "\
/// A doc.
#[test]
fn outer() {
    let x = 1;
    fn inner() {
        body();
    }
}
trait T {
    fn declared(&self);
}
pub(crate) async fn shared(a: u8) -> u8 {
    a
}
    fn one() { 1 }
";
    assert_eq!(
        function_lengths(source),
        vec![
            ("outer".to_string(), 6),
            ("inner".to_string(), 3),
            ("shared".to_string(), 3),
            ("one".to_string(), 1)
        ]
    );
}
