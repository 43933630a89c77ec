//! Under systemd, when stderr is the journal: each line starts with the syslog
//! priority in angle brackets (`<3>` for an error, `<4>` a warning, `<6>` info,
//! `<7>` debug and trace), which journald reads and strips (`SyslogLevelPrefix=`,
//! on by default), so `journalctl -p warning` finds every warning and error.

use std::io::Write;

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// Whether stderr is the journal's stream: `JOURNAL_STREAM` holds its
/// `DEVICE:INODE`, which a redirected stderr no longer matches.
pub fn stderr_is_journal() -> bool {
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes into the buffer it is given, and only reads fd 2.
    if unsafe { libc::fstat(2, stat.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: fstat succeeded, so it filled the buffer.
    let stat = unsafe { stat.assume_init() };
    stream.to_string_lossy() == format!("{}:{}", stat.st_dev, stat.st_ino)
}

/// The syslog priority of a level, as journald reads it.
pub fn priority(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        _ => 7,
    }
}

/// `text` with `<priority>` before each of its lines.
pub fn prefixed(priority: u8, text: &[u8]) -> Vec<u8> {
    let prefix = format!("<{priority}>");
    let mut out = Vec::with_capacity(text.len() + prefix.len());
    for line in text.split_inclusive(|b| *b == b'\n') {
        out.extend_from_slice(prefix.as_bytes());
        out.extend_from_slice(line);
    }
    out
}

/// Writes each log line to stderr with its level's priority before it.
pub struct Prioritized;

impl<'a> MakeWriter<'a> for Prioritized {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line::new(&Level::INFO)
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Line {
        Line::new(meta.level())
    }
}

/// One event's text, written to stderr whole, prefixed, when it is dropped.
pub struct Line {
    priority: u8,
    text: Vec<u8>,
}

impl Line {
    fn new(level: &Level) -> Line {
        Line {
            priority: priority(level),
            text: Vec::new(),
        }
    }
}

impl Write for Line {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.text.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if !self.text.is_empty() {
            let line = prefixed(self.priority, &self.text);
            let _ = std::io::stderr().lock().write_all(&line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each level has journald's priority, and every line of a text gets it.
    #[test]
    fn each_line_carries_its_priority() {
        assert_eq!(priority(&Level::ERROR), 3);
        assert_eq!(priority(&Level::WARN), 4);
        assert_eq!(priority(&Level::INFO), 6);
        assert_eq!(priority(&Level::DEBUG), 7);
        assert_eq!(priority(&Level::TRACE), 7);
        assert_eq!(prefixed(4, b"WARN a\n"), b"<4>WARN a\n");
        assert_eq!(prefixed(3, b"one\ntwo\n"), b"<3>one\n<3>two\n");
        assert_eq!(prefixed(6, b"no newline"), b"<6>no newline");
    }
}
