//! The `[action]` table of a queue file, validated: `sql`, `http` or `command`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;

use super::raw::{RawCommandAction, RawHttpAction};
use crate::config::template::{Part, Template};
use crate::sql::statement::ParsedStatement;

/// `[action] timeout` for `type = "sql"` when the file does not set it.
pub const DEFAULT_SQL_TIMEOUT: Duration = Duration::from_secs(60);
/// `[action] timeout` for `type = "http"` when the file does not set it.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// `[action] timeout` for `type = "command"` when the file does not set it.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// What to do with one item.
#[derive(Debug, Clone)]
pub enum ActionConfig {
    Sql(SqlAction),
    Http(HttpAction),
    Command(CommandAction),
}

/// `type = "sql"`: statements run in the item's transaction.
#[derive(Debug, Clone)]
pub struct SqlAction {
    pub statements: Vec<ParsedStatement>,
    pub timeout: Duration,
}

/// `type = "http"`: one request per item, the row as its JSON body.
#[derive(Debug, Clone)]
pub struct HttpAction {
    pub url: Template,
    pub method: String,
    pub headers: Vec<(String, Template)>,
    pub timeout: Duration,
    /// Standard Webhooks signing keys (decoded from `whsec_…`); one signature each.
    pub signing_keys: Vec<SigningKey>,
    pub message_id: Option<Template>,
    pub follow_redirects: bool,
    /// Whether the URL's host comes from the row, so private addresses are refused.
    pub host_from_row: bool,
    pub allow_private_networks: bool,
    /// PEM certificates to trust besides the system's.
    pub ca_pem: Option<Vec<u8>>,
    pub https_only: bool,
}

/// A signing key. Its `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKey(pub Vec<u8>);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(…)")
    }
}

/// `type = "command"`: one process per item, the row as JSON on its stdin.
#[derive(Debug, Clone)]
pub struct CommandAction {
    pub argv: Vec<Template>,
    pub timeout: Duration,
    pub workdir: PathBuf,
}

impl ActionConfig {
    /// How long one item's action may take before it counts as failed.
    pub fn timeout(&self) -> Duration {
        match self {
            ActionConfig::Sql(a) => a.timeout,
            ActionConfig::Http(a) => a.timeout,
            ActionConfig::Command(a) => a.timeout,
        }
    }

    /// The `{placeholder}` names the action uses, with the key each is under.
    pub fn placeholders(&self) -> Vec<(String, &str)> {
        let mut found = Vec::new();
        match self {
            ActionConfig::Sql(_) => {}
            ActionConfig::Http(http) => {
                found.extend(
                    http.url
                        .placeholders()
                        .map(|p| ("action.url".to_string(), p)),
                );
                for (name, value) in &http.headers {
                    found.extend(
                        value
                            .placeholders()
                            .map(|p| (format!("action.headers.{name}"), p)),
                    );
                }
                if let Some(id) = &http.message_id {
                    found.extend(
                        id.placeholders()
                            .map(|p| ("action.message_id".to_string(), p)),
                    );
                }
            }
            ActionConfig::Command(command) => {
                for (index, arg) in command.argv.iter().enumerate() {
                    found.extend(
                        arg.placeholders()
                            .map(|p| (format!("action.command.{index}"), p)),
                    );
                }
            }
        }
        found
    }
}

/// A problem with the `[action]` table: the key path, and what is wrong.
pub type ActionProblem = (Vec<String>, String);

fn problem(path: &[&str], message: impl Into<String>) -> ActionProblem {
    (path.iter().map(|s| s.to_string()).collect(), message.into())
}

/// Validates `type = "http"`. `dir` is the queue file's directory.
pub fn http_action(
    raw: &RawHttpAction,
    dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    problems: &mut Vec<ActionProblem>,
) -> HttpAction {
    let url = Template::parse(&raw.url, env).unwrap_or_else(|e| {
        problems.push(problem(&["action", "url"], format!("`action.url`: {e}")));
        Template { parts: vec![] }
    });
    // A URL the file writes out (placeholders after its start filled with a sample)
    // must parse; one that starts with a placeholder comes whole from the row.
    let sample = match url.parts.first() {
        Some(Part::Literal(_)) => {
            let rendered = url.render(&|_| b"1".to_vec(), &|_, value| value);
            Some(String::from_utf8_lossy(&rendered).into_owned())
        }
        _ => None,
    };
    let filled = if url.as_literal().is_some() {
        ""
    } else {
        " (with each placeholder filled in)"
    };
    if let Some(literal) = sample {
        match reqwest::Url::parse(&literal) {
            Ok(parsed) if !matches!(parsed.scheme(), "http" | "https") => problems.push(problem(
                &["action", "url"],
                format!(
                    "`action.url` must be an http:// or https:// URL, not {}://",
                    parsed.scheme()
                ),
            )),
            Ok(parsed) if raw.https_only && parsed.scheme() != "https" => problems.push(problem(
                &["action", "url"],
                "`action.url` is http:// but `https_only = true`: use https://",
            )),
            Ok(_) => {}
            Err(e) => problems.push(problem(
                &["action", "url"],
                format!("`action.url` is not a URL{filled}: {e}"),
            )),
        }
    }
    let method = raw.method.as_deref().unwrap_or("POST").to_ascii_uppercase();
    if reqwest::Method::from_bytes(method.as_bytes()).is_err() {
        problems.push(problem(
            &["action", "method"],
            format!("`action.method` = {method:?} is not an HTTP method"),
        ));
    }
    let mut headers = Vec::new();
    for (name, value) in &raw.headers {
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            problems.push(problem(
                &["action", "headers", name],
                format!("`{name}` is not a valid header name"),
            ));
            continue;
        }
        match Template::parse(value, env) {
            Ok(template) => headers.push((name.clone(), template)),
            Err(e) => problems.push(problem(
                &["action", "headers", name],
                format!("header `{name}`: {e}"),
            )),
        }
    }
    let signing_keys = match &raw.signing_secret {
        Some(secret) => signing_keys(secret, env).unwrap_or_else(|message| {
            problems.push(problem(&["action", "signing_secret"], message));
            Vec::new()
        }),
        None => Vec::new(),
    };
    let message_id = raw.message_id.as_ref().and_then(|id| {
        Template::parse(id, env)
            .map_err(|e| {
                problems.push(problem(
                    &["action", "message_id"],
                    format!("`action.message_id`: {e}"),
                ))
            })
            .ok()
    });
    let ca_pem = raw.ca_file.as_ref().and_then(|file| {
        let path = dir.join(file);
        match std::fs::read(&path) {
            Ok(pem) if reqwest::Certificate::from_pem_bundle(&pem).is_ok_and(|c| !c.is_empty()) => {
                Some(pem)
            }
            Ok(_) => {
                problems.push(problem(
                    &["action", "ca_file"],
                    format!(
                        "`action.ca_file`: {} holds no PEM certificate",
                        path.display()
                    ),
                ));
                None
            }
            Err(e) => {
                problems.push(problem(
                    &["action", "ca_file"],
                    format!("`action.ca_file`: cannot read {}: {e}", path.display()),
                ));
                None
            }
        }
    });
    HttpAction {
        host_from_row: host_from_row(&url),
        url,
        method,
        headers,
        timeout: raw.timeout.unwrap_or(DEFAULT_HTTP_TIMEOUT),
        signing_keys,
        message_id,
        follow_redirects: raw.follow_redirects,
        allow_private_networks: raw.allow_private_networks,
        ca_pem,
        https_only: raw.https_only,
    }
}

/// True unless the URL's scheme and host are written out in full before any
/// placeholder: only then can the row not choose where the request goes.
pub fn host_from_row(url: &Template) -> bool {
    match url.parts.first() {
        Some(Part::Literal(literal)) if url.parts.len() > 1 => match literal.split_once("://") {
            Some((_, authority)) => !authority.contains(['/', '?', '#']),
            None => true,
        },
        Some(Part::Literal(_)) => false,
        Some(Part::Placeholder(_)) => true,
        None => false,
    }
}

/// `whsec_<base64>`, or several separated by spaces (for rotation).
fn signing_keys(
    secret: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<SigningKey>, String> {
    let secret =
        super::interpolate(secret, env).map_err(|e| format!("`action.signing_secret`: {e}"))?;
    let mut keys = Vec::new();
    for (index, one) in secret.split_whitespace().enumerate() {
        let nth = index + 1;
        let encoded = one.strip_prefix("whsec_").ok_or_else(|| {
            format!("`action.signing_secret`: secret #{nth} does not start with `whsec_`")
        })?;
        let key = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| {
                format!("`action.signing_secret`: secret #{nth} is not base64 after `whsec_`")
            })?;
        if key.is_empty() {
            return Err(format!("`action.signing_secret`: secret #{nth} is empty"));
        }
        keys.push(SigningKey(key));
    }
    if keys.is_empty() {
        return Err("`action.signing_secret` is empty".to_string());
    }
    Ok(keys)
}

/// Validates `type = "command"`. `dir` is the queue file's directory.
pub fn command_action(
    raw: &RawCommandAction,
    dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    problems: &mut Vec<ActionProblem>,
) -> CommandAction {
    let workdir = match &raw.workdir {
        Some(workdir) => {
            let path = dir.join(workdir);
            if !path.is_dir() {
                problems.push(problem(
                    &["action", "workdir"],
                    format!("`action.workdir`: {} is not a directory", path.display()),
                ));
            }
            path
        }
        None => dir.to_path_buf(),
    };
    let mut argv = Vec::new();
    for (index, element) in raw.command.iter().enumerate() {
        match Template::parse(element, env) {
            Ok(template) => argv.push(template),
            Err(e) => problems.push(problem(
                &["action", "command", &index.to_string()],
                format!("`action.command`: {e}"),
            )),
        }
    }
    if raw.command.is_empty() {
        problems.push(problem(&["action", "command"], "`action.command` is empty: give the program and its arguments, e.g. [\"/usr/local/bin/send\", \"{id}\"]"));
    } else if let Some(program) = argv.first().and_then(Template::as_literal) {
        if let Err(message) = find_program(&program, &workdir, env) {
            problems.push(problem(&["action", "command", "0"], message));
        }
    }
    CommandAction {
        argv,
        timeout: raw.timeout.unwrap_or(DEFAULT_COMMAND_TIMEOUT),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Template {
        Template::parse(text, &|_| None).unwrap()
    }

    #[test]
    fn knows_when_the_row_picks_the_host() {
        assert!(!host_from_row(&url("https://hooks.example.com/in/{id}")));
        assert!(!host_from_row(&url("https://hooks.example.com?id={id}")));
        assert!(!host_from_row(&url("https://hooks.example.com")));
        assert!(host_from_row(&url("{endpoint}")));
        assert!(host_from_row(&url("https://{tenant}.example.com/in")));
        assert!(host_from_row(&url("https://hooks.example.com:{port}/in")));
    }

    #[test]
    fn reads_rotated_signing_secrets() {
        let keys = signing_keys(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw whsec_dGVzdA==",
            &|_| None,
        )
        .unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[1].0, b"test");
        assert!(signing_keys("MfKQ9r8G", &|_| None)
            .unwrap_err()
            .contains("whsec_"));
        assert!(!format!("{:?}", keys[1]).contains("test"));
    }
}
