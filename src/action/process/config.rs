//! What a program tableq starts is given in its kind's `[action]` table — by
//! `type = "command"` and `type = "worker"` alike: the working directory, the
//! environment it may see (an allowlist), and the program, found before anything
//! runs. Starting it is `crate::action::process`.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::validate::validator::Validator;
use crate::config::Site;
use crate::diagnostic::{Finding, Severity};

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

/// Where a program runs, and what of the environment it sees.
#[derive(Debug, Clone, PartialEq)]
pub struct Surroundings {
    pub workdir: PathBuf,
    /// Variables the program sees besides [`INHERITED`]: a value set in the file, or
    /// `None` to pass tableq's own through.
    pub env: Vec<(String, Option<String>)>,
}

/// What every program sees of tableq's environment without being told: the
/// variables a program needs to run, and no others — none of tableq's secrets.
/// (`LC_*` too, and the `TABLEQ_*` variables tableq sets.)
pub const INHERITED: &[&str] = &["PATH", "HOME", "LANG", "TZ"];

/// True for a variable every program sees.
pub fn inherited(name: &str) -> bool {
    INHERITED.contains(&name) || name.starts_with("LC_")
}

/// `workdir` (relative to the queue file, which it defaults to) and `env`, checked.
pub fn surroundings(
    workdir: Option<&Path>,
    env: Option<&RawEnv>,
    v: &mut Validator,
) -> Surroundings {
    let workdir = match workdir {
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
    Surroundings {
        workdir,
        env: environment(env, v),
    }
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
        if !crate::config::value::interpolate::is_variable_name(&name) {
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

/// Words in a variable's name that say it holds a secret.
const SECRET_WORDS: &[&str] = &[
    "PASSWORD",
    "PASSWD",
    "PWD",
    "SECRET",
    "TOKEN",
    "DATABASE_URL",
];

/// An `env` that hands the program (`the command`, `the worker`) a variable
/// holding a database URL or a secret.
pub fn secrets_passed_on(
    surroundings: &Surroundings,
    program: &str,
    queue: &Site<'_>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (name, value) in &surroundings.env {
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
            "`action.env` passes `{name}` to {program}, and {why}: {program} (and its \
             `:output`) would see it; pass only what {program} needs"
        );
        findings.push(queue.finding(Severity::Warning, &["action", "env"], message));
    }
    findings
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
