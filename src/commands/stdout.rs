//! What the commands print on standard output. A reader that goes away
//! (`tableq failed … | head -1`) is no failure: the rest of the text is dropped
//! and the command ends as it would have, with its own exit status — where
//! `println!` would panic ("failed printing to stdout: Broken pipe", exit 101).
//! Any other error writing (a full disk) fails the command.

use std::fmt::Display;
use std::io::{self, Write};

use super::failure::Failure;

/// Writes `text` as it is.
pub fn print(text: &str) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(unwritable(e)),
        _ => Ok(()),
    }
}

/// Writes `text` and a newline.
pub fn line(text: impl Display) -> Result<(), Failure> {
    print(&format!("{text}\n"))
}

/// Has `write` write to standard output (a man page: through a writer).
pub fn write_with(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), Failure> {
    let mut text = Vec::new();
    write(&mut text).map_err(unwritable)?;
    print(&String::from_utf8_lossy(&text))
}

fn unwritable(e: io::Error) -> Failure {
    Failure::Runtime(format!("cannot write to standard output: {e}"))
}
