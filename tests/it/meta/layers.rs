//! The architecture, checked: imports point one way through the layers — and
//! between the files of one module, no file imports itself through others — the
//! driver stays behind its seam, and functions stay short enough to read on one
//! screen.
//!
//! ```text
//! main → commands (the CLI, signals, one function per subcommand)
//!   → engine | check | count | console
//!   → telemetry → action → db → config → sql → diagnostic → lock | duration | backoff | trace_context | sketch
//! ```
//!
//! A kind of action is one folder, `src/action/<kind>/`, all of it in the action
//! layer, its `config.rs` (its `[action]` table) too: the config layer reads
//! `[action]` through a type the action layer's registry hands it, and names no
//! kind.
//!
//! And the maps of the source — `src/lib.rs`'s and CONTRIBUTING.md's — name every
//! module; a folder of `src/action/` once, its own `mod.rs` naming its files — but
//! a kind's folder, which its registration line names (see [`registered_kinds`]).

use std::path::{Path, PathBuf};

/// The layers, top first. A module may import its own layer's modules only when it
/// is the same top-level module, and any module of a lower layer.
const LAYERS: &[&[&str]] = &[
    &["main", "lib", "commands"],
    &["engine", "check", "count", "console"],
    &["telemetry"],
    &["action"],
    &["db"],
    &["config"],
    &["sql"],
    &["diagnostic"],
    &["lock", "duration", "backoff", "trace_context", "sketch"],
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

/// The top-level module whose layer a module path is in: its first segment.
fn unit(path: &[String]) -> &str {
    match path {
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
/// `config.rs` is in the action layer: the config layer names no kind, and no
/// file of it `#[path]`s into another layer's folder.
#[test]
fn imports_point_one_way_through_the_layers() {
    let mut wrong = Vec::new();
    for (file, text) in all_sources() {
        if file == "lib.rs" {
            continue;
        }
        let module = module_segments(&file);
        let from = unit(&module);
        let elsewhere = text
            .lines()
            .enumerate()
            .filter(|(_, line)| line.trim_start().starts_with("#[path") && line.contains(".."));
        for (index, line) in elsewhere {
            let line = line.trim();
            wrong.push(format!(
                "src/{file}:{}: `{from}` declares another folder's file: {line}",
                index + 1
            ));
        }
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

/// The folders of `src/action/` that are kinds: those the registry's lines in
/// `src/action/mod.rs` name (`"http" => Http(http::{…}),`).
fn registered_kinds(sources: &[(String, String)]) -> Vec<String> {
    let registry = sources
        .iter()
        .find(|(file, _)| file == "action/mod.rs")
        .map(|(_, text)| text.as_str())
        .unwrap_or_default();
    let kinds: Vec<String> = registry
        .lines()
        .filter_map(|line| line.trim().strip_prefix('"')?.split_once("\" => "))
        .filter_map(|(_, rest)| Some(rest.split_once('(')?.1.split_once("::")?.0.to_string()))
        .collect();
    assert!(!kinds.is_empty(), "no kind registered in src/action/mod.rs");
    kinds
}

/// Every module under `src/` is named in the map of `src/lib.rs` (as `` `a::b` ``)
/// and in CONTRIBUTING.md's Layout (as `src/a/b.rs`, or `src/a/b/` for a folder).
/// A folder of `src/action/` is named there once (as `` `action::message` `` and
/// `src/action/message/`) — a kind's folder not at all: its registration line
/// names it, and the maps say what a kind is — and its `mod.rs` names its files
/// (`` `client` ``).
#[test]
fn the_maps_name_every_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources = all_sources();
    let kinds = registered_kinds(&sources);
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
            if kinds.iter().any(|kind| kind == folder) {
                continue;
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

// Files within a module: no two files of one top-level module import each other,
// directly or through others.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// No file of `src/` imports itself through other files of its top-level module:
/// every `use`, and every path in the code (`super::…`, `self::…`, `crate::…` of
/// the same module, a child module's name), points one way between its files. A
/// re-export (`pub use`) is a door, not a use: a path through it lands on the file
/// behind it.
#[test]
fn no_file_imports_itself_through_others() {
    let cycles = file_cycles(&all_sources());
    assert!(
        cycles.is_empty(),
        "files that import each other (move what both need into a file of its own):\n\n{}",
        cycles.join("\n\n")
    );
}

/// The check above finds a cycle that runs through a child module's name, a
/// re-export and `super::`, names each step, and passes the same files once the
/// cycle is cut.
#[test]
fn the_cycle_check_names_each_step() {
    let knot = [
        (
            "a/mod.rs",
            "pub mod b;\npub mod c;\npub use c::C;\npub struct A;\nfn f() { b::g(); }\n",
        ),
        ("a/b.rs", "use super::C;\npub fn g() {}\n"),
        (
            "a/c.rs",
            "// super::A in a comment is no import\nuse super::A;\npub struct C;\n",
        ),
    ];
    let sources: Vec<(String, String)> = knot
        .iter()
        .map(|(file, text)| (file.to_string(), text.to_string()))
        .collect();
    let cycles = file_cycles(&sources);
    assert_eq!(cycles.len(), 1, "{cycles:#?}");
    for step in [
        "src/a/mod.rs:5: b::g → a/b.rs",
        "src/a/b.rs:1: super::C → a/c.rs",
        "src/a/c.rs:2: super::A → a/mod.rs",
    ] {
        assert!(cycles[0].contains(step), "{step}: {}", cycles[0]);
    }
    let mut cut = sources;
    cut[2].1 = "pub struct C;\n".to_string();
    assert!(file_cycles(&cut).is_empty());
}

/// Each knot of files that import each other, as its shortest cycle (with the
/// line and path that makes each step) and the files it ties together.
fn file_cycles(sources: &[(String, String)]) -> Vec<String> {
    let graph = file_graph(sources);
    let mut reported = BTreeSet::new();
    let mut cycles = Vec::new();
    for start in graph.keys() {
        if reported.contains(start) {
            continue;
        }
        let Some(cycle) = shortest_cycle(&graph, start) else {
            continue;
        };
        let knot = knot_of(&graph, start);
        reported.extend(knot.iter().cloned());
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|step| format!("  {} → {}", graph[&step[0]][&step[1]], step[1]))
            .collect();
        let mut text = format!("src/{start} imports itself through\n{}", steps.join("\n"));
        if knot.len() > cycle.len() - 1 {
            let files: Vec<&str> = knot.iter().map(String::as_str).collect();
            text.push_str(&format!(
                "\n  (one knot of {} files: {})",
                files.len(),
                files.join(", ")
            ));
        }
        cycles.push(text);
    }
    cycles
}

/// The files a file imports within its top-level module, each with the first
/// line and path that does.
type FileGraph = BTreeMap<String, BTreeMap<String, String>>;

/// A module path (`["engine", "lease"]`) and the file it is.
type Modules = BTreeMap<Vec<String>, String>;

/// What a file names: where each name it imports comes from (an absolute path).
type Imports = BTreeMap<String, Vec<String>>;

fn file_graph(sources: &[(String, String)]) -> FileGraph {
    let modules: Modules = sources
        .iter()
        .map(|(file, _)| (segments(&module_path(file)), file.clone()))
        .collect();
    let named: Vec<(&str, Vec<Named>, Imports)> = sources
        .iter()
        .map(|(file, text)| {
            let code = code_of(text);
            let mut named = named_paths(&code, &segments(&module_path(file)));
            // A name passed on and used here too is used.
            let uses = without_declarations(&code);
            for n in named.iter_mut().filter(|n| n.reexport) {
                n.reexport = n.alias.as_ref().is_none_or(|name| words(&uses, name) == 0);
            }
            let imports = named
                .iter()
                .filter_map(|n| {
                    let alias = n.alias.clone()?;
                    Some((
                        alias,
                        absolute(&n.path, &n.scope, &Imports::new(), &modules)?,
                    ))
                })
                .collect();
            (file.as_str(), named, imports)
        })
        .collect();
    let imports_of: BTreeMap<&str, &Imports> = named.iter().map(|(f, _, i)| (*f, i)).collect();
    let mut graph = FileGraph::new();
    for (file, paths, imports) in &named {
        for n in paths.iter().filter(|n| !n.reexport) {
            let Some(path) = absolute(&n.path, &n.scope, imports, &modules) else {
                continue;
            };
            let Some(target) = landing(path, &modules, &imports_of) else {
                continue;
            };
            if target != *file && top_module(target) == top_module(file) {
                let why = format!("src/{file}:{}: {}", n.line, n.path.join("::"));
                let edges = graph.entry(file.to_string()).or_default();
                edges.entry(target.to_string()).or_insert(why);
            }
        }
    }
    graph
}

/// A path a file names, as written.
struct Named {
    line: usize,
    path: Vec<String>,
    /// Named by a `pub use`: a door to another file, not a use of it.
    reexport: bool,
    /// The name a `use` imports it as.
    alias: Option<String>,
    /// The module it is named in (the file's, and any inline module it is in):
    /// where `self` and `super` start from.
    scope: Vec<String>,
}

/// Every path `code` names: each leaf of every `use` tree, and every path of two
/// or more segments in the code.
fn named_paths(code: &str, module: &[String]) -> Vec<Named> {
    let chars: Vec<char> = code.chars().collect();
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let ident_end = |from: usize| {
        (from..chars.len())
            .find(|&j| !is_ident(chars[j]))
            .unwrap_or(chars.len())
    };
    let mut found = Vec::new();
    let (mut line, mut depth, mut at) = (1, 0usize, 0);
    // Inline modules (`mod tests { … }`), with the depth they close at.
    let mut inline: Vec<(String, usize)> = Vec::new();
    while at < chars.len() {
        match chars[at] {
            '\n' => line += 1,
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, closes)| *closes == depth) {
                    inline.pop();
                }
            }
            _ => {}
        }
        let starts_word =
            is_ident(chars[at]) && (at == 0 || !(is_ident(chars[at - 1]) || chars[at - 1] == ':'));
        if !starts_word {
            at += 1;
            continue;
        }
        let end = ident_end(at);
        let word: String = chars[at..end].iter().collect();
        let mut scope = module.to_vec();
        scope.extend(inline.iter().map(|(name, _)| name.clone()));
        let rest: String = chars[end..chars.len().min(end + 200)].iter().collect();
        if word == "mod" {
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|&c| is_ident(c))
                .collect();
            if rest.trim_start()[name.len()..]
                .trim_start()
                .starts_with('{')
            {
                inline.push((name, depth));
            }
            at = end;
            continue;
        }
        if word == "use" {
            let (named, stop) = use_declaration(&chars, at, end, line, &scope);
            line += chars[end..stop].iter().filter(|&&c| c == '\n').count();
            found.extend(named);
            at = stop;
            continue;
        }
        let (path, next) = path_at(&chars, word, end);
        if path.len() > 1 {
            found.push(Named {
                line,
                path,
                reexport: false,
                alias: None,
                scope,
            });
        }
        at = next;
    }
    found
}

/// The leaves of the `use` declaration whose keyword spans `at..end` (named on
/// `line`, in `scope`), and where it ends (its `;`).
fn use_declaration(
    chars: &[char],
    at: usize,
    end: usize,
    line: usize,
    scope: &[String],
) -> (Vec<Named>, usize) {
    let stop = (end..chars.len())
        .find(|&j| chars[j] == ';')
        .unwrap_or(chars.len());
    let tree: String = chars[end..stop].iter().collect();
    let before: String = chars[at.saturating_sub(16)..at].iter().collect();
    let before = before.trim_end();
    let reexport = before.ends_with("pub") || (before.ends_with(')') && before.contains("pub("));
    let named = use_leaves(&tree)
        .into_iter()
        .map(|(path, alias)| Named {
            line,
            path,
            reexport,
            alias: Some(alias),
            scope: scope.to_vec(),
        })
        .collect();
    (named, stop)
}

/// The path that starts with `word` (which ends at `end`): its segments, and where
/// it ends.
fn path_at(chars: &[char], word: String, end: usize) -> (Vec<String>, usize) {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut path = vec![word];
    let mut next = end;
    while chars.get(next..next + 2) == Some(&[':', ':'])
        && chars.get(next + 2).is_some_and(|&c| is_ident(c))
    {
        let segment_end = (next + 2..chars.len())
            .find(|&j| !is_ident(chars[j]))
            .unwrap_or(chars.len());
        path.push(chars[next + 2..segment_end].iter().collect());
        next = segment_end;
    }
    (path, next)
}

/// `code` without its `use` and `mod …;` declarations: where names are used.
fn without_declarations(code: &str) -> String {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::with_capacity(code.len());
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let word: String = rest.chars().take_while(|&c| is_ident(c)).collect();
        let starts = !word.is_empty() && !code[..at].ends_with(|c: char| is_ident(c) || c == ':');
        let declaration = match (starts, word.as_str(), rest.find(';')) {
            (true, "use", Some(end)) => Some(end + 1),
            (true, "mod", Some(end)) if !rest[..end].contains('{') => Some(end + 1),
            _ => None,
        };
        let step = match declaration {
            Some(end) => {
                out.extend(
                    rest[..end]
                        .chars()
                        .map(|c| if c == '\n' { '\n' } else { ' ' }),
                );
                end
            }
            None => {
                let step = word
                    .len()
                    .max(rest.chars().next().map_or(1, char::len_utf8));
                out.push_str(&rest[..step]);
                step
            }
        };
        at += step;
    }
    out
}

/// How often `word` stands alone in `code`.
fn words(code: &str, word: &str) -> usize {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(word)
        .filter(|(at, _)| {
            let before = code[..*at].chars().next_back();
            let after = code[at + word.len()..].chars().next();
            !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
        })
        .count()
}

/// The leaves of a `use` tree (`a::{b, c::{d as e, self}}`), each with the name it
/// is imported as.
fn use_leaves(tree: &str) -> Vec<(Vec<String>, String)> {
    let tree = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut leaves = Vec::new();
    leaves_of(tree.trim_start_matches("::"), &[], &mut leaves);
    leaves
}

fn leaves_of(tree: &str, prefix: &[String], leaves: &mut Vec<(Vec<String>, String)>) {
    let tree = tree.trim();
    let mut path = prefix.to_vec();
    if let Some(open) = tree.find('{') {
        path.extend(segments(&tree[..open]));
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        for part in split_top_level(inner) {
            leaves_of(part, &path, leaves);
        }
        return;
    }
    let (written, alias) = match tree.split_once(" as ") {
        Some((written, alias)) => (written, Some(alias.trim().to_string())),
        None => (tree, None),
    };
    path.extend(segments(written));
    if path.last().is_some_and(|s| s == "self") {
        path.pop();
    }
    if let Some(name) = alias.or_else(|| path.last().cloned()) {
        leaves.push((path, name));
    }
}

fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// `a, b::{c, d}, e` split at its top-level commas.
fn split_top_level(list: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut from) = (Vec::new(), 0, 0);
    for (at, c) in list.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&list[from..at]);
                from = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&list[from..]);
    parts
}

/// `path`, written in module `scope`, from the crate's root; `None` for a path
/// that leaves the crate (another crate's, a local name's, a type's item).
fn absolute(
    path: &[String],
    scope: &[String],
    imports: &Imports,
    modules: &Modules,
) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    let mut base = match first.as_str() {
        "crate" => Vec::new(),
        "self" => scope.to_vec(),
        "super" => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            let mut base = scope[..scope.len().checked_sub(ups)?].to_vec();
            base.extend(path[ups..].iter().cloned());
            return Some(base);
        }
        _ => {
            let child = [scope, std::slice::from_ref(first)].concat();
            match modules.contains_key(&child) {
                true => child,
                false => imports.get(first)?.clone(),
            }
        }
    };
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The file `path` (from the crate's root) lands in: the deepest module file on
/// it, or — when that file only passes the name on (`pub use`, or a parent's own
/// `use` that its children reach through `super::`) — the file behind it.
fn landing<'m>(
    mut path: Vec<String>,
    modules: &'m Modules,
    imports_of: &BTreeMap<&str, &Imports>,
) -> Option<&'m str> {
    for _ in 0..16 {
        let known = (0..=path.len())
            .rev()
            .find(|&n| modules.contains_key(&path[..n]))?;
        let file = modules[&path[..known]].as_str();
        let Some(name) = path.get(known) else {
            return Some(file);
        };
        match imports_of.get(file).and_then(|imports| imports.get(name)) {
            Some(target) if target[..] != path[..=known] => {
                let mut through = target.clone();
                through.extend(path[known + 1..].iter().cloned());
                path = through;
            }
            _ => return Some(file),
        }
    }
    None
}

/// The shortest path from `start` back to itself, if any.
fn shortest_cycle(graph: &FileGraph, start: &str) -> Option<Vec<String>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(at) = queue.pop_front() {
        for next in graph.get(at).into_iter().flat_map(BTreeMap::keys) {
            if next == start {
                let mut cycle = vec![start.to_string(), at.to_string()];
                let mut back = at;
                while back != start {
                    back = came_from[back];
                    cycle.push(back.to_string());
                }
                cycle.reverse();
                return Some(cycle);
            }
            if !came_from.contains_key(next.as_str()) {
                came_from.insert(next, at);
                queue.push_back(next);
            }
        }
    }
    None
}

/// The files `start` reaches that reach it back.
fn knot_of(graph: &FileGraph, start: &str) -> BTreeSet<String> {
    let reach = |backwards: bool| {
        let mut seen = BTreeSet::from([start.to_string()]);
        let mut todo = vec![start.to_string()];
        while let Some(at) = todo.pop() {
            let next: Vec<String> = match backwards {
                true => graph
                    .iter()
                    .filter(|(_, to)| to.contains_key(&at))
                    .map(|(from, _)| from.clone())
                    .collect(),
                false => graph
                    .get(&at)
                    .into_iter()
                    .flat_map(|to| to.keys().cloned())
                    .collect(),
            };
            for file in next {
                if seen.insert(file.clone()) {
                    todo.push(file);
                }
            }
        }
        seen
    };
    let forward = reach(false);
    reach(true).intersection(&forward).cloned().collect()
}

/// The text with its comments and its string and character literals blanked out
/// (newlines kept, so lines still count), leaving only code to search.
fn code_of(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < chars.len() {
        let (c, next) = (chars[at], chars.get(at + 1).copied());
        let after_ident = at > 0 && is_ident(chars[at - 1]);
        let end = match c {
            '/' if next == Some('/') => chars[at..]
                .iter()
                .position(|&c| c == '\n')
                .map_or(chars.len(), |n| at + n),
            '/' if next == Some('*') => block_comment_end(&chars, at),
            '"' => string_end(&chars, at + 1, 0),
            'r' | 'b' if !after_ident => raw_string_end(&chars, at).unwrap_or(at + 1),
            '\'' => char_literal_end(&chars, at),
            _ => at + 1,
        };
        match end == at + 1 {
            true => out.push(c),
            false => out.extend(
                chars[at..end]
                    .iter()
                    .map(|&c| if c == '\n' { '\n' } else { ' ' }),
            ),
        }
        at = end;
    }
    out
}

/// Where the block comment opening at `start` ends (they nest).
fn block_comment_end(chars: &[char], start: usize) -> usize {
    let (mut depth, mut at) = (0, start);
    while at + 1 < chars.len() {
        match (chars[at], chars[at + 1]) {
            ('/', '*') => (depth, at) = (depth + 1, at + 2),
            ('*', '/') if depth == 1 => return at + 2,
            ('*', '/') => (depth, at) = (depth - 1, at + 2),
            _ => at += 1,
        }
    }
    chars.len()
}

/// Where the raw string (`r"…"`, `r#"…"#`, `br"…"`) opening at `start` ends, if
/// one opens there.
fn raw_string_end(chars: &[char], start: usize) -> Option<usize> {
    let r = match chars[start] {
        'b' if chars.get(start + 1) == Some(&'r') => start + 1,
        'r' => start,
        _ => return None,
    };
    let hashes = chars[r + 1..].iter().take_while(|&&c| c == '#').count();
    (chars.get(r + 1 + hashes) == Some(&'"')).then(|| string_end(chars, r + 2 + hashes, hashes))
}

/// Where a string whose text begins at `from` ends: at its closing quote, followed
/// by `hashes` `#` for a raw string (which has no escapes).
fn string_end(chars: &[char], from: usize, hashes: usize) -> usize {
    let mut at = from;
    while at < chars.len() {
        match chars[at] {
            '\\' if hashes == 0 => at += 2,
            '"' if chars[at + 1..].iter().take(hashes).all(|&c| c == '#')
                && chars.len() > at + hashes =>
            {
                return at + 1 + hashes
            }
            _ => at += 1,
        }
    }
    chars.len()
}

/// Where the character literal at `start` ends; a lifetime (`'a`) is code.
fn char_literal_end(chars: &[char], start: usize) -> usize {
    match (chars.get(start + 1), chars.get(start + 2)) {
        (Some('\\'), _) => chars[start + 3..]
            .iter()
            .position(|&c| c == '\'')
            .map_or(chars.len(), |n| start + 4 + n),
        (Some(_), Some('\'')) => start + 3,
        _ => start + 1,
    }
}
