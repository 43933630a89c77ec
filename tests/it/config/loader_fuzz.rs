//! The loader against random and mutated queue files: whatever the text, `run`'s
//! loading and `check --offline` answer with a queue or with findings — never a panic.

use std::path::{Path, PathBuf};

use proptest::collection::vec;
use proptest::prelude::*;

/// The shipped queue files: real files to mutate.
fn seeds() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("queues.example.toml")];
    let config = std::fs::read_dir(root.join("config")).expect("config/");
    files.extend(
        config
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|ext| ext == "toml")),
    );
    files.sort();
    files
        .iter()
        .map(|file| {
            // The example's commented action kinds, switched on: more keys to break.
            let text = std::fs::read_to_string(file).expect("read a seed");
            text.replace("#http> ", "").replace("#command> ", "")
        })
        .collect()
}

/// Pieces of TOML and of tableq's own syntax to splice in.
const TOKENS: &[&str] = &[
    "=",
    "\"",
    "'",
    "[",
    "]",
    "{",
    "}",
    "\n",
    "#",
    "'''",
    "\"\"\"",
    ",",
    ".",
    "1",
    "-1",
    "0",
    "99999999999",
    "\"0s\"",
    "\"25h\"",
    "\"abc\"",
    "true",
    ":id",
    ":",
    "{id}",
    "{",
    "${X}",
    "${",
    "$$",
    "select",
    "[action]",
    "[on_failure]",
    "type = \"http\"",
    "type = \"command\"",
    "type = \"sql\"",
    "sql = [",
    "\u{1F600}",
    "\u{0}",
    "\\",
    "LIMIT 1",
    "FOR UPDATE",
    ";",
    "?",
    "workers = ",
    "batch = ",
    "url = \"{x}\"",
    "env = ",
];

/// One edit of a file's text.
#[derive(Debug, Clone)]
enum Edit {
    Delete { at: usize, len: usize },
    Insert { at: usize, token: usize },
    DuplicateLine { line: usize },
    SwapLines { a: usize, b: usize },
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1..40usize).prop_map(|(at, len)| Edit::Delete { at, len }),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(at, token)| Edit::Insert { at, token }),
        any::<usize>().prop_map(|line| Edit::DuplicateLine { line }),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines { a, b }),
    ]
}

/// Applies `edit` to `text`, on character boundaries.
fn apply(text: &str, edit: &Edit) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut lines: Vec<&str> = text.lines().collect();
    match *edit {
        Edit::Delete { at, len } => {
            let at = at % (chars.len() + 1);
            let end = (at + len).min(chars.len());
            chars[..at].iter().chain(&chars[end..]).collect()
        }
        Edit::Insert { at, token } => {
            let at = at % (chars.len() + 1);
            let head: String = chars[..at].iter().collect();
            let tail: String = chars[at..].iter().collect();
            format!("{head}{}{tail}", TOKENS[token])
        }
        Edit::DuplicateLine { line } if !lines.is_empty() => {
            let line = line % lines.len();
            lines.insert(line, lines[line]);
            lines.join("\n")
        }
        Edit::SwapLines { a, b } if !lines.is_empty() => {
            let (a, b) = (a % lines.len(), b % lines.len());
            lines.swap(a, b);
            lines.join("\n")
        }
        _ => text.to_string(),
    }
}

/// Loads `text` as a queue file both ways. Each must give queues, or findings that
/// name the file; a panic fails the property.
fn loads_or_says_why(text: &str, runtime: &tokio::runtime::Runtime) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file: PathBuf = dir.path().join("jobs.toml");
    std::fs::write(&file, text).expect("write the queue file");
    let env = |name: &str| (name != "UNSET").then(|| format!("value-of-{name}"));
    let shown = file.display().to_string();
    if let Err(findings) = tableq::load_paths(std::slice::from_ref(&file), &env) {
        prop_assert!(!findings.0.is_empty());
        for finding in &findings.0 {
            prop_assert!(finding.to_string().starts_with(&shown), "{finding}");
        }
    }
    let options = tableq::CheckOptions {
        offline: true,
        ..Default::default()
    };
    let report = runtime.block_on(tableq::check(&[file], &env, &options));
    for finding in &report.findings {
        prop_assert!(finding.to_string().starts_with(&shown), "{finding}");
    }
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// The shipped files, mutated a few edits at a time, load or say why.
    #[test]
    fn mutated_queue_files_load_or_say_why(seed in any::<usize>(), edits in vec(edit(), 1..8)) {
        let seeds = seeds();
        let mut text = seeds[seed % seeds.len()].clone();
        for edit in &edits {
            text = apply(&text, edit);
        }
        loads_or_says_why(&text, &runtime())?;
    }

    /// Random text, and random lines of TOML tokens, load or say why.
    #[test]
    fn random_queue_files_load_or_say_why(
        noise in ".{0,300}",
        tokens in vec(0..TOKENS.len(), 0..60),
    ) {
        loads_or_says_why(&noise, &runtime())?;
        let spliced: String = tokens.iter().map(|t| TOKENS[*t]).collect::<Vec<_>>().join(" ");
        loads_or_says_why(&spliced, &runtime())?;
    }
}
