//! The server the tests, and the benchmark, run against: the one an environment
//! variable names, or a private MariaDB of their own; and URLs with and without a
//! database. The benchmark includes this file (benches/throughput.rs) rather than
//! keeping a copy.

use super::mariadb::MariaDb;

/// A MariaDB or MySQL server to use.
pub enum Server {
    /// The server of a URL given from outside: its URL without a database.
    External(String),
    /// A private MariaDB, stopped when this is dropped.
    Private(MariaDb),
}

impl Server {
    /// The server of the URL in the environment variable `var` when it is set and not
    /// empty; otherwise a private one from `start`.
    pub fn from_env(var: &str, start: impl FnOnce() -> MariaDb) -> Server {
        match std::env::var(var) {
            Ok(url) if !url.is_empty() => Server::External(without_database(&url)),
            _ => Server::Private(start()),
        }
    }

    /// Its URL without a database.
    pub fn base_url(&self) -> String {
        match self {
            Server::External(base) => base.clone(),
            Server::Private(server) => server.base_url(),
        }
    }
}

/// `mysql://u:p@h:1/db?x=1` → `mysql://u:p@h:1?x=1`.
pub fn without_database(url: &str) -> String {
    let (url, query) = url.split_once('?').unwrap_or((url, ""));
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let host_end = url[scheme_end..]
        .find('/')
        .map_or(url.len(), |i| scheme_end + i);
    let base = &url[..host_end];
    if query.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{query}")
    }
}

/// `mysql://u:p@h:1?x=1` and `db` → `mysql://u:p@h:1/db?x=1`.
pub fn with_database(base: &str, name: &str) -> String {
    match base.split_once('?') {
        Some((url, query)) => format!("{url}/{name}?{query}"),
        None => format!("{base}/{name}"),
    }
}
