//! What a pool does with PHP's errors — `display_errors`, `log_errors`,
//! `error_log` — and what that means for tableq: where a script's fatal error
//! reaches it, if at all (`check` says it), and which file to name when a script
//! died without a word (`run` asks once, as the queue starts). Known only by asking
//! PHP in the pool: a probe script, written beside the queue's script (where the
//! pool may run scripts) when the server is on this host, run once, and removed.
//! Nothing is sent to the queue's own script, and no setting is changed (a
//! `PHP_VALUE` would stay in the child for the web application's later requests).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OnceCell;

use serde::Deserialize;

use super::record::{exchange, request};
use super::config::FastcgiAction;
use super::{judge, pool};
use crate::action::deadline::within;
use crate::action::Probed;

/// The probe: the settings that decide where a fatal error goes, as JSON.
const PROBE: &str = "<?php\nheader('Content-Type: application/json');\n\
    echo json_encode(['display_errors' => ini_get('display_errors'), \
    'log_errors' => ini_get('log_errors'), 'error_log' => ini_get('error_log')]);\n";

/// Where a pool logs PHP's errors, for the message of a script that died without
/// a word (500, no body, nothing on stderr). Asked once as the queue starts — when
/// the pool is on this host, in the background, within [`ASK_WITHIN`] — so that no
/// item waits on the question in the pool's backlog.
pub struct ErrorLog(Arc<OnceCell<Option<String>>>);

/// How long the question may take.
const ASK_WITHIN: Duration = Duration::from_secs(2);

impl ErrorLog {
    /// Starts asking the pool of `config`, if there is a runtime to ask from.
    pub fn ask(config: &FastcgiAction) -> ErrorLog {
        let known = Arc::new(OnceCell::new());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (config, known) = (config.clone(), known.clone());
            runtime.spawn(async move {
                known.get_or_init(|| error_log(&config)).await;
            });
        }
        ErrorLog(known)
    }

    /// The pool's error_log file: once the question is answered (it may still be
    /// under way: up to [`ASK_WITHIN`]); `None` when the pool cannot say.
    pub async fn file(&self) -> Option<&str> {
        within(ASK_WITHIN, self.0.get_or_init(|| async { None }))
            .await
            .ok()?
            .as_deref()
    }
}

/// The pool's error_log file, asked of PHP there.
async fn error_log(config: &FastcgiAction) -> Option<String> {
    let server = config.address.to_string();
    let settings = asked(config, &server).await.ok()?;
    settings.error_log.filter(|file| !file.is_empty())
}

/// What PHP in the pool said of its settings.
#[derive(Debug, Deserialize, PartialEq, Eq)]
pub struct ErrorSettings {
    display_errors: Option<String>,
    log_errors: Option<String>,
    pub error_log: Option<String>,
}

/// What `check` says of the pool's handling of errors, and the advice that holds
/// for every pool.
pub async fn look(config: &FastcgiAction, server: &str) -> Vec<Probed> {
    let mut found = vec![Probed::note(
        "address",
        "a pool of its own for jobs is best: each of tableq's kept connections holds a child \
         (give it pm.max_children ≥ action.max_connections), and its memory_limit, \
         max_execution_time and display_errors can suit jobs without touching the web \
         application's",
    )];
    found.push(match asked(config, server).await {
        Ok(settings) => settings.meaning(config.done_header.is_some()),
        Err(why) => Probed::note(
            "address",
            format!("cannot ask the pool how it reports PHP's errors ({why})"),
        ),
    });
    found
}

/// [`ask`], within [`ASK_WITHIN`].
async fn asked(config: &FastcgiAction, server: &str) -> Result<ErrorSettings, String> {
    within(ASK_WITHIN, ask(config, server))
        .await
        .map_err(|late| late.to_string())?
}

/// Runs the probe in the pool: its answer, or why there is none.
async fn ask(config: &FastcgiAction, server: &str) -> Result<ErrorSettings, String> {
    if !config.address.is_local() {
        return Err(format!("PHP-FPM at {server} is on another host"));
    }
    let script = Path::new(&config.script);
    let beside = script.parent().unwrap_or(Path::new("/"));
    let probe = Probe::write(beside)?;
    let name = probe.0.as_os_str().as_encoded_bytes();
    let params: [(&str, &[u8]); 4] = [
        ("SCRIPT_FILENAME", name),
        ("SCRIPT_NAME", name),
        ("REQUEST_METHOD", b"GET"),
        ("GATEWAY_INTERFACE", b"CGI/1.1"),
    ];
    let mut conn = pool::connect(&config.address)
        .await
        .map_err(|e| judge::cannot_connect(&e, server).error.unwrap_or_default())?;
    let answer = exchange(&mut conn, &request(&params, b""), &mut |_| {})
        .await
        .map_err(|e| judge::failed(&e, server).error.unwrap_or_default())?;
    let reply = judge::reply(&answer.stdout)?;
    serde_json::from_slice(reply.body).map_err(|_| {
        let said = String::from_utf8_lossy(reply.body);
        format!("the probe script answered Status {}: {}", reply.status, said.trim())
    })
}

impl ErrorSettings {
    /// What these settings mean for a script's fatal error.
    fn meaning(&self, done_header: bool) -> Probed {
        let on = |value: &Option<String>| {
            let value = value.as_deref().unwrap_or_default().to_ascii_lowercase();
            !matches!(value.as_str(), "" | "0" | "off" | "false" | "no")
        };
        let log_file = self.error_log.as_deref().filter(|path| !path.is_empty());
        let acknowledged = match done_header {
            true => "; done_header makes any other stop a failure too",
            false => "; set action.done_header (the script sends it when done) so that exit() and die() are failures too",
        };
        match (on(&self.display_errors), on(&self.log_errors), log_file) {
            (true, _, _) => Probed::note(
                "address",
                format!(
                    "the pool displays PHP's errors (display_errors on): a fatal error answers 200 \
                     with PHP's message at the end of the output, which tableq reads as the item's \
                     failure with PHP's message as :error{acknowledged}"
                ),
            ),
            (false, true, None) => Probed::note(
                "address",
                format!(
                    "the pool sends PHP's errors to tableq (log_errors on, no error_log file): a \
                     fatal error is the item's failure with PHP's message as :error{acknowledged}"
                ),
            ),
            (false, _, file) => Probed::warning(
                "address",
                format!(
                    "the pool logs PHP's errors {} (display_errors off): a fatal error answers \
                     Status 500 with an empty body, and :error can only say so — PHP's message is \
                     in that log{acknowledged}",
                    file.map_or("nowhere tableq sees".to_string(), |f| format!("to {f}"))
                ),
            ),
        }
    }
}

/// The probe script on disk, removed when dropped.
struct Probe(PathBuf);

impl Probe {
    /// Writes the probe in `dir`: a new file of its own (never through a link, nor
    /// over another copy's), readable by the pool.
    fn write(dir: &Path) -> Result<Probe, String> {
        let name = format!(".tableq-check-{}-{:016x}.php", std::process::id(), fastrand::u64(..));
        let path = dir.join(name);
        let cannot = |e: std::io::Error| format!("cannot write a probe script in {}: {e}", dir.display());
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&path)
            .map_err(cannot)?;
        let probe = Probe(path);
        file.write_all(PROBE.as_bytes()).map_err(cannot)?;
        Ok(probe)
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(display: &str, log: &str, file: &str) -> ErrorSettings {
        ErrorSettings {
            display_errors: Some(display.into()),
            log_errors: Some(log.into()),
            error_log: Some(file.into()),
        }
    }

    #[test]
    fn says_where_a_fatal_error_reaches_tableq() {
        let displayed = settings("1", "0", "").meaning(false);
        assert!(displayed.message.contains("answers 200 with PHP's message"));
        let sent = settings("Off", "1", "").meaning(true);
        assert!(sent.message.contains("sends PHP's errors to tableq"));
        let filed = settings("0", "1", "/var/log/fpm-php.log").meaning(false);
        assert_eq!(filed.severity, crate::diagnostic::Severity::Warning);
        assert!(filed.message.contains("to /var/log/fpm-php.log"), "{}", filed.message);
    }
}
