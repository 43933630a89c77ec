//! The FastCGI protocol as a client speaks it (https://fastcgi-archives.github.io/
//! FastCGI_Specification.html): a responder request — BEGIN_REQUEST with
//! FCGI_KEEP_CONN, its params, its body — and the answer read record by record,
//! keeping bounded heads of stdout and stderr; and the GET_VALUES management
//! record `check` asks with.
//!
//! Written here rather than taken from the `fastcgi-client` crate, whose whole-answer
//! call keeps stdout and stderr without bound and whose streaming call reads a
//! connection closed before FCGI_END_REQUEST as a finished answer (a child killed
//! after `Status: 200` would read as success).

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const VERSION: u8 = 1;
const BEGIN_REQUEST: u8 = 1;
const END_REQUEST: u8 = 3;
const PARAMS: u8 = 4;
const STDIN: u8 = 5;
const STDOUT: u8 = 6;
const STDERR: u8 = 7;
const GET_VALUES: u8 = 9;
const GET_VALUES_RESULT: u8 = 10;
const RESPONDER: u16 = 1;
const KEEP_CONN: u8 = 1;
/// The one request a connection carries at a time.
const REQUEST_ID: u16 = 1;
/// The most content one record carries.
const MAX_CONTENT: usize = 0xffff;

/// How much of the script's stdout is kept: its headers and the first 64 KiB of
/// its body (the rest is read and dropped).
pub const STDOUT_LIMIT: usize = crate::action::capture::OUTPUT_LIMIT + 16 * 1024;
/// How much of its stderr is kept.
pub const STDERR_LIMIT: usize = 8 * 1024;

/// What the server answered a request.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// The head of the script's stdout: CGI headers, a blank line, the body.
    pub stdout: Vec<u8>,
    /// The end of its stdout, when it overran the head (else empty): where PHP
    /// writes the error it died of.
    pub tail: Vec<u8>,
    /// The head of its stderr (PHP's `error_log` lines).
    pub stderr: Vec<u8>,
    /// FCGI_END_REQUEST's protocol status: 0 complete, 1 cannot multiplex, 2
    /// overloaded, 3 unknown role.
    pub protocol_status: u8,
}

/// Why an exchange failed, said by [`super::judge`].
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    /// Reading or writing failed; `answered` once any record of the answer came.
    #[error("{error}")]
    Io {
        error: std::io::Error,
        answered: bool,
    },
    /// The server sent what is not FastCGI.
    #[error("{0}")]
    Protocol(String),
}

/// The bytes of one request: BEGIN_REQUEST (keep the connection), the params, an
/// empty PARAMS, the body as STDIN and an empty STDIN.
pub fn request(params: &[(&str, &[u8])], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 512);
    let begin = [
        (RESPONDER >> 8) as u8,
        RESPONDER as u8,
        KEEP_CONN,
        0,
        0,
        0,
        0,
        0,
    ];
    push_record(&mut out, BEGIN_REQUEST, REQUEST_ID, &begin);
    let mut pairs = Vec::new();
    for (name, value) in params {
        push_pair(&mut pairs, name.as_bytes(), value);
    }
    push_stream(&mut out, PARAMS, REQUEST_ID, &pairs);
    push_stream(&mut out, STDIN, REQUEST_ID, body);
    out
}

/// Sends `request` on `stream` and reads the answer, up to FCGI_END_REQUEST, with
/// `heard` called with each chunk of stderr as it comes.
pub async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    request: &[u8],
    heard: &mut (dyn FnMut(&[u8]) + Send),
) -> Result<Answer, ExchangeError> {
    let unanswered = |error| ExchangeError::Io {
        error,
        answered: false,
    };
    stream.write_all(request).await.map_err(unanswered)?;
    stream.flush().await.map_err(unanswered)?;
    let mut answer = Answer::default();
    let mut answered = false;
    loop {
        let (kind, content) = read_record(stream).await.map_err(|error| ExchangeError::Io {
            error,
            answered,
        })?;
        answered = true;
        match kind {
            STDOUT => {
                let overran = keep(&mut answer.stdout, &content, STDOUT_LIMIT);
                keep_last(&mut answer.tail, overran, crate::action::php::TAIL);
            }
            STDERR => {
                heard(&content);
                keep(&mut answer.stderr, &content, STDERR_LIMIT);
            }
            END_REQUEST if content.len() >= 5 => {
                answer.protocol_status = content[4];
                return Ok(answer);
            }
            other => {
                return Err(ExchangeError::Protocol(format!(
                    "an unexpected record (type {other}, {} bytes)",
                    content.len()
                )))
            }
        }
    }
}

/// Asks the server's FCGI_MAX_CONNS, FCGI_MAX_REQS and FCGI_MPXS_CONNS; its
/// answer's name-value pairs.
pub async fn get_values<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
) -> Result<Vec<(String, String)>, ExchangeError> {
    let mut pairs = Vec::new();
    for name in ["FCGI_MAX_CONNS", "FCGI_MAX_REQS", "FCGI_MPXS_CONNS"] {
        push_pair(&mut pairs, name.as_bytes(), b"");
    }
    let mut out = Vec::new();
    push_record(&mut out, GET_VALUES, 0, &pairs);
    let io = |error| ExchangeError::Io {
        error,
        answered: false,
    };
    stream.write_all(&out).await.map_err(io)?;
    stream.flush().await.map_err(io)?;
    let (kind, content) = read_record(stream).await.map_err(io)?;
    if kind != GET_VALUES_RESULT {
        return Err(ExchangeError::Protocol(format!(
            "answered GET_VALUES with a record of type {kind}"
        )));
    }
    Ok(read_pairs(&content))
}

/// Appends what fits of `content` to `kept`, up to `limit` bytes.
fn keep<'c>(kept: &mut Vec<u8>, content: &'c [u8], limit: usize) -> &'c [u8] {
    let room = limit.saturating_sub(kept.len());
    let (taken, past) = content.split_at(content.len().min(room));
    kept.extend_from_slice(taken);
    past
}

/// Keeps the last `limit` bytes of what `content` continues.
fn keep_last(kept: &mut Vec<u8>, content: &[u8], limit: usize) {
    kept.extend_from_slice(content);
    let over = kept.len().saturating_sub(limit);
    kept.drain(..over);
}

/// Reads one record: its type and content (its padding dropped).
async fn read_record<S: AsyncRead + Unpin>(stream: &mut S) -> std::io::Result<(u8, Vec<u8>)> {
    let mut header = [0u8; 8];
    stream.read_exact(&mut header).await?;
    if header[0] != VERSION {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not a FastCGI record (version byte {})", header[0]),
        ));
    }
    let length = usize::from(u16::from_be_bytes([header[4], header[5]]));
    let padding = usize::from(header[6]);
    let mut content = vec![0u8; length + padding];
    stream.read_exact(&mut content).await?;
    content.truncate(length);
    Ok((header[1], content))
}

/// One record of `kind` carrying `content` (at most [`MAX_CONTENT`] bytes), padded
/// to a multiple of 8.
fn push_record(out: &mut Vec<u8>, kind: u8, id: u16, content: &[u8]) {
    let length = content.len().min(MAX_CONTENT);
    let padding = (8 - length % 8) % 8;
    out.extend_from_slice(&[VERSION, kind]);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&(length as u16).to_be_bytes());
    out.extend_from_slice(&[padding as u8, 0]);
    out.extend_from_slice(&content[..length]);
    out.extend(std::iter::repeat_n(0, padding));
}

/// A stream (PARAMS or STDIN): its bytes in records, then the empty record that
/// ends it.
fn push_stream(out: &mut Vec<u8>, kind: u8, id: u16, bytes: &[u8]) {
    for chunk in bytes.chunks(MAX_CONTENT) {
        push_record(out, kind, id, chunk);
    }
    push_record(out, kind, id, &[]);
}

/// A name-value pair: each length in 1 byte below 128, else in 4 (high bit set).
fn push_pair(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    for length in [name.len(), value.len()] {
        match u8::try_from(length) {
            Ok(short) if short < 0x80 => out.push(short),
            _ => out.extend_from_slice(&((length as u32) | 0x8000_0000).to_be_bytes()),
        }
    }
    out.extend_from_slice(name);
    out.extend_from_slice(value);
}

/// The name-value pairs of `content`, as far as they are whole.
fn read_pairs(mut content: &[u8]) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let length = |bytes: &mut &[u8]| -> Option<usize> {
        let first = *bytes.first()?;
        if first < 0x80 {
            *bytes = &bytes[1..];
            return Some(usize::from(first));
        }
        let four: [u8; 4] = bytes.get(..4)?.try_into().ok()?;
        *bytes = &bytes[4..];
        Some((u32::from_be_bytes(four) & 0x7fff_ffff) as usize)
    };
    while let (Some(name), Some(value)) = (length(&mut content), length(&mut content)) {
        let (Some(n), Some(v)) = (content.get(..name), content.get(name..name + value)) else {
            break;
        };
        pairs.push((
            String::from_utf8_lossy(n).into_owned(),
            String::from_utf8_lossy(v).into_owned(),
        ));
        content = &content[name + value..];
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_use_long_lengths_from_128_bytes() {
        let long = vec![b'x'; 200];
        let mut out = Vec::new();
        push_pair(&mut out, b"KEY", &long);
        push_pair(&mut out, b"A", b"b");
        assert_eq!(&out[..5], &[3, 0x80, 0, 0, 200]);
        let pairs = read_pairs(&out);
        assert_eq!(pairs[0], ("KEY".to_string(), "x".repeat(200)));
        assert_eq!(pairs[1], ("A".to_string(), "b".to_string()));
    }

    #[test]
    fn a_body_longer_than_a_record_is_split_and_padded() {
        let body = vec![7u8; MAX_CONTENT + 3];
        let bytes = request(&[("SCRIPT_FILENAME", b"/a.php")], &body);
        assert!(bytes.len().is_multiple_of(8));
        // BEGIN_REQUEST, PARAMS, empty PARAMS, two STDIN, empty STDIN.
        let mut kinds = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let length = usize::from(u16::from_be_bytes([bytes[at + 4], bytes[at + 5]]));
            kinds.push((bytes[at + 1], length));
            at += 8 + length + usize::from(bytes[at + 6]);
        }
        let expected = [(1, 8), (4, 23), (4, 0), (5, MAX_CONTENT), (5, 3), (5, 0)];
        assert_eq!(kinds, expected);
    }

    #[tokio::test]
    async fn reads_the_answer_to_its_end_and_says_when_it_was_cut_short() {
        let mut answer = Vec::new();
        push_record(&mut answer, STDERR, 1, b"PHP message: progress: 5%");
        push_record(&mut answer, STDOUT, 1, b"Status: 503\r\n\r\nbusy");
        push_record(&mut answer, END_REQUEST, 1, &[0, 0, 0, 0, 0, 0, 0, 0]);
        let (mut ours, mut theirs) = tokio::io::duplex(1 << 20);
        theirs.write_all(&answer).await.unwrap();
        let mut heard = Vec::new();
        let got = exchange(&mut ours, b"", &mut |chunk| heard.extend_from_slice(chunk))
            .await
            .unwrap();
        assert_eq!(got.stdout, b"Status: 503\r\n\r\nbusy");
        assert_eq!(heard, b"PHP message: progress: 5%");
        // The same answer without its END_REQUEST: the server went away.
        let (mut ours, mut theirs) = tokio::io::duplex(1 << 20);
        theirs.write_all(&answer[..answer.len() - 16]).await.unwrap();
        drop(theirs);
        let cut = exchange(&mut ours, b"", &mut |_| {}).await.unwrap_err();
        assert!(matches!(cut, ExchangeError::Io { answered: true, .. }), "{cut:?}");
    }
}
