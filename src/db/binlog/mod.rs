//! Following the server's binary log as a replica does, to learn *when* a table
//! changed — never what changed: [`open`] asks the server for its log from the
//! current end (or says why it cannot: the log is off, statement-based, or the user
//! lacks a grant), and [`reader`] turns the events into one [`Commit`] per
//! transaction, naming the tables it wrote.

pub mod open;
pub mod reader;

pub use open::{open, OpenFailure, Verdicts};
pub use reader::{BinlogReader, Commit, StreamLost};

/// A table a committed transaction wrote to, as the binary log names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChangedTable {
    pub schema: String,
    pub name: String,
}
