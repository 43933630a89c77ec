//! `type = "command"`: the `[action]` table of a command — its TOML keys, and what
//! each must be. Running it is `crate::action::command`.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::Site;
use crate::config::duration::DurationText;
use crate::config::kind::{ActionKind, Common, Samples};
use crate::config::template::Template;
use crate::config::validator::Validator;
use crate::diagnostic::{Finding, Severity};

/// `[action] timeout` when the file does not set it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// type = "command": one process per item, no shell; the row arrives as JSON on
/// stdin, with TABLEQ_QUEUE and TABLEQ_KEY in the environment. Exit 0 is success.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCommandAction {
    /// The program and its arguments (argv, no shell); {column} placeholders fill
    /// whole arguments, never split.
    #[schemars(length(min = 1))]
    pub command: Vec<String>,
    /// Then the whole process group is killed. Default "60s".
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub timeout: Option<Duration>,
    /// The working directory. Default: the queue file's directory.
    pub workdir: Option<PathBuf>,
    /// The command sees PATH, HOME, LANG, LC_* and TZ of tableq's environment, and
    /// nothing else unless named here: a list passes variables through, a table sets
    /// them (${NAME} allowed).
    pub env: Option<RawEnv>,
}

/// `env = ["NAME", …]` passes variables through; `env = { NAME = "value", … }` sets
/// them (`${VAR}` allowed in the values).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawEnv {
    /// The variables of tableq's environment to pass through.
    Pass(Vec<String>),
    /// The variables to set, with their values.
    Set(BTreeMap<String, String>),
}

/// `type = "command"`: one process per item, the row as JSON on its stdin.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandAction {
    /// The timeout, and the placeholders of `command`.
    pub common: Common,
    pub argv: Vec<Template>,
    pub workdir: PathBuf,
    /// Variables the command sees besides [`INHERITED`]: a value set in the file, or
    /// `None` to pass tableq's own through.
    pub env: Vec<(String, Option<String>)>,
}

/// What every command sees of tableq's environment without being told: the
/// variables a program needs to run, and no others — none of tableq's secrets.
/// (`LC_*` too, and `TABLEQ_QUEUE` and `TABLEQ_KEY` or `TABLEQ_KEYS`, which tableq
/// sets.)
pub const INHERITED: &[&str] = &["PATH", "HOME", "LANG", "TZ"];

/// True for a variable every command sees.
pub fn inherited(name: &str) -> bool {
    INHERITED.contains(&name) || name.starts_with("LC_")
}

/// Validates `type = "command"`.
pub fn validate(raw: &RawCommandAction, v: &mut Validator) -> CommandAction {
    let mut common = Common::new(v, raw.timeout, DEFAULT_TIMEOUT);
    let workdir = match &raw.workdir {
        Some(workdir) => {
            let path = v.dir.join(workdir);
            if !path.is_dir() {
                let message = format!("`action.workdir`: {} is not a directory", path.display());
                v.error(&["action", "workdir"], message);
            }
            path
        }
        None => v.dir.to_path_buf(),
    };
    let mut argv = Vec::new();
    for (index, element) in raw.command.iter().enumerate() {
        let path = ["action", "command", &index.to_string()];
        match Template::parse(element, v.env) {
            Ok(template) => {
                common.placeholders_of(&path, &template);
                argv.push(template);
            }
            Err(e) => v.error(&path, format!("`action.command`: {e}")),
        }
    }
    if raw.command.is_empty() {
        v.error(&["action", "command"], "`action.command` is empty: give the program and its arguments, e.g. [\"/usr/local/bin/send\", \"{id}\"]");
    } else if let Some(program) = argv.first().and_then(Template::as_literal) {
        if let Err(message) = find_program(&program, &workdir, v.env) {
            v.error(&["action", "command", "0"], message);
        }
    }
    CommandAction {
        common,
        argv,
        workdir,
        env: environment(raw.env.as_ref(), v),
    }
}

impl ActionKind for CommandAction {
    fn has_exit_codes(&self) -> bool {
        true
    }

    fn reports_progress(&self) -> bool {
        true
    }

    fn warnings(&self, queue: &Site<'_>) -> Vec<Finding> {
        secrets_passed_on(self, queue)
    }

    fn samples(&self) -> Samples {
        Samples {
            success_status: Some(0),
            failure_status: Some(1),
            output: true,
        }
    }
}

/// Words in a variable's name that say it holds a secret.
const SECRET_WORDS: &[&str] = &[
    "PASSWORD",
    "PASSWD",
    "PWD",
    "SECRET",
    "TOKEN",
    "DATABASE_URL",
];

/// An `env` that hands the command a variable holding a database URL or a secret.
fn secrets_passed_on(command: &CommandAction, queue: &Site<'_>) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (name, value) in &command.env {
        let why = if value.is_some() {
            continue;
        } else if queue.secret_variables.contains(name) {
            "this file puts it into `database_url` or a signing secret"
        } else if SECRET_WORDS
            .iter()
            .any(|w| name.to_ascii_uppercase().contains(w))
        {
            "its name says it holds a secret"
        } else {
            continue;
        };
        let message = format!(
            "`action.env` passes `{name}` to the command, and {why}: the command (and its \
             `:output`) would see it; pass only what the command needs"
        );
        findings.push(queue.finding(Severity::Warning, &["action", "env"], message));
    }
    findings
}

/// The `env` key, checked: names a shell could use, values with `${VAR}` replaced.
fn environment(raw: Option<&RawEnv>, v: &mut Validator) -> Vec<(String, Option<String>)> {
    let wanted: Vec<(String, Option<&String>)> = match raw {
        None => Vec::new(),
        Some(RawEnv::Pass(names)) => names.iter().map(|n| (n.clone(), None)).collect(),
        Some(RawEnv::Set(pairs)) => pairs
            .iter()
            .map(|(n, value)| (n.clone(), Some(value)))
            .collect(),
    };
    let mut env = Vec::new();
    for (name, value) in wanted {
        if !crate::config::interpolate::is_variable_name(&name) {
            let message = format!(
                "`action.env`: {name:?} is not a variable name: use letters, digits and `_`"
            );
            v.error(&["action", "env"], message);
            continue;
        }
        let value = match value.map(|value| crate::config::interpolate(value, v.env)) {
            None => None,
            Some(Ok(value)) => Some(value),
            Some(Err(e)) => {
                v.error(
                    &["action", "env", &name],
                    format!("`action.env.{name}`: {e}"),
                );
                continue;
            }
        };
        env.push((name, value));
    }
    env
}

/// Where `program` is: a path (relative to `workdir`) or a name on `PATH`.
/// Refuses programs that do not exist or cannot be executed.
pub fn find_program(
    program: &str,
    workdir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, String> {
    if program.contains('/') {
        let path = workdir.join(program);
        return match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o111 != 0 => Ok(path),
            Ok(_) => Err(format!(
                "`action.command`: {} is not an executable file",
                path.display()
            )),
            Err(e) => Err(format!(
                "`action.command`: cannot run {}: {e}",
                path.display()
            )),
        };
    }
    let path_var = env("PATH").unwrap_or_default();
    std::env::split_paths(&path_var)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(|| {
            format!("`action.command`: no program `{program}` on PATH; give its full path")
        })
}
