//! What a kind of action's table is to the rest of tableq, whichever kind it is:
//! the settings every kind has ([`Common`] — its timeout, and the secrets and
//! `{placeholder}`s its keys hold, gathered as the kind reads them), and what
//! each kind answers about itself ([`ActionKind`]). A kind's table (in its folder,
//! `src/action/<kind>/config.rs`) embeds the one and implements the other.

use std::time::Duration;

use crate::config::queue::site::Site;
use crate::config::validate::validator::Validator;
use crate::config::value::interpolate::{interpolate_secret, read_by, variables};
use crate::config::value::secret_file::SecretFile;
use crate::config::value::template::Template;
use crate::diagnostic::Finding;
use crate::sql::statement::ParsedStatement;

/// What every kind's table has, read once for all of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Common {
    /// How long one action (an item's, or a batch's) may take.
    pub timeout: Duration,
    /// The `{placeholder}` names the table uses, each with the key it is under
    /// (`action.url`).
    pub placeholders: Vec<(String, String)>,
    /// The `${VARS}` the table puts into a secret: a command must not be handed them.
    pub secret_variables: Vec<String>,
    /// The files the table reads secrets from (`${file:…}`), for `check`'s warning
    /// about files others can read.
    pub secret_files: Vec<SecretFile>,
}

impl Common {
    /// A kind's common settings: its `timeout` (`default` when not given) checked;
    /// the secrets and placeholders are noted as the kind reads its keys through
    /// [`Common::template`], [`Common::secret`] and [`Common::secret_template`].
    pub fn new(v: &mut Validator, timeout: Option<Duration>, default: Duration) -> Common {
        Common {
            timeout: v.positive(&["action", "timeout"], timeout, default),
            placeholders: Vec::new(),
            secret_variables: Vec::new(),
            secret_files: Vec::new(),
        }
    }

    /// `text`, the value of `path`, as a template (`${NAME}` replaced), its
    /// placeholders noted; `None` after saying why it is not one.
    pub fn template(&mut self, v: &mut Validator, path: &[&str], text: &str) -> Option<Template> {
        let parsed = Template::parse(text, v.env);
        let message = |e| format!("`{}`: {e}", path.join("."));
        let template = parsed.map_err(|e| v.error(path, message(e))).ok()?;
        self.placeholders_of(path, &template);
        Some(template)
    }

    /// As [`Common::template`], for a value that may hold a secret (a header):
    /// `${file:/PATH}` is read too, and the secret's variables and files are noted.
    /// `Err` says why it is not a template, for the kind to put in its own words.
    pub fn secret_template(
        &mut self,
        v: &mut Validator,
        path: &[&str],
        text: &str,
    ) -> Result<Template, String> {
        let template = Template::parse_secret(text, v.env).map_err(|e| e.to_string())?;
        self.secrets_of(path, text);
        self.placeholders_of(path, &template);
        Ok(template)
    }

    /// `text`, the value of `path`, with its `${NAME}` and `${file:…}` replaced: a
    /// secret, whose variables and files are noted. `None` after saying why not.
    pub fn secret(&mut self, v: &mut Validator, path: &[&str], text: &str) -> Option<String> {
        self.secrets_of(path, text);
        let message = |e| format!("`{}`: {e}", path.join("."));
        interpolate_secret(text, v.env)
            .map_err(|e| v.error(path, message(e)))
            .ok()
    }

    /// Notes the placeholders of `template`, the value of `path`.
    pub fn placeholders_of(&mut self, path: &[&str], template: &Template) {
        let key = path.join(".");
        let found = template
            .placeholders()
            .map(|p| (key.clone(), p.to_string()));
        self.placeholders.extend(found);
    }

    fn secrets_of(&mut self, path: &[&str], text: &str) {
        self.secret_variables.extend(variables(text));
        self.secret_files.extend(read_by(path, text));
    }
}

/// What tableq asks of an action kind's validated table, whichever kind it is.
/// Every answer but [`ActionKind::common`] has a default; a kind says only where
/// it differs.
pub trait ActionKind: std::fmt::Debug + std::any::Any + Send + Sync {
    /// What every kind has: its `common` field.
    fn common(&self) -> &Common;

    /// True when the action runs in the item's transaction, on the worker's session
    /// (its work commits with the row's change); false when it reaches outside the
    /// database, where nothing can be undone.
    fn in_transaction(&self) -> bool {
        false
    }

    /// The SQL the action itself runs, prepared with the queue's other statements.
    fn statements(&self) -> Option<ActionStatements<'_>> {
        None
    }

    /// Whether something downstream can break: the circuit breaker is on by default.
    fn reaches_downstream(&self) -> bool {
        !self.in_transaction()
    }

    /// Whether its failures carry an exit code, so `circuit.transient_exit_codes`
    /// applies.
    fn has_exit_codes(&self) -> bool {
        false
    }

    /// Whether the action can report its progress (lease mode's `:progress`).
    fn reports_progress(&self) -> bool {
        false
    }

    /// Whether in `scope = "batch"` the action still sends each item on its own (a
    /// message per row, all of them before any answer is awaited): each is rendered
    /// from its own row, so `{column}` placeholders stay allowed.
    fn sends_each_item(&self) -> bool {
        false
    }

    /// What the kind's table holds that `scope = "batch"` cannot serve, beyond
    /// placeholders (which batch scope refuses unless the kind [sends each
    /// item](ActionKind::sends_each_item)).
    fn batch_scope_refusals(&self, _queue: &Site<'_>) -> Vec<Finding> {
        Vec::new()
    }

    /// What `check` warns about in the kind's table (it loads, but looks wrong).
    fn warnings(&self, _queue: &Site<'_>) -> Vec<Finding> {
        Vec::new()
    }

    /// What its outcomes look like, for `check`'s sample outcome parameters.
    fn samples(&self) -> Samples {
        Samples::default()
    }
}

/// The SQL an action runs itself, with the key of `[action]` that holds it.
#[derive(Debug, Clone, Copy)]
pub struct ActionStatements<'a> {
    pub key: &'static str,
    pub list: &'a [ParsedStatement],
}

/// What a kind's outcomes bind besides `:error`: `:status` on success and on
/// failure (an HTTP status, an exit code), and whether `:output` is set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Samples {
    pub success_status: Option<i64>,
    pub failure_status: Option<i64>,
    pub output: bool,
}
