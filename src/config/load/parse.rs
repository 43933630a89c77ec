//! A queue file's text into its [`RawQueue`], with every problem at once. serde stops
//! at the first value it cannot take; so each key is also read on its own (and each
//! key of `[action]` with the action's `type`), and every key that fails is a
//! finding at its own line. A file with four mistakes needs one run, not four.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use toml::{Table, Value};

use crate::config::action::Kinds;
use crate::config::load::locate::{key_assigned_at, key_at, line_at, line_of};
use crate::config::load::raw::{RawOutcome, RawQueue};
use crate::config::load::schema::expected_value;
use crate::config::queue::alerts::RawAlerts;
use crate::config::queue::failed::RawFailed;
use crate::config::queue::lease::RawLease;
use crate::diagnostic::Finding;

/// The keys a queue file must have.
const REQUIRED: &[&str] = &["select", "action"];

/// Parses `source` (the text of `file`) into a [`RawQueue`], or every problem found.
pub fn parse<A: Kinds>(file: &Path, source: &str) -> Result<RawQueue<A>, Vec<Finding>> {
    let table: Table =
        toml::from_str(source).map_err(|e| vec![syntax_error::<A>(file, source, &e)])?;
    let queue = queue_name(&table, file);
    parse_table::<A>(file, source, table).map_err(|found| {
        found
            .into_iter()
            .map(|finding| Finding {
                queue: queue.clone(),
                ..finding
            })
            .collect()
    })
}

/// The queue's name as the loader will give it: `name`, else the file's stem.
fn queue_name(table: &Table, file: &Path) -> Option<String> {
    match table.get("name") {
        Some(Value::String(name)) => Some(name.clone()),
        _ => file.file_stem().map(|s| s.to_string_lossy().into_owned()),
    }
}

fn parse_table<A: Kinds>(
    file: &Path,
    source: &str,
    table: Table,
) -> Result<RawQueue<A>, Vec<Finding>> {
    let mut problems = Vec::new();
    for key in table.keys() {
        match table.get(key) {
            Some(Value::Table(action)) if key == "action" && action.contains_key("type") => {
                if let Some(problem) = unknown_kind::<A>(action) {
                    problems.push(problem);
                    continue;
                }
                problems.extend(table_problems::<A>(action, "action", &["type"]));
            }
            Some(Value::Table(lease)) if key == "lease" => {
                problems.extend(table_problems::<RawLease>(lease, key, &[]));
            }
            Some(Value::Table(failed)) if key == "failed" => {
                problems.extend(table_problems::<RawFailed>(failed, key, &[]));
            }
            Some(Value::Table(alerts)) if key == "alerts" => {
                problems.extend(table_problems::<RawAlerts>(alerts, key, &[]));
            }
            Some(Value::Table(outcome))
                if matches!(key.as_str(), "on_success" | "on_failure" | "on_release") =>
            {
                problems.extend(table_problems::<RawOutcome>(outcome, key, &[]));
            }
            _ => problems.extend(key_alone::<RawQueue<A>>(&table, key, &[], &[])),
        }
    }
    // A schedule queue's select is tableq's.
    let scheduled = table.contains_key("schedule");
    let missing = |key: &&&str| !(table.contains_key(**key) || scheduled && **key == "select");
    for required in REQUIRED.iter().filter(missing) {
        let message = plain_words(&format!("missing field `{required}`"));
        problems.push(Problem {
            path: Vec::new(),
            message,
        });
    }
    if problems.is_empty() {
        // Nothing found key by key: the whole must read too.
        return RawQueue::<A>::deserialize(Value::Table(table))
            .map_err(|e| vec![Finding::error(file, plain_words(e.message().trim()))]);
    }
    // In the file's order: the parsed table holds its keys sorted by name.
    let mut found: Vec<(Option<usize>, Finding)> = problems
        .into_iter()
        .map(|p| p.finding(file, source))
        .collect();
    found.sort_by_key(|(line, _)| line.unwrap_or(usize::MAX));
    Err(found.into_iter().map(|(_, finding)| finding).collect())
}

/// An `[action] type` that names no kind: said at `type`'s own line, with the kinds
/// there are (rather than at the first other key, as serde would).
fn unknown_kind<A: Kinds>(action: &Table) -> Option<Problem> {
    let kinds = A::NAMES;
    let written = match action.get("type") {
        Some(Value::String(kind)) if kinds.contains(&kind.as_str()) => return None,
        Some(Value::String(kind)) => format!("`{kind}`"),
        Some(other) => format!("{other}"),
        None => return None,
    };
    let hint = match action.get("type") {
        Some(Value::String(kind)) => A::meant(kind).map(|meant| format!(" ({meant})")),
        _ => None,
    };
    let hint = hint.unwrap_or_default();
    let list: Vec<String> = kinds.iter().map(|k| format!("\"{k}\"")).collect();
    Some(Problem {
        path: vec!["action".into(), "type".into()],
        message: format!(
            "`action.type`: {written} is not a kind of action; expected one of {}{hint}",
            list.join(", ")
        ),
    })
}

/// The problems of the table `name` read as a `T`: each key but `keep` on its own
/// (next to `keep`, for `[action]` its `type`), then a key it must have.
fn table_problems<T: DeserializeOwned>(table: &Table, name: &str, keep: &[&str]) -> Vec<Problem> {
    let mut problems: Vec<Problem> = table
        .keys()
        .filter(|key| !keep.contains(&key.as_str()))
        .filter_map(|key| key_alone::<T>(table, key, keep, &[name]))
        .collect();
    if problems.is_empty() {
        if let Err(e) = T::deserialize(Value::Table(table.clone())) {
            problems.push(Problem {
                path: vec![name.to_string()],
                message: format!("`{name}`: {}", plain_words(e.message().trim())),
            });
        }
    }
    problems
}

/// One key that could not be read: where it is, and why.
#[derive(Debug)]
struct Problem {
    path: Vec<String>,
    message: String,
}

impl Problem {
    fn finding(self, file: &Path, source: &str) -> (Option<usize>, Finding) {
        let path: Vec<&str> = self.path.iter().map(String::as_str).collect();
        // A missing key has no line of its own: the file's first stands for it.
        let line = if path.is_empty() {
            Some(1)
        } else {
            line_of(source, &path)
        };
        (line, Finding::error(file, self.message).at_line(line))
    }
}

/// Reads `key` of `table`, next to the keys in `keep`, as a `T`: the problem, if
/// any. Another field is missing only because it was left out of the reading (a
/// field the table really lacks is found when the whole table is read).
fn key_alone<T: DeserializeOwned>(
    table: &Table,
    key: &str,
    keep: &[&str],
    prefix: &[&str],
) -> Option<Problem> {
    let alone: Table = table
        .iter()
        .filter(|(k, _)| *k == key || keep.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let message = T::deserialize(Value::Table(alone))
        .err()?
        .message()
        .trim()
        .to_string();
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next());
    if missing.is_some_and(|field| field != key) {
        return None;
    }
    let mut path: Vec<String> = prefix.iter().map(|s| s.to_string()).collect();
    let unknown = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next());
    let message = plain_words(&message);
    if let Some(unknown) = unknown {
        let message = match closest(unknown, &message) {
            Some(known) => format!("{message}; did you mean `{known}`?"),
            None => message,
        };
        // Point at the unknown key itself, named by the table that holds it.
        let message = match prefix {
            [] => message,
            _ => format!("`{}`: {message}", prefix.join(".")),
        };
        path.push(unknown.to_string());
        return Some(Problem { path, message });
    }
    path.push(key.to_string());
    let message = format!("`{}`: {message}", path.join("."));
    Some(Problem { path, message })
}

/// The expected key nearest to the misspelt `unknown`, if one is near: from serde's
/// "unknown field `x`, expected one of `a`, `b`" (or "expected `a` or `b`").
fn closest<'a>(unknown: &str, message: &'a str) -> Option<&'a str> {
    let (_, expected) = message.split_once("expected")?;
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|known| (strsim::damerau_levenshtein(unknown, known), known))
        .filter(|(distance, known)| *distance <= 2.max(known.len() / 3))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, known)| known)
}

/// A file that is not TOML at all: the parser's one error, at its line.
fn syntax_error<A: Kinds>(file: &Path, source: &str, e: &toml::de::Error) -> Finding {
    let start = e.span().map(|span| span.start);
    let line = start.map(|at| line_at(source, at));
    let mut message = plain_words(e.message().trim());
    let key = start.and_then(|at| key_at(source, at).or_else(|| key_assigned_at(source, at)));
    if let Some(key) = key {
        message = match expected_value::<A>(&key).filter(|_| is_bare_value(&message)) {
            Some(expected) => format!("`{key}` must be {expected}"),
            None => format!("`{key}`: {message}"),
        };
    }
    Finding::error(file, message).at_line(line)
}

/// The parser met a bare word where a value belongs (`workers = 4x`): TOML's words
/// for it ("string values must be quoted") name no fix for a number or a duration.
fn is_bare_value(message: &str) -> bool {
    message.contains("string values must be quoted") || message.contains("invalid string")
}

/// Serde's words for types, in the words of the queue file.
fn plain_words(message: &str) -> String {
    let message = message
        .replace("expected u32", "expected a whole number")
        .replace(
            "expected a duration",
            "expected a duration such as \"5s\", \"250ms\" or \"2m\"",
        );
    if message == "missing field `select`" {
        return "missing field `select`: the SELECT that returns the rows waiting for work (or \
                `schedule = \"…\"` for a queue that runs on a schedule)"
            .into();
    }
    if message == "missing field `webhook`" {
        return "missing field `webhook`: the URL alerts are posted to, e.g. webhook = \
                \"https://hooks.slack.com/services/…\""
            .into();
    }
    message
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use schemars::JsonSchema;

    use super::*;
    use crate::config::action::ActionConfig;
    use crate::config::validate::validator::Validator;
    use crate::config::value::duration::DurationText;

    /// Two kinds, as the action layer's registry would make them: parsing reads
    /// `[action]` through them, and never validates it.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(tag = "type")]
    #[allow(dead_code, reason = "read to see that it parses; nothing looks inside")]
    enum Kinds2 {
        #[serde(rename = "query")]
        Query(Keys),
        #[serde(rename = "program")]
        Program(Keys),
    }

    /// A kind's keys.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code, reason = "read to see that it parses; nothing looks inside")]
    struct Keys {
        /// Its work.
        sql: Option<String>,
        /// Its program.
        argv: Option<Vec<String>>,
        /// How long it may take.
        #[serde(default, with = "humantime_serde")]
        #[schemars(with = "Option<DurationText>")]
        timeout: Option<Duration>,
    }

    impl Kinds for Kinds2 {
        const NAMES: &'static [&'static str] = &["query", "program"];

        fn meant(written: &str) -> Option<String> {
            (written == "shell").then(|| "a shell command is `type = \"program\"`".into())
        }

        fn validate(&self, _: &mut Validator) -> ActionConfig {
            unreachable!("parsing does not validate")
        }
    }

    /// The findings for `source`, as lines.
    fn findings(source: &str) -> Vec<String> {
        let found = parse::<Kinds2>(Path::new("q.toml"), source).unwrap_err();
        found.iter().map(|f| f.to_string()).collect()
    }

    /// Four mistakes, four findings, each at its own line, in the file's order.
    #[test]
    fn every_problem_of_a_file_at_once() {
        let source = "wrokers = 4\nbatch = \"ten\"\nselect = \"SELECT id FROM job\"\n\n[action]\ntype = \"program\"\nargv = [\"true\"]\ntimeout = \"soon\"\nretries = 3\n";
        let lines = findings(source);
        assert_eq!(lines.len(), 4, "{lines:#?}");
        for (finding, expected) in lines.iter().zip([
            "q.toml:1: queue q: error: unknown field `wrokers`",
            "q.toml:2: queue q: error: `batch`: invalid type: string \"ten\", expected a whole number",
            "q.toml:8: queue q: error: `action.timeout`: invalid value",
            "q.toml:9: queue q: error: `action`: unknown field `retries`",
        ]) {
            assert!(finding.starts_with(expected), "{finding}");
        }
        assert!(
            lines[0].ends_with("; did you mean `workers`?"),
            "{}",
            lines[0]
        );
        assert!(!lines[3].contains("did you mean"), "{}", lines[3]);
    }

    /// A misspelt key is answered with the nearest one; the queue is named by `name`
    /// when the file gives one.
    #[test]
    fn a_misspelt_key_gets_the_nearest_one() {
        let source = "name = \"mail\"\npoll_intreval = \"1s\"\nselect = \"SELECT 1\"\n[action]\ntype = \"query\"\nsql = \"DO 1\"\n";
        let lines = findings(source);
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(lines[0].starts_with("q.toml:2: queue mail: error: unknown field `poll_intreval`"));
        assert!(
            lines[0].ends_with("; did you mean `poll_interval`?"),
            "{}",
            lines[0]
        );
    }

    /// A bare word where a value belongs names the key and what its value must be.
    #[test]
    fn a_bare_word_value_says_what_the_key_takes() {
        let lines = findings(
            "workers = 4x\nselect = \"SELECT 1\"\n[action]\ntype = \"query\"\nsql = \"DO 1\"\n",
        );
        assert_eq!(
            lines,
            ["q.toml:1: error: `workers` must be a whole number, such as `workers = 4`"]
        );
        let lines = findings(
            "select = \"SELECT 1\"\n[action]\ntype = \"query\"\nsql = \"DO 1\"\ntimeout = 5s\n",
        );
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(
            lines[0].starts_with(
                "q.toml:5: error: `action.timeout` must be a quoted string, such as `timeout = \""
            ),
            "{}",
            lines[0]
        );
    }

    /// `type = "shell"` is said at `type`'s line, with the kinds there are and the
    /// one it may have meant.
    #[test]
    fn an_unknown_kind_names_action_type_and_the_kinds() {
        let source = "select = \"SELECT 1\"\n[action]\ntype = \"shell\"\nurl = \"http://x/\"\n";
        assert_eq!(
            findings(source),
            ["q.toml:3: queue q: error: `action.type`: `shell` is not a kind of action; expected \
              one of \"query\", \"program\" (a shell command is `type = \"program\"`)"]
        );
    }

    /// Outcome tables too: a value of the wrong kind at its line, a missing `sql`.
    #[test]
    fn outcome_tables_key_by_key() {
        let source = "select = \"SELECT 1\"\n[action]\ntype = \"query\"\nsql = \"DO 1\"\n[on_success]\nsql = 5\n[on_failure]\n";
        let lines = findings(source);
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(
            lines[0].starts_with("q.toml:6: queue q: error: `on_success.sql`: invalid type"),
            "{}",
            lines[0]
        );
        assert_eq!(
            lines[1],
            "q.toml:7: queue q: error: `on_failure`: missing field `sql`"
        );
    }
}
