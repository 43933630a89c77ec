//! A command's progress, for lease mode's `:progress`: the last line it appended to
//! the file `TABLEQ_PROGRESS` names, or the last line it wrote to stdout as
//! `progress: …`, whichever came last (a worker process's, the last
//! `{"progress": …}` line it wrote).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::SystemTime;

use crate::lock::lock;
use tokio::io::{AsyncRead, ReadBuf};

/// How much of the file's end is read for its last line, and the longest stdout
/// line looked at.
const TAIL: usize = 4096;
/// What a stdout line that reports progress starts with.
const PREFIX: &str = "progress:";

/// A command's progress: a file of tableq's own (removed when dropped), and the
/// last progress line heard on stdout.
#[derive(Debug)]
pub struct Progress {
    path: PathBuf,
    heard: Mutex<Option<(SystemTime, String)>>,
}

impl Progress {
    /// Creates an empty progress file named after `token`, for its owner only.
    pub fn create(token: &str) -> std::io::Result<Progress> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = std::env::temp_dir().join(format!("tableq-progress-{token}"));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        Ok(Progress {
            path,
            heard: Mutex::new(None),
        })
    }

    /// The file the command is told of in `TABLEQ_PROGRESS`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The progress reported last, by either way; `None` before any.
    pub fn last(&self) -> Option<String> {
        let heard = self.lock().clone();
        let written = self.last_written();
        match (heard, written) {
            (Some((at, line)), Some((modified, _))) if at >= modified => Some(line),
            (_, Some((_, line))) => Some(line),
            (heard, None) => heard.map(|(_, line)| line),
        }
    }

    /// The file's last non-empty line, and when the file was last written.
    fn last_written(&self) -> Option<(SystemTime, String)> {
        let mut file = std::fs::File::open(&self.path).ok()?;
        let metadata = file.metadata().ok()?;
        let start = metadata.len().saturating_sub(TAIL as u64);
        file.seek(SeekFrom::Start(start)).ok()?;
        let mut tail = Vec::new();
        file.read_to_end(&mut tail).ok()?;
        let line = String::from_utf8_lossy(&tail)
            .lines()
            .map(str::trim)
            .rfind(|line| !line.is_empty())?
            .to_string();
        Some((metadata.modified().ok()?, line))
    }

    /// Notes a stdout line, if it reports progress.
    pub fn hear(&self, line: &[u8]) {
        let line = String::from_utf8_lossy(line);
        if let Some(rest) = line.trim().strip_prefix(PREFIX) {
            self.report(rest);
        }
    }

    /// Notes progress reported otherwise (a worker's `{"progress": …}` line).
    pub fn report(&self, progress: &str) {
        *self.lock() = Some((SystemTime::now(), progress.trim().to_string()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(SystemTime, String)>> {
        lock(&self.heard)
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A command's stdout, passed on unchanged, with each `progress: …` line heard.
pub struct Listening<R> {
    inner: R,
    progress: Arc<Progress>,
    /// The line read so far (at most [`TAIL`] bytes of it).
    line: Vec<u8>,
}

impl<R> Listening<R> {
    pub fn new(inner: R, progress: Arc<Progress>) -> Self {
        Listening {
            inner,
            progress,
            line: Vec::new(),
        }
    }

    fn scan(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if byte == b'\n' {
                self.progress.hear(&self.line);
                self.line.clear();
            } else if self.line.len() < TAIL {
                self.line.push(byte);
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Listening<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let new = buf.filled()[before..].to_vec();
            self.scan(&new);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn progress() -> Arc<Progress> {
        Arc::new(Progress::create(&format!("unit-{}", fastrand::u64(..))).unwrap())
    }

    #[test]
    fn reads_the_last_line_written_and_removes_the_file() {
        let progress = progress();
        assert_eq!(progress.last(), None);
        std::fs::write(progress.path(), "10%\n55%\n\n").unwrap();
        assert_eq!(progress.last().as_deref(), Some("55%"));
        let path = progress.path().to_path_buf();
        drop(progress);
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn hears_progress_lines_on_stdout_and_passes_everything_on() {
        let progress = progress();
        let stdout: &[u8] = b"starting\nprogress: 40%\nprogress:  90% \ndone\n";
        let mut listening = Listening::new(stdout, progress.clone());
        let mut passed = Vec::new();
        listening.read_to_end(&mut passed).await.unwrap();
        assert_eq!(passed, stdout);
        assert_eq!(progress.last().as_deref(), Some("90%"));
    }
}
