//! What the script's answer means, as an HTTP answer would (`action::answer`): its
//! `Status:` header (200 when it sets none), any 2xx success; 429, 502, 503 and 504
//! trouble downstream, with their `Retry-After`; any other status the item's own
//! failure, its body (else what the script wrote to stderr) as `:error`.
//!
//! A 2xx is not success when PHP died on the way (a fatal error, an uncaught
//! exception, a limit, a parse error: `crate::action::php`), nor, with
//! `done_header` set, when the answer lacks that header (the script stopped before
//! its end: `exit()`, `die()`). PHP-FPM's own refusals of the script are the
//! queue's fault; a server that cannot be reached or says it is overloaded before
//! taking the request is unreached (no attempt spent); one that goes away
//! mid-answer is trouble downstream.

use super::config::FastcgiAction;
use super::record::{Answer, ExchangeError};
use crate::action::answer::{retry_after_seconds, Verdict};
use crate::action::capture::{clip_error, OUTPUT_LIMIT};
use crate::action::php;
use crate::action::{Blame, Outcome};

/// The CGI answer split: its status, `Retry-After`, and body.
#[derive(Debug, PartialEq, Eq)]
pub struct Reply<'a> {
    pub status: u16,
    pub retry_after: Option<u32>,
    pub body: &'a [u8],
    /// The header block, for a header asked of it by name.
    head: String,
}

impl Reply<'_> {
    /// Whether the script sent header `name`.
    fn has(&self, name: &str) -> bool {
        self.head.lines().any(|line| {
            line.split_once(':')
                .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        })
    }
}

/// Splits the script's stdout into its CGI headers and body.
pub fn reply(stdout: &[u8]) -> Result<Reply<'_>, String> {
    let (head, body) = split(stdout).ok_or_else(|| {
        "the script's answer has no header block (no blank line after the headers)".to_string()
    })?;
    let mut reply = Reply {
        status: 200,
        retry_after: None,
        body: &body[..body.len().min(OUTPUT_LIMIT)],
        head: String::from_utf8_lossy(head).into_owned(),
    };
    for line in reply.head.clone().lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if name.trim().eq_ignore_ascii_case("status") {
            let code = value.split_whitespace().next().unwrap_or_default();
            reply.status = match code.parse::<u16>() {
                Ok(code) if (100..1000).contains(&code) => code,
                _ => return Err(format!("the script's Status header is not a status: {line:?}")),
            };
        } else if name.trim().eq_ignore_ascii_case("retry-after") {
            reply.retry_after = retry_after_seconds(value);
        }
    }
    Ok(reply)
}

/// `stdout` cut at the first blank line (CRLF or LF).
fn split(stdout: &[u8]) -> Option<(&[u8], &[u8])> {
    let crlf = stdout.windows(4).position(|w| w == b"\r\n\r\n").map(|at| (at, 4));
    let lf = stdout.windows(2).position(|w| w == b"\n\n").map(|at| (at, 2));
    let (at, gap) = match (crlf, lf) {
        (Some(c), Some(l)) => c.min(l),
        (one, other) => one.or(other)?,
    };
    Some((&stdout[..at], &stdout[at + gap..]))
}

/// The outcome of the script's `answer`, from the server at `server`.
pub fn judge(
    answer: &Answer,
    server: &str,
    config: &FastcgiAction,
    error_log: Option<&str>,
) -> Outcome {
    match answer.protocol_status {
        0 => {}
        // FCGI_CANT_MPX_CONN, FCGI_OVERLOADED: refused before the script ran.
        1 | 2 => return Outcome::unreached(format!("PHP-FPM at {server} is overloaded")),
        other => {
            return Outcome::downstream(format!(
                "{server} ended the request with FastCGI protocol status {other}"
            ))
        }
    }
    let reply = match reply(&answer.stdout) {
        Ok(reply) => reply,
        Err(why) => return Outcome::failure(with_stderr(why, &answer.stderr)),
    };
    let mut outcome = Outcome {
        status: Some(i64::from(reply.status)),
        output: Some(reply.body.to_vec()),
        retry_after: reply.retry_after,
        ..Outcome::default()
    };
    if let Some(why) = not_done(&reply, answer, config) {
        outcome.error = Some(clip_error(why));
        return outcome;
    }
    if Verdict::of(reply.status) == Verdict::Success {
        return outcome;
    }
    if let Some(refused) = refused_script(&answer.stderr, server, &config.script) {
        return Outcome {
            blame: Blame::Queue,
            ..Outcome::failure(refused)
        };
    }
    outcome.error = Some(clip_error(error_text(&reply, &answer.stderr, error_log)));
    if Verdict::of(reply.status) == Verdict::Downstream {
        outcome.blame = Blame::Downstream;
    }
    outcome
}

/// Why an answer is not the script's success whatever its status: PHP died on
/// the way (its message), or, with `done_header`, the script did not say it was
/// done.
fn not_done(reply: &Reply<'_>, answer: &Answer, config: &FastcgiAction) -> Option<String> {
    let logged = messages(&answer.stderr);
    // The output's end: the tail when it overran what is kept of its head.
    let end = match answer.tail.is_empty() {
        true => &answer.stdout[..],
        false => &answer.tail[..],
    };
    let died = php::died_in_log(logged.iter().map(String::as_str))
        .or_else(|| php::died_in_output(end));
    if died.is_some() {
        return died;
    }
    let header = config.done_header.as_deref()?;
    let succeeded = Verdict::of(reply.status) == Verdict::Success;
    (succeeded && !reply.has(header)).then(|| {
        format!(
            "the script answered Status {} without its `{header}` header (done_header): it \
             stopped before its end — exit(), die(), or an error PHP did not report",
            reply.status
        )
    })
}

/// `:error` for a failed status: the body, else the stderr, else the status and,
/// for a 500, where PHP logged why (`error_log`, when the pool could say).
fn error_text(reply: &Reply<'_>, stderr: &[u8], error_log: Option<&str>) -> String {
    let body = String::from_utf8_lossy(reply.body).trim().to_string();
    if !body.is_empty() {
        return body;
    }
    let stderr = messages(stderr).join("; ");
    if !stderr.is_empty() {
        return stderr;
    }
    let status = reply.status;
    match (status, error_log) {
        (500, Some(file)) => format!(
            "the script answered Status 500 with an empty body: PHP died, and logged why to {file} \
             (the pool's error_log)"
        ),
        (500, None) => "the script answered Status 500 with an empty body: PHP died, and logged \
                        why where the pool's error_log points (`tableq check` names it)"
            .to_string(),
        _ => format!("the script answered Status {status} with an empty body"),
    }
}

/// True for PHP's death said nowhere tableq sees: a 500, no body, nothing on stderr
/// (the pool logs to a file, display_errors off).
pub fn died_silently(answer: &Answer) -> bool {
    answer.protocol_status == 0
        && messages(&answer.stderr).is_empty()
        && reply(&answer.stdout).is_ok_and(|r| r.status == 500 && r.body.trim_ascii().is_empty())
}

/// `why`, with what the script wrote to stderr, if anything.
fn with_stderr(why: String, stderr: &[u8]) -> String {
    match messages(stderr).join("; ") {
        said if said.is_empty() => why,
        said => format!("{why}; its stderr: {said}"),
    }
}

/// PHP-FPM's own words when it would not run the script: every row would fail alike.
fn refused_script(stderr: &[u8], server: &str, script: &str) -> Option<String> {
    let said = String::from_utf8_lossy(stderr);
    if said.contains("Primary script unknown") {
        return Some(format!(
            "PHP-FPM at {server} finds no script {script} (Primary script unknown): \
             `action.script` must be the script's path on the FPM host, readable by the pool's user"
        ));
    }
    said.contains("has been denied (see security.limit_extensions)").then(|| {
        format!(
            "PHP-FPM at {server} refuses to run {script} (see security.limit_extensions: \
             the script's name must end in .php, or the pool must allow its extension)"
        )
    })
}

/// The messages of PHP's stderr: `PHP message: ` prefixes dropped, one per line or
/// per `; ` that joins them.
pub fn messages(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr)
        .split(['\n', '\0'])
        .flat_map(|line| line.split("; PHP message: "))
        .map(|m| m.trim().trim_start_matches("PHP message: ").trim().to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

/// A request that did not get its whole answer: trouble downstream, said as
/// `cannot connect to …`, `… closed the connection …`.
pub fn failed(error: &ExchangeError, server: &str) -> Outcome {
    Outcome::downstream(match error {
        ExchangeError::Io { error, answered } => match error.kind() {
            std::io::ErrorKind::UnexpectedEof if *answered => format!(
                "PHP-FPM at {server} closed the connection before the script finished (its \
                 child exited or was killed: see PHP-FPM's log)"
            ),
            std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::BrokenPipe
            | std::io::ErrorKind::ConnectionReset => {
                format!("PHP-FPM at {server} closed the connection without answering")
            }
            _ => format!("the request to PHP-FPM at {server} failed: {error}"),
        },
        ExchangeError::Protocol(what) => format!("PHP-FPM at {server} sent {what}"),
    })
}

/// A connection that did not open.
pub fn cannot_connect(error: &std::io::Error, server: &str) -> Outcome {
    // Nothing was sent: the script cannot have run.
    let hint = match error.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
            " (is PHP-FPM running, and listening there?)"
        }
        std::io::ErrorKind::WouldBlock => " (its listen backlog is full: every child is busy)",
        std::io::ErrorKind::PermissionDenied => {
            " (the socket's listen.owner, listen.group and listen.mode must let tableq's user connect)"
        }
        _ => "",
    };
    Outcome::unreached(format!("cannot connect to PHP-FPM at {server}: {error}{hint}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(path: &str, done_header: Option<&str>) -> FastcgiAction {
        FastcgiAction {
            common: crate::config::action::kind::Common {
                timeout: std::time::Duration::from_secs(30),
                placeholders: Vec::new(),
                secret_variables: Vec::new(),
                secret_files: Vec::new(),
            },
            address: super::super::config::Address::Unix("/run/fpm.sock".into()),
            script: path.to_string(),
            signing_keys: Vec::new(),
            done_header: done_header.map(str::to_string),
            max_connections: 5,
        }
    }

    fn answer(stdout: &str, stderr: &str) -> Answer {
        Answer {
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
            ..Answer::default()
        }
    }

    #[test]
    fn the_status_header_decides_as_an_http_status_does() {
        let ok = judge(&answer("Content-type: text/html\r\n\r\nsent", ""), "s", &script("/j.php", None), None);
        assert!(ok.succeeded());
        assert_eq!((ok.status, ok.output.as_deref()), (Some(200), Some(&b"sent"[..])));
        let busy = judge(&answer("Status: 503 Busy\nRetry-After: 30\n\n", ""), "s", &script("/j.php", None), None);
        assert_eq!((busy.blame, busy.retry_after), (Blame::Downstream, Some(30)));
        let bad = judge(&answer("Status: 422\r\n\r\nno such recipient\n", ""), "s", &script("/j.php", None), None);
        assert_eq!(bad.blame, Blame::Item);
        assert_eq!(bad.error.as_deref(), Some("no such recipient"));
        let fatal = "PHP message: PHP Fatal error:  Uncaught Exception: boom";
        let died = judge(&answer("Status: 500 Internal Server Error\r\n\r\n", fatal), "s", &script("/j.php", None), None);
        assert_eq!(died.error.as_deref(), Some("PHP Fatal error: Uncaught Exception: boom"));
    }

    #[test]
    fn a_2xx_after_phps_death_or_without_the_done_header_is_a_failure() {
        let plain = script("/j.php", None);
        let displayed = "Content-type: text/html\r\n\r\nhalf done\n<br />\n<b>Fatal error</b>:  \
            Uncaught Exception: boom in /j.php:3\nStack trace:\n#0 {main}\n  thrown in <b>/j.php</b> \
            on line <b>3</b><br />\n";
        let died = judge(&answer(displayed, ""), "s", &plain, None);
        assert_eq!((died.blame, died.status), (Blame::Item, Some(200)));
        assert_eq!(died.error.as_deref(), Some("PHP Fatal error: Uncaught Exception: boom in /j.php:3"));
        let logged = "PHP message: PHP Fatal error:  Allowed memory size of 2097152 bytes exhausted in /j.php on line 4";
        let died = judge(&answer("Content-type: text/html\r\n\r\n", logged), "s", &plain, None);
        assert!(died.error.unwrap().starts_with("PHP Fatal error: Allowed memory size"));
        let acknowledged = script("/j.php", Some("Tableq-Done"));
        let quit = judge(&answer("Content-type: text/html\r\n\r\n", ""), "s", &acknowledged, None);
        assert!(quit.error.unwrap().contains("without its `Tableq-Done` header"));
        let done = judge(&answer("tableq-done: 1\r\n\r\n", ""), "s", &acknowledged, None);
        assert!(done.succeeded());
    }

    #[test]
    fn a_script_fpm_cannot_find_is_the_queues_fault() {
        let missing = answer("Status: 404 Not Found\r\n\r\nFile not found.\n", "Primary script unknown");
        let outcome = judge(&missing, "unix:/run/fpm.sock", &script("/srv/nope.php", None), None);
        assert_eq!(outcome.blame, Blame::Queue);
        assert!(outcome.error.unwrap().contains("finds no script /srv/nope.php"));
    }

    #[test]
    fn splits_joined_php_messages() {
        let said = b"PHP message: progress: 10%; PHP message: progress: 50%\nother";
        assert_eq!(messages(said), ["progress: 10%", "progress: 50%", "other"]);
    }
}
