//! The architecture, checked: imports point one way through the layers, the driver
//! stays behind its seam, and functions stay short enough to read on one screen.
//!
//! ```text
//! main → commands (the CLI, signals, one function per subcommand)
//!   → engine | check | count
//!   → telemetry → action → db → config → sql → diagnostic → lock | duration
//! ```
//!
//! A kind of action is one folder, `src/action/<kind>/`, whose `config.rs` (its
//! `[action]` table, as `src/action/message/config.rs` is the brokers' message
//! keys) is in the config layer, the rest in the action layer: the layer is the
//! file's path's (see [`unit`]).
//!
//! And the maps of the source — `src/lib.rs`'s and CONTRIBUTING.md's — name every
//! module; a folder of `src/action/` once, its own `mod.rs` naming its files.

use std::path::{Path, PathBuf};

/// The layers, top first. A module may import its own layer's modules only when it
/// is the same top-level module, and any module of a lower layer.
const LAYERS: &[&[&str]] = &[
    &["main", "lib", "commands"],
    &["engine", "check", "count"],
    &["telemetry"],
    &["action"],
    &["db"],
    &["config"],
    &["sql"],
    &["diagnostic"],
    &["lock", "duration"],
];

/// Where the database driver may be named.
const DRIVER_ALLOWED: &[&str] = &["db", "check"];

/// The longest function the source may hold, in lines.
const LONGEST_FUNCTION: usize = 80;

fn source_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            source_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

fn all_sources() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    source_files(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let relative = path
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&path).expect("read a source file");
            (relative, text)
        })
        .collect()
}

/// The top-level module a file belongs to: `engine/worker.rs` → `engine`.
fn top_module(relative: &str) -> &str {
    let first = relative.split('/').next().unwrap_or(relative);
    first.strip_suffix(".rs").unwrap_or(first)
}

/// The top-level module whose layer a module path is in: its first segment, except
/// that a kind's table (`action::<kind>::config`, and the brokers' shared message
/// keys `action::message::config`) is the config layer's.
fn unit(path: &[String]) -> &str {
    match path {
        [action, _, config, ..] if action == "action" && config == "config" => "config",
        [first, ..] => first,
        [] => "lib",
    }
}

fn rank(module: &str) -> usize {
    LAYERS
        .iter()
        .position(|layer| layer.contains(&module))
        .unwrap_or_else(|| panic!("module `{module}` is in no layer: add it to LAYERS"))
}

/// The module path of every `crate::…` and `super::…` the text of the module
/// `module` names, outside comments: `crate::action::sql::config::{…}` →
/// `action::sql::config`. `super::` is resolved from `module`, up to the first
/// `#[cfg(test)]` (a test module's `super` is the file itself).
fn references(module: &[String], text: &str) -> Vec<(usize, Vec<String>)> {
    let mut found = Vec::new();
    let mut in_tests = false;
    for (index, line) in text.lines().enumerate() {
        in_tests |= line.trim_start().starts_with("#[cfg(test)]");
        let code = line.split("//").next().unwrap_or("");
        for (at, _) in code.match_indices("crate::") {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            found.push((index + 1, path_from(&code[at + "crate::".len()..])));
        }
        for (at, _) in code.match_indices("super::").filter(|_| !in_tests) {
            if code[..at].ends_with("super::") {
                continue;
            }
            let mut path = module.to_vec();
            let mut rest = &code[at..];
            while let Some(after) = rest.strip_prefix("super::") {
                path.pop();
                rest = after;
            }
            path.extend(path_from(rest));
            found.push((index + 1, path));
        }
    }
    found.retain(|(_, path)| !path.is_empty());
    found
}

/// The segments of the path at the start of `text`: `a::b::{c, d}` → `a`, `b`.
fn path_from(text: &str) -> Vec<String> {
    let path: String = text
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    path.split("::")
        .filter(|s| !s.is_empty() && !s.contains(':'))
        .map(str::to_string)
        .collect()
}

/// Imports point down the layers only; no module reaches up or sideways. A kind's
/// `config.rs` is in the config layer: `crate::config` may name it, and it may
/// name nothing of the action layer, its own folder's runtime included.
#[test]
fn imports_point_one_way_through_the_layers() {
    let mut wrong = Vec::new();
    for (file, text) in all_sources() {
        if file == "lib.rs" {
            continue;
        }
        let module = module_segments(&file);
        let from = unit(&module);
        for (line, target) in references(&module, &text) {
            let to = unit(&target);
            if to != from && rank(to) <= rank(from) {
                let target = target.join("::");
                wrong.push(format!("src/{file}:{line}: `{from}` imports `{target}`"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

/// Only `db/` and `check/` name the database driver.
#[test]
fn the_driver_stays_behind_the_db_seam() {
    let leaks: Vec<String> = all_sources()
        .into_iter()
        .filter(|(file, text)| {
            !DRIVER_ALLOWED.contains(&top_module(file)) && text.contains("mysql_async")
        })
        .map(|(file, _)| format!("src/{file}"))
        .collect();
    assert!(
        leaks.is_empty(),
        "mysql_async named outside db/ and check/: {leaks:?}"
    );
}

/// The module a source file is: `engine/lease/mod.rs` → `engine::lease`.
fn module_path(relative: &str) -> String {
    let path = relative.strip_suffix(".rs").unwrap_or(relative);
    let path = path.strip_suffix("/mod").unwrap_or(path);
    path.replace('/', "::")
}

/// [`module_path`] as its segments (`main.rs` is `main`).
fn module_segments(relative: &str) -> Vec<String> {
    module_path(relative)
        .split("::")
        .map(str::to_string)
        .collect()
}

/// The doc (`//!`) of `file`, a source file.
fn module_doc(text: &str) -> String {
    text.lines()
        .filter_map(|line| line.strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A file of a folder of `src/action/` (a kind, or the message the brokers share):
/// the folder, and the file's module within it (`""` for its `mod.rs`).
fn in_action_folder(file: &str) -> Option<(&str, String)> {
    let (folder, rest) = file.strip_prefix("action/")?.split_once('/')?;
    let within = module_path(rest);
    Some((
        folder,
        if within == "mod" {
            String::new()
        } else {
            within
        },
    ))
}

/// Every module under `src/` is named in the map of `src/lib.rs` (as `` `a::b` ``)
/// and in CONTRIBUTING.md's Layout (as `src/a/b.rs`, or `src/a/b/` for a folder).
/// A folder of `src/action/` — a kind is one folder — is named there once (as
/// `` `action::http` `` and `src/action/http/`), and its `mod.rs` names its files
/// (`` `client` ``).
#[test]
fn the_maps_name_every_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources = all_sources();
    let map = module_doc(&std::fs::read_to_string(root.join("src/lib.rs")).expect("read lib.rs"));
    let contributing =
        std::fs::read_to_string(root.join("CONTRIBUTING.md")).expect("read CONTRIBUTING.md");
    let mut missing = Vec::new();
    for (file, _) in &sources {
        if file == "lib.rs" || file == "main.rs" {
            continue;
        }
        if let Some((folder, within)) = in_action_folder(file) {
            let folder_doc = sources
                .iter()
                .find(|(other, _)| *other == format!("action/{folder}/mod.rs"))
                .map(|(_, text)| module_doc(text))
                .unwrap_or_default();
            if !within.is_empty() && !folder_doc.contains(&format!("`{within}`")) {
                missing.push(format!(
                    "src/action/{folder}/mod.rs does not name `{within}`"
                ));
            }
            if !map.contains(&format!("`action::{folder}`")) {
                missing.push(format!("src/lib.rs does not name `action::{folder}`"));
            }
            if !contributing.contains(&format!("src/action/{folder}/")) {
                missing.push(format!(
                    "CONTRIBUTING.md does not name src/action/{folder}/"
                ));
            }
            continue;
        }
        let module = module_path(file);
        if !map.contains(&format!("`{module}`")) {
            missing.push(format!("src/lib.rs does not name `{module}`"));
        }
        let folder = file.strip_suffix("mod.rs").map(|dir| format!("src/{dir}"));
        let named = contributing.contains(&format!("src/{file}"))
            || folder.is_some_and(|folder| contributing.contains(&folder));
        if !named {
            missing.push(format!("CONTRIBUTING.md does not name src/{file}"));
        }
    }
    missing.dedup();
    assert!(
        missing.is_empty(),
        "the maps miss modules:\n{}",
        missing.join("\n")
    );
}

/// No function in `src/` is longer than [`LONGEST_FUNCTION`] lines.
#[test]
fn functions_fit_on_a_screen() {
    let mut long = Vec::new();
    for (file, text) in all_sources() {
        let lines: Vec<&str> = text.lines().collect();
        for (start, length, name) in functions(&lines) {
            if length > LONGEST_FUNCTION {
                long.push(format!("src/{file}:{start}: fn {name} is {length} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {LONGEST_FUNCTION} lines:\n{}",
        long.join("\n")
    );
}

/// Each `fn` with a body: its first line (1-based), its length in lines, its name.
fn functions(lines: &[&str]) -> Vec<(usize, usize, String)> {
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else { continue };
        let mut depth = 0i64;
        let mut opened = false;
        for (offset, body_line) in lines[start..].iter().enumerate() {
            let code = without_literals(body_line);
            if !opened && code.trim_end().ends_with(';') {
                break;
            }
            depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
            opened |= code.contains('{');
            if opened && depth <= 0 {
                found.push((start + 1, offset + 1, name));
                break;
            }
        }
    }
    found
}

fn fn_name(line: &str) -> Option<String> {
    let code = line.trim_start();
    let code = code.split("//").next()?;
    let at = code.find("fn ")?;
    let before = &code[..at];
    let qualifiers = [
        "pub",
        "pub(crate)",
        "pub(super)",
        "async",
        "const",
        "unsafe",
        "extern",
    ];
    if !before.split_whitespace().all(|w| qualifiers.contains(&w)) {
        return None;
    }
    let name: String = code[at + 3..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// A line with its string and character literals and its comment taken out, so
/// their braces do not count.
fn without_literals(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' if in_string => {
                chars.next();
            }
            '"' => in_string = !in_string,
            '\'' if !in_string => {
                // A char literal ('{', '\n'); a lifetime has no closing quote soon.
                let rest: String = chars.clone().take(3).collect();
                if let Some(end) = rest.find('\'') {
                    for _ in 0..=end {
                        chars.next();
                    }
                }
            }
            '/' if !in_string && chars.peek() == Some(&'/') => break,
            _ if !in_string => out.push(c),
            _ => {}
        }
    }
    out
}
