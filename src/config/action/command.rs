//! `type = "command"`: the `[action]` table of a command — its TOML keys, and what
//! each must be. Running it is `crate::action::command`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::super::template::Template;
use super::super::validate::Validator;
use super::DEFAULT_COMMAND_TIMEOUT;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCommandAction {
    pub command: Vec<String>,
    #[serde(default, with = "humantime_serde")]
    pub timeout: Option<Duration>,
    pub workdir: Option<PathBuf>,
}

/// `type = "command"`: one process per item, the row as JSON on its stdin.
#[derive(Debug, Clone)]
pub struct CommandAction {
    pub argv: Vec<Template>,
    pub timeout: Duration,
    pub workdir: PathBuf,
}

/// Validates `type = "command"`.
pub(in crate::config) fn validate(raw: &RawCommandAction, v: &mut Validator) -> CommandAction {
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
        match Template::parse(element, v.env) {
            Ok(template) => argv.push(template),
            Err(e) => v.error(
                &["action", "command", &index.to_string()],
                format!("`action.command`: {e}"),
            ),
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
        argv,
        timeout: v.positive(&["action", "timeout"], raw.timeout, DEFAULT_COMMAND_TIMEOUT),
        workdir,
    }
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
