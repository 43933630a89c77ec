//! Reading a child's or a server's output without letting it cost unbounded memory:
//! the first bytes kept, the rest drained and dropped; and what a run has captured
//! so far, for a run cut off at its deadline ([`Captured`]).

use std::sync::Mutex;

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::lock::lock;

/// How much of `:output` is kept: the first 64 KiB.
pub const OUTPUT_LIMIT: usize = 64 * 1024;
/// The longest `:error`, in bytes: 8 KiB.
pub const ERROR_LIMIT: usize = 8 * 1024;

/// `error` cut to at most [`ERROR_LIMIT`] bytes, on a character boundary.
pub fn clip_error(mut error: String) -> String {
    if error.len() > ERROR_LIMIT {
        let mut end = ERROR_LIMIT;
        while !error.is_char_boundary(end) {
            end -= 1;
        }
        error.truncate(end);
    }
    error
}

/// The output a run has read so far (its first [`OUTPUT_LIMIT`] bytes), shared
/// with `engine::turn::execute`: a run dropped at its deadline cannot return what it
/// read, so the deadline takes it from here for `:output`. `None` until the kind
/// starts capturing: a kind with no output to speak of leaves `:output` NULL.
#[derive(Debug, Default)]
pub struct Captured(Mutex<Option<Vec<u8>>>);

impl Captured {
    /// Keeps what of `chunk` fits within [`OUTPUT_LIMIT`].
    pub fn keep(&self, chunk: &[u8]) {
        let mut kept = lock(&self.0);
        let kept = kept.get_or_insert_with(Vec::new);
        let room = OUTPUT_LIMIT.saturating_sub(kept.len());
        kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }

    /// What was kept, leaving nothing.
    pub fn take(&self) -> Option<Vec<u8>> {
        lock(&self.0).take()
    }
}

/// Reads `reader` to its end, keeping its first [`OUTPUT_LIMIT`] bytes in `captured`.
pub async fn read_into<R: AsyncRead + Unpin>(reader: R, captured: &Captured) {
    captured.keep(&[]);
    read_keeping(reader, |_, chunk| captured.keep(chunk)).await;
}

/// Reads `reader` to its end, keeping the last `limit` bytes.
pub async fn read_tail<R: AsyncRead + Unpin>(reader: R, limit: usize) -> Vec<u8> {
    read_keeping(reader, |kept, chunk| {
        kept.extend_from_slice(chunk);
        if kept.len() > limit {
            kept.drain(..kept.len() - limit);
        }
    })
    .await
}

/// Reads `reader` to its end (or its first error), letting `keep` choose what of
/// each chunk stays.
async fn read_keeping<R: AsyncRead + Unpin>(
    mut reader: R,
    mut keep: impl FnMut(&mut Vec<u8>, &[u8]),
) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => keep(&mut kept, &buffer[..n]),
        }
    }
}

/// The last `lines` non-empty lines of `text`, joined with " | ", for one-line errors.
pub fn last_lines(text: &[u8], lines: usize) -> String {
    let text = String::from_utf8_lossy(text);
    let mut last: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .rev()
        .take(lines)
        .collect();
    last.reverse();
    last.join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_clipped_on_a_character_boundary() {
        let clipped = clip_error("é".repeat(ERROR_LIMIT));
        assert!(clipped.len() <= ERROR_LIMIT && clipped.len() >= ERROR_LIMIT - 1);
        assert_eq!(clip_error("short".into()), "short");
    }

    #[tokio::test]
    async fn keeps_the_tail() {
        let tail = read_tail(&b"one\ntwo\nthree\n"[..], 9).await;
        assert_eq!(tail, b"wo\nthree\n");
        assert_eq!(last_lines(b"a\n\nb\nc\n", 2), "b | c");
    }

    #[tokio::test]
    async fn captures_the_head_for_whoever_asks_first() {
        let captured = Captured::default();
        assert_eq!(captured.take(), None, "nothing captured is NULL, not empty");
        read_into(&vec![b'x'; 100_000][..], &captured).await;
        assert_eq!(captured.take().map(|kept| kept.len()), Some(OUTPUT_LIMIT));
        read_into(&b""[..], &captured).await;
        assert_eq!(
            captured.take(),
            Some(Vec::new()),
            "an empty output is empty"
        );
    }
}
