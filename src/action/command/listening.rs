//! A command's stdout, listened to for lease mode's `:progress`: each line in the
//! `progress: …` form is heard by the run's [`Progress`], and every byte passes on
//! unchanged.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

use crate::action::progress::{Progress, TAIL};

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

    #[tokio::test]
    async fn hears_progress_lines_on_stdout_and_passes_everything_on() {
        let progress = Arc::new(Progress::create(&format!("unit-{}", fastrand::u64(..))).unwrap());
        let stdout: &[u8] = b"starting\nprogress: 40%\nprogress:  90% \ndone\n";
        let mut listening = Listening::new(stdout, progress.clone());
        let mut passed = Vec::new();
        listening.read_to_end(&mut passed).await.unwrap();
        assert_eq!(passed, stdout);
        assert_eq!(progress.last().as_deref(), Some("90%"));
    }
}
