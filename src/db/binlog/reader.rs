//! Reading a binary log stream as commits: the table map events of a transaction
//! name the tables it writes (row images are never decoded), and its end — the XID
//! event, or a `COMMIT` query — is one [`Commit`], however many rows it changed. A
//! statement logged as text (DDL, or DML in mixed format) names no table the log can
//! tell cheaply: its commit says only the schema it ran in.

use std::collections::HashSet;
use std::time::Duration;

use futures::StreamExt;
use mysql_async::binlog::events::{
    Event, FormatDescriptionEvent, QueryEvent, TableMapEvent, TransactionPayloadEvent,
};
use mysql_async::binlog::{BinlogVersion, EventType};
use mysql_async::BinlogStream;

use super::ChangedTable;
use crate::db::DbError;

/// More distinct tables (or schemas) than this in one transaction: it counts as
/// "anything changed", and memory stays bounded.
const MOST_TABLES: usize = 64;

/// A committed transaction that changed something.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Commit {
    /// The tables it wrote rows to (row events).
    pub tables: Vec<ChangedTable>,
    /// The schemas its statements logged as text ran in (DDL, or DML in mixed
    /// format): any table there may have changed.
    pub schemas: Vec<String>,
    /// It changed more than can be listed, or ran a statement in no schema:
    /// anything may have changed.
    pub anything: bool,
}

impl std::fmt::Display for Commit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.anything {
            return f.write_str("too much to list");
        }
        let tables = self
            .tables
            .iter()
            .map(|t| format!("rows of {}.{}", t.schema, t.name));
        let schemas = self.schemas.iter().map(|s| format!("statements in {s}"));
        let all: Vec<String> = tables.chain(schemas).collect();
        f.write_str(&all.join(", "))
    }
}

/// Why a stream ended.
#[derive(Debug, thiserror::Error)]
pub enum StreamLost {
    #[error("the binary log stream failed: {0}")]
    Failed(#[from] DbError),
    #[error("the server closed the binary log stream")]
    Closed,
    #[error("the binary log stream was silent for {}, heartbeats included", humantime::format_duration(*.0))]
    Silent(Duration),
}

/// A binary log stream, read commit by commit.
pub struct BinlogReader {
    stream: BinlogStream,
    /// The longest silence before the stream counts as lost: heartbeats come sooner.
    silence: Duration,
    tables: HashSet<ChangedTable>,
    schemas: HashSet<String>,
    anything: bool,
    /// Between a `BEGIN` and its commit.
    in_transaction: bool,
}

impl BinlogReader {
    pub(super) fn new(stream: BinlogStream, heartbeat: Duration) -> BinlogReader {
        BinlogReader {
            stream,
            silence: heartbeat * 3,
            tables: HashSet::new(),
            schemas: HashSet::new(),
            anything: false,
            in_transaction: false,
        }
    }

    /// Waits for the stream's first event (the server sends its format description at
    /// once): an error the server answers a dump request with comes here.
    pub(super) async fn started(&mut self) -> Result<(), StreamLost> {
        match tokio::time::timeout(self.silence, self.stream.next()).await {
            Err(_) => Err(StreamLost::Silent(self.silence)),
            Ok(None) => Err(StreamLost::Closed),
            Ok(Some(Err(e))) => Err(DbError::from(e).into()),
            Ok(Some(Ok(_))) => Ok(()),
        }
    }

    /// Ends the stream and its connection.
    pub async fn close(self) {
        let _ = self.stream.close().await;
    }

    /// Waits for the next transaction that changed something.
    pub async fn next_commit(&mut self) -> Result<Commit, StreamLost> {
        loop {
            let event = match tokio::time::timeout(self.silence, self.stream.next()).await {
                Err(_) => return Err(StreamLost::Silent(self.silence)),
                Ok(None) => return Err(StreamLost::Closed),
                Ok(Some(Err(e))) => return Err(DbError::from(e).into()),
                Ok(Some(Ok(event))) => event,
            };
            if let Some(commit) = self.read(&event) {
                return Ok(commit);
            }
        }
    }

    /// Notes what `event` says; a commit when it ends a transaction that changed
    /// something.
    fn read(&mut self, event: &Event) -> Option<Commit> {
        let kind = event.header().event_type_raw();
        if kind == EventType::TABLE_MAP_EVENT as u8 {
            if let Ok(map) = event.read_event::<TableMapEvent<'_>>() {
                self.wrote(ChangedTable {
                    schema: map.database_name().into_owned(),
                    name: map.table_name().into_owned(),
                });
            }
            None
        } else if kind == EventType::XID_EVENT as u8 {
            self.commit()
        } else if kind == EventType::QUERY_EVENT as u8 {
            let query = event.read_event::<QueryEvent<'_>>().ok()?;
            self.query(&query.query(), &query.schema())
        } else if kind == EventType::TRANSACTION_PAYLOAD_EVENT as u8 {
            self.compressed(event)
        } else {
            None
        }
    }

    /// A transaction MySQL compressed (`binlog_transaction_compression`): its events
    /// read from the payload as from the stream (unchecksummed there). A payload
    /// that cannot be read counts as "anything changed".
    fn compressed(&mut self, event: &Event) -> Option<Commit> {
        let payload = event.read_event::<TransactionPayloadEvent<'_>>();
        let Some(mut input) = payload.as_ref().ok().and_then(|p| p.decompressed().ok()) else {
            self.anything = true;
            return self.commit();
        };
        let fde = FormatDescriptionEvent::new(BinlogVersion::Version4);
        let mut commit = None;
        while input.has_data_left().unwrap_or(false) {
            let Ok(inner) = Event::read(&fde, &mut input) else {
                self.anything = true;
                break;
            };
            commit = self.read(&inner).or(commit);
        }
        commit.or_else(|| self.commit())
    }

    /// A statement logged as text, run in `schema`: a transaction's bounds, or a
    /// change of its own.
    fn query(&mut self, text: &str, schema: &str) -> Option<Commit> {
        let text = text.trim();
        if is_bookkeeping(text) {
            None
        } else if text.eq_ignore_ascii_case("BEGIN") {
            self.rolled_back();
            self.in_transaction = true;
            None
        } else if text.eq_ignore_ascii_case("COMMIT") {
            self.commit()
        } else if text.eq_ignore_ascii_case("ROLLBACK") {
            self.rolled_back();
            None
        } else {
            self.ran_in(schema);
            // DML in mixed format waits for its transaction's commit; DDL commits by
            // itself.
            match self.in_transaction {
                true => None,
                false => self.commit(),
            }
        }
    }

    fn rolled_back(&mut self) {
        self.tables.clear();
        self.schemas.clear();
        self.anything = false;
        self.in_transaction = false;
    }

    fn wrote(&mut self, table: ChangedTable) {
        if self.tables.len() < MOST_TABLES {
            self.tables.insert(table);
        } else if !self.tables.contains(&table) {
            self.anything = true;
        }
    }

    fn ran_in(&mut self, schema: &str) {
        if schema.is_empty() || self.schemas.len() >= MOST_TABLES {
            self.anything = true;
        } else {
            self.schemas.insert(schema.to_string());
        }
    }

    fn commit(&mut self) -> Option<Commit> {
        self.in_transaction = false;
        let commit = Commit {
            tables: self.tables.drain().collect(),
            schemas: self.schemas.drain().collect(),
            anything: std::mem::take(&mut self.anything),
        };
        let changed = commit.anything || !commit.tables.is_empty() || !commit.schemas.is_empty();
        changed.then_some(commit)
    }
}

/// Statements in the log that change no table: MariaDB's stand-ins for events an
/// old-style replica cannot read (`# Dummy event replacing event type …`), and
/// savepoints.
fn is_bookkeeping(text: &str) -> bool {
    let upper = text.get(..18).unwrap_or(text).to_ascii_uppercase();
    text.starts_with('#')
        || upper.starts_with("SAVEPOINT")
        || upper.starts_with("ROLLBACK TO")
        || upper.starts_with("RELEASE SAVEPOINT")
}

#[cfg(test)]
mod tests {
    use super::is_bookkeeping;

    #[test]
    fn stand_ins_and_savepoints_change_no_table() {
        assert!(is_bookkeeping(
            "# Dummy event replacing event type 160 that slave cannot handle."
        ));
        assert!(is_bookkeeping("SAVEPOINT `tableq_item`"));
        assert!(is_bookkeeping("ROLLBACK TO `tableq_item`"));
        assert!(!is_bookkeeping("INSERT INTO job () VALUES ()"));
        assert!(!is_bookkeeping("CREATE TABLE t (id INT)"));
    }
}
