//! Capturing what the library logs, for tests that check the log itself. One
//! subscriber per test process (tracing allows one global default), writing plain
//! text into a shared buffer. The process runs every module's tests, and once one
//! of them has called [`capture`] every engine in the process logs into it: a test
//! reads only its own queue's lines ([`Logs::lines_of`]), and gives that queue a
//! name no other test in the crate uses.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// The lines that mention `needle`.
    pub fn lines_with(&self, needle: &str) -> Vec<String> {
        self.text()
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }

    /// The lines of the queue `queue` — those with its `queue=NAME` field, as a
    /// worker's span or a progress line has it, the name whole — that mention
    /// `needle`.
    pub fn lines_of(&self, queue: &str, needle: &str) -> Vec<String> {
        let field = format!("queue={queue}");
        self.lines_with(needle)
            .into_iter()
            .filter(|line| {
                line.match_indices(&field).any(|(at, _)| {
                    !line[at + field.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
                })
            })
            .collect()
    }

    /// Waits up to 30 s until a line of the queue `queue` mentions `needle`; the
    /// lines that do.
    pub async fn wait_for(&self, queue: &str, needle: &str) -> Vec<String> {
        let what = format!("queue {queue} to say {needle:?}");
        super::eventually(&what, std::time::Duration::from_secs(30), || async {
            !self.lines_of(queue, needle).is_empty()
        })
        .await;
        self.lines_of(queue, needle)
    }
}

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Starts capturing (once per process) and returns the shared log.
pub fn capture() -> Logs {
    static LOGS: OnceLock<Logs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Logs::default();
        let writer = logs.clone();
        tracing_subscriber::fmt()
            .with_env_filter("info")
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        logs
    })
    .clone()
}
