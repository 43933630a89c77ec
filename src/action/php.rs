//! PHP's death, recognised in what a PHP handler sent back: a fatal error, an
//! uncaught exception or error, `memory_limit` or `max_execution_time` exhausted, a
//! parse error. PHP says it in one of two places, whatever the status it sends:
//!
//! - its log (`log_errors` on, no `error_log` file): a line `PHP Fatal error:  …`,
//!   which PHP-FPM hands over on the FastCGI stderr stream (`PHP message: PHP …`)
//!   and the CLI writes on stderr;
//! - its display (`display_errors` on): `Fatal error: … in /path.php on line 3` at
//!   the end of the output, plain or in HTML (`<b>Fatal error</b>:  …<br />`).
//!
//! A handler whose PHP died did not finish its work, even when it answered 200
//! (PHP with `display_errors` on cannot send a 500 once it has displayed the
//! error). [`died_in_log`] and [`died_in_output`] return PHP's own message: its
//! type, text, file and line.

/// The names PHP gives the errors that end a script.
const FATAL: [&str; 3] = ["Fatal error", "Parse error", "Recoverable fatal error"];

/// How much of the end of an output is searched: a fatal error's message and a
/// deep stack trace (a framework's, 80 frames: ~12 KiB) fit.
pub const TAIL: usize = 32 * 1024;

/// PHP's message if `log` (PHP's log lines: FPM's stderr stream, a CLI's stderr)
/// holds the line of an error that ended the script. PHP's logger starts each line
/// `PHP `: a line the script logged itself (`error_log("Fatal error: …")`) does not.
pub fn died_in_log<'a>(log: impl IntoIterator<Item = &'a str>) -> Option<String> {
    log.into_iter().find_map(|line| {
        let line = line.trim();
        let line = line
            .strip_prefix("PHP message:")
            .map_or(line, str::trim_start);
        fatal_line(line.strip_prefix("PHP ")?)
    })
}

/// PHP's message if `output` ends with a displayed error that ended the script:
/// the last thing PHP writes once it dies is the error, ending `on line N`. An
/// output that merely mentions an error earlier on is not a death. Only the last
/// [`TAIL`] bytes are read.
pub fn died_in_output(output: &[u8]) -> Option<String> {
    let tail = &output[output.len().saturating_sub(TAIL)..];
    let text = without_tags(&String::from_utf8_lossy(tail));
    let mut last = None;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if let Some(message) = fatal_line(line) {
            last = Some((at, message));
        }
        at += line.len();
    }
    let (at, message) = last?;
    ends_on_a_line(&text[at..]).then_some(message)
}

/// `PHP Fatal error: …` if `line` is a fatal error's line as PHP displays it
/// (`Fatal error: …`), or logs it once its `PHP ` is taken off.
fn fatal_line(line: &str) -> Option<String> {
    let line = line.trim();
    FATAL.iter().find_map(|kind| {
        let text = line.strip_prefix(kind)?.strip_prefix(':')?.trim();
        (!text.is_empty()).then(|| format!("PHP {kind}: {text}"))
    })
}

/// True if `text` ends as PHP ends an error's message: `… on line 12`.
fn ends_on_a_line(text: &str) -> bool {
    let text = text.trim_end();
    let digits = text.trim_end_matches(|c: char| c.is_ascii_digit());
    digits.len() < text.len() && digits.ends_with(" on line ")
}

/// `text` without its HTML tags (`<br />`, `<b>`), which PHP's `html_errors` adds.
fn without_tags(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => plain.push(c),
            _ => {}
        }
    }
    plain
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_fatal_error_displayed_plain_or_in_html_at_the_end() {
        let plain =
            b"sent 3 of 5\nFatal error: Uncaught RuntimeException: boom in /srv/job.php:7\n\
            Stack trace:\n#0 {main}\n  thrown in /srv/job.php on line 7\n";
        assert_eq!(
            died_in_output(plain).as_deref(),
            Some("PHP Fatal error: Uncaught RuntimeException: boom in /srv/job.php:7")
        );
        let html = b"<br />\n<b>Fatal error</b>:  Allowed memory size of 2097152 bytes exhausted \
            (tried to allocate 4096 bytes) in <b>/srv/job.php</b> on line <b>4</b><br />\n";
        assert_eq!(
            died_in_output(html).as_deref(),
            Some("PHP Fatal error: Allowed memory size of 2097152 bytes exhausted (tried to allocate 4096 bytes) in /srv/job.php on line 4")
        );
        let parse =
            b"\nParse error: syntax error, unexpected end of file in /srv/job.php on line 9\n";
        assert!(died_in_output(parse)
            .unwrap()
            .starts_with("PHP Parse error: syntax error"));
    }

    #[test]
    fn an_output_that_only_mentions_an_error_is_no_death() {
        assert_eq!(died_in_output(b"{\"ok\":true}"), None);
        let mentions = b"Fatal error: in the importer's last run, on line 3\nall is well now\n";
        assert_eq!(died_in_output(mentions), None);
        assert_eq!(
            died_in_output(b"a report about Parse error: handling"),
            None
        );
    }

    #[test]
    fn finds_a_fatal_error_in_phps_log_lines() {
        let logged = [
            "PHP Warning:  Undefined variable $x in /srv/job.php on line 2",
            "PHP message: PHP Fatal error:  Maximum execution time of 1 second exceeded in /srv/job.php on line 5",
        ];
        assert_eq!(
            died_in_log(logged).as_deref(),
            Some("PHP Fatal error: Maximum execution time of 1 second exceeded in /srv/job.php on line 5")
        );
        assert_eq!(died_in_log(["PHP Warning:  Undefined variable $x"]), None);
        assert_eq!(died_in_log(["progress: 40%"]), None);
        let said_by_the_script = ["PHP message: Fatal error: upstream down, will retry"];
        assert_eq!(died_in_log(said_by_the_script), None);
    }

    #[test]
    fn reads_windows_line_ends_and_long_traces() {
        let crlf = "a\r\nb\r\nc\u{e9}\r\nFatal error: boom in /a.php on line 3\r\n";
        assert!(died_in_output(crlf.as_bytes()).is_some());
        let frame =
            "/srv/app/vendor/laravel/framework/src/Illuminate/Pipeline/Pipeline.php(128): then()";
        let frames: String = (0..120).map(|i| format!("#{i} {frame}\n")).collect();
        let deep = format!(
            "\nFatal error: Uncaught Exception: deep in /srv/job.php:3\nStack trace:\n{frames}  thrown in /srv/job.php on line 3\n"
        );
        assert!(deep.len() > 8 * 1024);
        assert!(died_in_output(deep.as_bytes()).is_some());
    }
}
