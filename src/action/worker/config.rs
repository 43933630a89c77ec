//! `type = "worker"`: the `[action]` table of a long-lived worker process — its
//! TOML keys, and what each must be. Running it is `crate::action::worker`.

use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::value::duration::DurationText;
use crate::config::action::kind::{ActionKind, Common, Samples};
use crate::action::process::config::{
    find_program, secrets_passed_on, surroundings, RawEnv, Surroundings,
};
use crate::config::value::template::Template;
use crate::config::validate::validator::Validator;
use crate::config::Site;
use crate::diagnostic::Finding;

/// `[action] timeout` when the file does not set it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// What a queue file may write in `type` meaning this kind, and what it is called
/// then: the registry answers `type = "webhook"` with "a webhook is `type = \"http\"`".
pub const WRITTEN_AS: (&str, &[&str]) = ("", &[]);
/// `[action] max_items` when the file does not set it.
pub const DEFAULT_MAX_ITEMS: u64 = 10_000;

/// type = "worker": a long-lived process, kept between items, fed one JSON line per
/// item on stdin (the row; in batch scope the batch) and answering one line per
/// item: {"ok": true} or {"ok": false, "error": "…"}. See the worker protocol.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawWorkerAction {
    /// The program and its arguments (argv, no shell), started once and kept: no
    /// {column} placeholders (the row arrives on stdin); ${NAME} allowed.
    #[schemars(length(min = 1))]
    pub command: Vec<String>,
    /// How long one item (and a new process's start) may take; past it the process
    /// group is killed, the item fails and a new process starts. Default "60s".
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub timeout: Option<Duration>,
    /// A process is retired (stdin closed) and replaced after this many items, so
    /// that what it leaks is given back. Default 10000.
    #[schemars(range(min = 1))]
    pub max_items: Option<u64>,
    /// The working directory. Default: the queue file's directory.
    pub workdir: Option<PathBuf>,
    /// The process sees PATH, HOME, LANG, LC_* and TZ of tableq's environment, and
    /// nothing else unless named here: a list passes variables through, a table sets
    /// them (${NAME} allowed).
    pub env: Option<RawEnv>,
}

/// `type = "worker"`: long-lived processes, one JSON line in and one out per item.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerAction {
    /// The timeout of each item.
    pub common: Common,
    /// The program and its arguments, as started.
    pub argv: Vec<String>,
    pub max_items: u64,
    /// Its working directory, and the environment it sees.
    pub surroundings: Surroundings,
}

/// Validates `type = "worker"`.
pub fn validate(raw: &RawWorkerAction, v: &mut Validator) -> WorkerAction {
    let common = Common::new(v, raw.timeout, DEFAULT_TIMEOUT);
    let surroundings = surroundings(raw.workdir.as_deref(), raw.env.as_ref(), v);
    let mut argv = Vec::new();
    for (index, element) in raw.command.iter().enumerate() {
        if let Some(argument) = literal(element, &index.to_string(), v) {
            argv.push(argument);
        }
    }
    if raw.command.is_empty() {
        v.error(
            &["action", "command"],
            "`action.command` is empty: give the program and its arguments, e.g. [\"php\", \"worker.php\"]",
        );
    } else if let Some(program) = argv.first().filter(|_| argv.len() == raw.command.len()) {
        if let Err(message) = find_program(program, &surroundings.workdir, v.env) {
            v.error(&["action", "command", "0"], message);
        }
    }
    let max_items = raw.max_items.unwrap_or(DEFAULT_MAX_ITEMS);
    if max_items == 0 {
        v.error(
            &["action", "max_items"],
            "`action.max_items` = 0: a process must take at least 1 item; leave it out for 10000",
        );
    }
    WorkerAction {
        common,
        argv,
        max_items,
        surroundings,
    }
}

/// One element of `command`, `${NAME}` replaced; refused with why if it holds a
/// `{column}` placeholder, which a process started before any row cannot have.
fn literal(element: &str, index: &str, v: &mut Validator) -> Option<String> {
    let path = ["action", "command", index];
    let template = match Template::parse(element, v.env) {
        Ok(template) => template,
        Err(e) => {
            v.error(&path, format!("`action.command`: {e}"));
            return None;
        }
    };
    if let Some(name) = template.placeholders().next() {
        let message = format!(
            "`action.command`: `{{{name}}}` has no row to come from: a worker starts before \
             any row and is kept for many; it reads each row as a JSON line on stdin"
        );
        v.error(&path, message);
        return None;
    }
    template.as_literal()
}

impl ActionKind for WorkerAction {
    fn common(&self) -> &Common {
        &self.common
    }

    fn reports_progress(&self) -> bool {
        true
    }

    fn warnings(&self, queue: &Site<'_>) -> Vec<Finding> {
        secrets_passed_on(&self.surroundings, "the worker", queue)
    }

    fn samples(&self) -> Samples {
        Samples {
            success_status: None,
            failure_status: None,
            output: true,
        }
    }
}
