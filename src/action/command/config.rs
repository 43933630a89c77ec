//! `type = "command"`: the `[action]` table of a command — its TOML keys, and what
//! each must be. Running it is `crate::action::command`.

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
pub const WRITTEN_AS: (&str, &[&str]) = ("a program", &["shell", "exec"]);

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

/// `type = "command"`: one process per item, the row as JSON on its stdin.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandAction {
    /// The timeout, and the placeholders of `command`.
    pub common: Common,
    pub argv: Vec<Template>,
    /// Its working directory, and the environment it sees.
    pub surroundings: Surroundings,
}

/// Validates `type = "command"`.
pub fn validate(raw: &RawCommandAction, v: &mut Validator) -> CommandAction {
    let mut common = Common::new(v, raw.timeout, DEFAULT_TIMEOUT);
    let surroundings = surroundings(raw.workdir.as_deref(), raw.env.as_ref(), v);
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
        if let Err(message) = find_program(&program, &surroundings.workdir, v.env) {
            v.error(&["action", "command", "0"], message);
        }
    }
    CommandAction {
        common,
        argv,
        surroundings,
    }
}

impl ActionKind for CommandAction {
    fn common(&self) -> &Common {
        &self.common
    }

    fn has_exit_codes(&self) -> bool {
        true
    }

    fn reports_progress(&self) -> bool {
        true
    }

    fn warnings(&self, queue: &Site<'_>) -> Vec<Finding> {
        secrets_passed_on(&self.surroundings, "the command", queue)
    }

    fn samples(&self) -> Samples {
        Samples {
            success_status: Some(0),
            failure_status: Some(1),
            output: true,
        }
    }
}
