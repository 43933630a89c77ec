//! What the script's answer means, as an HTTP answer would: its `Status:` header
//! (200 when it sets none), any 2xx success; 429, 502, 503 and 504 trouble
//! downstream, with their `Retry-After`; any other status the item's own failure,
//! its body (else what the script wrote to stderr) as `:error`. PHP-FPM's own
//! refusals of the script are the queue's fault; a server that cannot be reached,
//! is overloaded or goes away mid-answer is trouble downstream.

use super::record::{Answer, ExchangeError};
use crate::action::capture::OUTPUT_LIMIT;
use crate::action::http::judge::retry_after_seconds;
use crate::action::{Blame, Outcome};

/// Statuses that say "not now" rather than "not this item".
const DOWNSTREAM_STATUSES: [u16; 4] = [429, 502, 503, 504];

/// The CGI answer split: its status, `Retry-After`, and body.
#[derive(Debug, PartialEq, Eq)]
pub struct Reply<'a> {
    pub status: u16,
    pub retry_after: Option<u64>,
    pub body: &'a [u8],
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
    };
    for line in String::from_utf8_lossy(head).lines() {
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
pub fn judge(answer: &Answer, server: &str, script: &str) -> Outcome {
    match answer.protocol_status {
        0 => {}
        2 => return Outcome::downstream(format!("PHP-FPM at {server} is overloaded")),
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
    if (200..300).contains(&reply.status) {
        return outcome;
    }
    if let Some(refused) = refused_script(&answer.stderr, server, script) {
        return Outcome {
            blame: Blame::Queue,
            ..Outcome::failure(refused)
        };
    }
    outcome.error = Some(crate::action::capture::clip_error(error_text(
        reply.status,
        reply.body,
        &answer.stderr,
    )));
    if DOWNSTREAM_STATUSES.contains(&reply.status) {
        outcome.blame = Blame::Downstream;
    }
    outcome
}

/// `:error` for a failed status: the body, else the stderr, else the status.
fn error_text(status: u16, body: &[u8], stderr: &[u8]) -> String {
    let body = String::from_utf8_lossy(body).trim().to_string();
    if !body.is_empty() {
        return body;
    }
    let stderr = messages(stderr).join("; ");
    if !stderr.is_empty() {
        return stderr;
    }
    format!("the script answered Status {status} with an empty body")
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
    Outcome::downstream(format!("cannot connect to PHP-FPM at {server}: {error}{hint}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(stdout: &str, stderr: &str) -> Answer {
        Answer {
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
            protocol_status: 0,
        }
    }

    #[test]
    fn the_status_header_decides_as_an_http_status_does() {
        let ok = judge(&answer("Content-type: text/html\r\n\r\nsent", ""), "s", "/j.php");
        assert!(ok.succeeded());
        assert_eq!((ok.status, ok.output.as_deref()), (Some(200), Some(&b"sent"[..])));
        let busy = judge(&answer("Status: 503 Busy\nRetry-After: 30\n\n", ""), "s", "/j.php");
        assert_eq!((busy.blame, busy.retry_after), (Blame::Downstream, Some(30)));
        let bad = judge(&answer("Status: 422\r\n\r\nno such recipient\n", ""), "s", "/j.php");
        assert_eq!(bad.blame, Blame::Item);
        assert_eq!(bad.error.as_deref(), Some("no such recipient"));
        let fatal = "PHP message: PHP Fatal error:  Uncaught Exception: boom";
        let died = judge(&answer("Status: 500 Internal Server Error\r\n\r\n", fatal), "s", "/j.php");
        assert_eq!(died.error.as_deref(), Some("PHP Fatal error:  Uncaught Exception: boom"));
    }

    #[test]
    fn a_script_fpm_cannot_find_is_the_queues_fault() {
        let missing = answer("Status: 404 Not Found\r\n\r\nFile not found.\n", "Primary script unknown");
        let outcome = judge(&missing, "unix:/run/fpm.sock", "/srv/nope.php");
        assert_eq!(outcome.blame, Blame::Queue);
        assert!(outcome.error.unwrap().contains("finds no script /srv/nope.php"));
    }

    #[test]
    fn splits_joined_php_messages() {
        let said = b"PHP message: progress: 10%; PHP message: progress: 50%\nother";
        assert_eq!(messages(said), ["progress: 10%", "progress: 50%", "other"]);
    }
}
