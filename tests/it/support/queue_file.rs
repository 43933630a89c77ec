//! Queue files from a builder rather than escaped one-line strings:
//!
//! ```ignore
//! let path = QueueFile::new("jobs")
//!     .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
//!     .workers(4)
//!     .batch(10)
//!     .action_sql("DO :id")
//!     .on_success("UPDATE job SET state = 'done' WHERE id = :id")
//!     .write(&files);
//! ```
//!
//! writes `jobs.toml`, the queue `jobs`: its top-level keys in the order they were
//! set, then `[action]`, `[on_success]` and `[on_failure]`, every value written by the
//! `toml` crate. Where the file's exact text is the point (line numbers in a message,
//! malformed TOML), a test writes it literally instead.

use std::fmt;
use std::path::PathBuf;

use toml::Value;

use super::QueueFiles;

/// A queue file being built.
#[derive(Clone, Debug)]
pub struct QueueFile {
    name: String,
    top: Vec<(String, Value)>,
    action: Vec<(String, Value)>,
    lease: Vec<(String, Value)>,
    on_success: Option<Sql>,
    on_failure: Option<Sql>,
}

/// The statements of an `sql` key: one (`sql = "…"`) or several in order
/// (`sql = ["…", "…"]`).
#[derive(Clone, Debug)]
pub struct Sql(Value);

impl From<&str> for Sql {
    fn from(statement: &str) -> Sql {
        Sql(Value::from(statement))
    }
}

impl From<String> for Sql {
    fn from(statement: String) -> Sql {
        Sql(Value::from(statement))
    }
}

impl<const N: usize> From<[&str; N]> for Sql {
    fn from(statements: [&str; N]) -> Sql {
        Sql(Value::from(statements.to_vec()))
    }
}

impl fmt::Display for Sql {
    /// As TOML writes it: `"…"` or `["…", "…"]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl QueueFile {
    /// A queue named `name`, written to `name.toml`.
    pub fn new(name: &str) -> QueueFile {
        QueueFile {
            name: name.to_string(),
            top: Vec::new(),
            action: Vec::new(),
            lease: Vec::new(),
            on_success: None,
            on_failure: None,
        }
    }

    /// Sets a top-level key (a key set again keeps its place).
    pub fn set(mut self, key: &str, value: impl Into<Value>) -> QueueFile {
        put(&mut self.top, key, value.into());
        self
    }

    pub fn select(self, sql: &str) -> QueueFile {
        self.set("select", sql)
    }

    pub fn workers(self, workers: u32) -> QueueFile {
        self.set("workers", i64::from(workers))
    }

    pub fn batch(self, batch: u32) -> QueueFile {
        self.set("batch", i64::from(batch))
    }

    pub fn poll_interval(self, duration: &str) -> QueueFile {
        self.set("poll_interval", duration)
    }

    pub fn error_backoff(self, duration: &str) -> QueueFile {
        self.set("error_backoff", duration)
    }

    pub fn database_url(self, url: &str) -> QueueFile {
        self.set("database_url", url)
    }

    /// `type = "sql"` with these statements.
    pub fn action_sql(self, sql: impl Into<Sql>) -> QueueFile {
        self.action("sql", "sql", sql.into().0)
    }

    /// `type = "command"` with this argv.
    pub fn action_command(self, command: &[&str]) -> QueueFile {
        self.action("command", "command", command.to_vec())
    }

    /// `type = "http"` to this URL.
    pub fn action_http(self, url: &str) -> QueueFile {
        self.action("http", "url", url)
    }

    /// `type = "fastcgi"`: the script at `script`, run by the server at `address`.
    pub fn action_fastcgi(self, address: &str, script: &std::path::Path) -> QueueFile {
        self.action("fastcgi", "address", address)
            .action_set("script", script.to_str().expect("a UTF-8 path"))
    }

    /// Sets another key of `[action]` (`timeout`, `follow_redirects`, …).
    pub fn action_set(mut self, key: &str, value: impl Into<Value>) -> QueueFile {
        put(&mut self.action, key, value.into());
        self
    }

    /// Sets a key of `[lease]` (`sql`, `renew_sql`, `renew_every`, …).
    pub fn lease_set(mut self, key: &str, value: impl Into<Value>) -> QueueFile {
        put(&mut self.lease, key, value.into());
        self
    }

    pub fn on_success(mut self, sql: impl Into<Sql>) -> QueueFile {
        self.on_success = Some(sql.into());
        self
    }

    pub fn on_failure(mut self, sql: impl Into<Sql>) -> QueueFile {
        self.on_failure = Some(sql.into());
        self
    }

    /// Writes `name.toml` into `files`; returns its path.
    pub fn write(&self, files: &QueueFiles) -> PathBuf {
        files.write(&format!("{}.toml", self.name), &self.to_string())
    }

    fn action(self, kind: &str, key: &str, value: impl Into<Value>) -> QueueFile {
        self.action_set("type", kind).action_set(key, value)
    }
}

/// A TOML table of `pairs`, for a key whose value is one (`circuit`, `headers`).
pub fn table(pairs: &[(&str, Value)]) -> Value {
    Value::Table(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

/// Sets `key` in `table`, in its place if it is there already.
fn put(table: &mut Vec<(String, Value)>, key: &str, value: Value) {
    match table.iter_mut().find(|(k, _)| k == key) {
        Some((_, old)) => *old = value,
        None => table.push((key.to_string(), value)),
    }
}

impl fmt::Display for QueueFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = |f: &mut fmt::Formatter<'_>, table: &[(String, Value)]| {
            table
                .iter()
                .try_for_each(|(key, value)| writeln!(f, "{key} = {value}"))
        };
        keys(f, &self.top)?;
        if !self.action.is_empty() {
            writeln!(f, "\n[action]")?;
            keys(f, &self.action)?;
        }
        if !self.lease.is_empty() {
            writeln!(f, "\n[lease]")?;
            keys(f, &self.lease)?;
        }
        for (table, sql) in [
            ("on_success", &self.on_success),
            ("on_failure", &self.on_failure),
        ] {
            if let Some(Sql(sql)) = sql {
                writeln!(f, "\n[{table}]\nsql = {sql}")?;
            }
        }
        Ok(())
    }
}
