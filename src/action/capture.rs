//! Reading a child's or a server's output without letting it cost unbounded memory:
//! the first bytes kept, the rest drained and dropped.

use tokio::io::{AsyncRead, AsyncReadExt};

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

/// Reads `reader` to its end, keeping the first `limit` bytes.
pub async fn read_head<R: AsyncRead + Unpin>(reader: R, limit: usize) -> Vec<u8> {
    read_keeping(reader, |kept, chunk| {
        let room = limit.saturating_sub(kept.len());
        kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
    })
    .await
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
    async fn keeps_the_head_or_the_tail() {
        let data = vec![b'x'; 100_000];
        assert_eq!(read_head(&data[..], 10).await.len(), 10);
        let tail = read_tail(&b"one\ntwo\nthree\n"[..], 9).await;
        assert_eq!(tail, b"wo\nthree\n");
        assert_eq!(last_lines(b"a\n\nb\nc\n", 2), "b | c");
    }
}
