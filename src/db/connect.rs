//! Reaching a database: a URL turned into connection options, the database a queue
//! uses, opening a connection, and KILL from a side connection. One quick timeout
//! bounds every short exchange.
//!
//! A URL may list several hosts (`mysql://u:p@h1:3306,h2:3306,h3:3306/db`, as
//! Connector/J and libpq take them): each connection goes to the first host, in the
//! order given, that accepts writes (not read-only; on Galera, ready and synced) —
//! so every copy of tableq converges on the same node, and moves on to the next
//! when it fails. A session's side connections (KILL) go to its own host.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::budget::{Budget, Place, Seat};
use super::deadline::within;
use super::error::{describe_error, DbError, Refusal, ER_NO_SUCH_THREAD};
use crate::config::QueueConfig;
use crate::diagnostic::{Finding, Severity};

/// How long a short exchange may take — connecting, a ping, a ROLLBACK, a KILL, a
/// statement's return after KILL QUERY — before the connection is given up.
pub const QUICK_TIMEOUT: Duration = Duration::from_secs(10);
/// TCP keepalive on every connection, so a vanished peer is noticed in minutes.
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);

/// Why a database URL cannot be used. Never carries the URL: it may hold a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a usable database URL ({0}); expected mysql://USER:PASSWORD@HOST:PORT/DATABASE")]
pub struct DatabaseUrlError(String);

/// The URL parameters of the driver that mean something to tableq (it sets TCP
/// keepalive and the statement cache itself, and has no use for the pool's).
pub const URL_PARAMETERS: &[&str] = &[
    "require_ssl",
    "verify_ca",
    "verify_identity",
    "built_in_roots",
    "socket",
    "prefer_socket",
    "compression",
    "tcp_nodelay",
    "max_allowed_packet",
    "secure_auth",
    "enable_cleartext_plugin",
];

/// The driver's word on a URL, in tableq's: an unknown parameter named with the
/// ones there are (and the TLS one, which is what `ssl-mode` and the like want).
fn url_error(error: &mysql_async::UrlError) -> String {
    match error {
        mysql_async::UrlError::UnknownParameter { param } => format!(
            "unknown parameter `{param}`: the parameters are {}; for TLS write \
             ?require_ssl=true (see \"TLS to the database\" in the book)",
            URL_PARAMETERS.join(", ")
        ),
        other => other.to_string(),
    }
}

/// Whether a `/` or `#` comes before the last `@`: a password written as it is
/// (`p/ss@word`), which would end the host early — parsed as a port ("invalid port
/// number") or as another host — rather than a path that holds an `@`.
fn unencoded_userinfo(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    // Not in the parameters: a socket path there may hold an `@`.
    let rest = rest.split('?').next().unwrap_or(rest);
    rest.rfind('@')
        .is_some_and(|at| rest[..at].contains(['/', '#', '@']))
}

/// Which part of `url` holds a `%` not followed by two hex digits, if one does.
/// Never the part's text: it may be a password.
fn bad_escape(url: &str) -> Option<&'static str> {
    let bytes = url.as_bytes();
    let at = (0..bytes.len()).find(|&i| {
        bytes[i] == b'%'
            && !(bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    })?;
    let start = url.find("://").map_or(0, |i| i + 3);
    let authority_end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    let userinfo_end = url[start..authority_end].rfind('@').map(|i| start + i);
    Some(match userinfo_end {
        Some(end) if at < end => match url[start..end].find(':') {
            Some(colon) if at > start + colon => "password",
            _ => "user name",
        },
        _ if at < authority_end => "host",
        _ => match url[authority_end..].find('?') {
            Some(query) if at > authority_end + query => "parameters",
            _ => "database name",
        },
    })
}

/// A database to connect to: the options parsed from its URL — one per host it
/// lists — and the process's connection budget its sessions take their places in
/// (none for `check` and `count`, which hold a connection or two for moments).
#[derive(Debug, Clone)]
pub struct Database {
    hosts: Arc<Hosts>,
    budget: Option<Arc<Budget>>,
}

/// The hosts of one URL, and which of them the last connection went to (shared by
/// the database's clones).
#[derive(Debug)]
struct Hosts {
    opts: Vec<Opts>,
    in_use: AtomicUsize,
    /// When a session last gave itself up to look for an earlier host again.
    looked_back: std::sync::Mutex<Option<tokio::time::Instant>>,
}

impl Hosts {
    fn new(opts: Vec<Opts>) -> Arc<Hosts> {
        Arc::new(Hosts {
            opts,
            in_use: AtomicUsize::new(0),
            looked_back: std::sync::Mutex::default(),
        })
    }
}

/// How often, while its connections go to a later host of the URL, a lease-mode
/// queue's background count looks for an earlier one that takes writes again.
pub const LOOK_BACK_EVERY: Duration = Duration::from_secs(5);

/// The same database: the same options (whatever the budget).
impl PartialEq for Database {
    fn eq(&self, other: &Database) -> bool {
        self.hosts.opts == other.hosts.opts
    }
}

impl Database {
    /// Parses `mysql://…` (or `mariadb://…`), with tableq's defaults: TCP keepalive
    /// on, no statement cache, and TCP even for localhost unless the URL asks for
    /// `prefer_socket`. Refused: a `%` that is not a percent-escape (the driver
    /// would take it as it is, and the login fail later), a parameter the driver
    /// does not know (named, with those it does), and a URL that names no database.
    pub fn from_url(url: &str) -> Result<Database, DatabaseUrlError> {
        let url = match url.strip_prefix("mariadb://") {
            Some(rest) => format!("mysql://{rest}"),
            None => url.to_string(),
        };
        if let Some(part) = bad_escape(&url) {
            return Err(DatabaseUrlError(format!(
                "a `%` in its {part} is not followed by two hex digits: write `%25` for a `%` \
                 itself, and percent-encode other special characters (`%40` for `@`, `%3A` for \
                 `:`, `%2F` for `/`)"
            )));
        }
        if unencoded_userinfo(&url) {
            return Err(DatabaseUrlError(
                "its user name or password holds a character that must be percent-encoded \
                 there: `/` as `%2F`, `@` as `%40`, `:` as `%3A`, `#` as `%23`, `?` as `%3F`, \
                 `%` as `%25` (mysql://USER:PASSWORD@HOST/DATABASE)"
                    .to_string(),
            ));
        }
        let opts = one_url_per_host(&url)?
            .iter()
            .map(|url| host_opts(url))
            .collect::<Result<Vec<Opts>, DatabaseUrlError>>()?;
        Ok(Database {
            hosts: Hosts::new(opts),
            budget: None,
        })
    }

    /// The database `queue` uses: its own `database_url`, else `default_url` (from
    /// `--database-url`); a finding when there is none or it cannot be used. `run`,
    /// `check` and `count` all choose here.
    /// A lease-mode queue's database counts matched rows (see
    /// [`Database::counting_matched_rows`]).
    pub fn for_queue(queue: &QueueConfig, default_url: Option<&str>) -> Result<Database, Finding> {
        let database = Database::for_queue_url(queue, default_url)?;
        Ok(match queue.is_lease() {
            true => database.counting_matched_rows(),
            false => database,
        })
    }

    fn for_queue_url(queue: &QueueConfig, default_url: Option<&str>) -> Result<Database, Finding> {
        match (&queue.database_url, default_url) {
            (Some(url), _) => Database::from_url(url).map_err(|e| {
                queue.finding(
                    Severity::Error,
                    &["database_url"],
                    format!("`database_url`: {e}"),
                )
            }),
            (None, Some(url)) => Database::from_url(url)
                .map_err(|e| queue.finding(Severity::Error, &[], format!("--database-url: {e}"))),
            (None, None) => Err(queue.finding(
                Severity::Error,
                &[],
                "no database: set `database_url` in the queue file, pass --database-url (or \
                 --database-url-file), or set TABLEQ_DATABASE_URL (or TABLEQ_DATABASE_URL_FILE, \
                 a file holding the URL)",
            )),
        }
    }

    /// The same database, with UPDATE's row count telling the rows matched rather
    /// than changed (`CLIENT_FOUND_ROWS`): a lease renewed twice within a second
    /// changes nothing the second time, yet still holds.
    fn counting_matched_rows(&self) -> Database {
        let opts = self.hosts.opts.iter().map(|opts| {
            let opts = OptsBuilder::from_opts(opts.clone()).client_found_rows(true);
            Opts::from(opts)
        });
        Database {
            hosts: Hosts::new(opts.collect()),
            budget: self.budget.clone(),
        }
    }

    /// The database on `conn`'s own host alone: where a side connection to its
    /// session (KILL) must go.
    pub fn host_of(&self, conn: &Conn) -> Database {
        Database {
            hosts: Hosts::new(vec![conn.opts().clone()]),
            // A session gives its connection up through it (see `give_up`).
            budget: self.budget.clone(),
        }
    }

    /// The host the last connection went to, when the URL lists several
    /// (`db2.example:3306`); none for a URL of one host.
    pub fn host_in_use(&self) -> Option<String> {
        let hosts = &self.hosts.opts;
        let in_use = self.hosts.in_use.load(Ordering::Relaxed);
        (hosts.len() > 1).then(|| server_of(&hosts[in_use.min(hosts.len() - 1)]))
    }

    /// True — once every [`LOOK_BACK_EVERY`] — while the connections go to a later
    /// host of the URL than the first: time for a connection of its own (a lease-mode
    /// queue's background count, whose reads otherwise use the pool) to look for the
    /// first host that takes writes again. Transaction mode's count opens one every
    /// time.
    pub fn look_back_due(&self) -> bool {
        if self.hosts.in_use.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let mut looked = crate::lock::lock(&self.hosts.looked_back);
        let now = tokio::time::Instant::now();
        match *looked {
            Some(at) if now.duration_since(at) < LOOK_BACK_EVERY => false,
            _ => {
                *looked = Some(now);
                true
            }
        }
    }

    /// The first host's options: what names the database (a budget's spare
    /// connections are kept by it, whichever of its hosts they went to).
    fn opts(&self) -> &Opts {
        &self.hosts.opts[0]
    }

    /// Opens a connection, giving up after [`QUICK_TIMEOUT`]. A failure that is not
    /// the server's own answer names the address it could not reach.
    pub async fn connect(&self) -> Result<Conn, DbError> {
        self.connect_within(QUICK_TIMEOUT).await
    }

    /// Opens a connection, giving up after `limit`. A failure that is not the
    /// server's own answer names the address it could not reach. With several
    /// hosts, the first in order that accepts writes (each given at most
    /// [`HOST_TIMEOUT`]); if none does, the first that answered (its refusals are
    /// then the queue's: read-only, not synced); else the last host's error.
    pub async fn connect_within(&self, limit: Duration) -> Result<Conn, DbError> {
        let hosts = &self.hosts.opts;
        if hosts.len() == 1 {
            return connect_to(&hosts[0], limit).await;
        }
        let limit = limit.min(HOST_TIMEOUT);
        let mut answered: Option<(usize, Conn)> = None;
        let mut failed = None;
        for (index, opts) in hosts.iter().enumerate() {
            let mut conn = match connect_to(opts, limit).await {
                Ok(conn) => conn,
                Err(e) => {
                    failed = Some(e);
                    continue;
                }
            };
            match within(CONNECTING, limit, refuses_writes(&mut conn)).await {
                Ok(None) => return Ok(self.using(index, answered, conn).await),
                Ok(Some(_)) if answered.is_none() => answered = Some((index, conn)),
                Ok(Some(_)) => {
                    let _ = tokio::time::timeout(QUICK_TIMEOUT, conn.disconnect()).await;
                }
                Err(e) => failed = Some(e),
            }
        }
        match answered {
            Some((index, conn)) => {
                self.hosts.in_use.store(index, Ordering::Relaxed);
                Ok(conn)
            }
            None => Err(failed.unwrap_or(DbError::Deadline {
                waiting_for: CONNECTING,
                limit,
            })),
        }
    }

    /// `conn`, to host `index`, is the one to use: noted, and the connection to an
    /// earlier host that refused writes closed.
    async fn using(&self, index: usize, refused: Option<(usize, Conn)>, conn: Conn) -> Conn {
        if let Some((_, other)) = refused {
            let _ = tokio::time::timeout(QUICK_TIMEOUT, other.disconnect()).await;
        }
        self.hosts.in_use.store(index, Ordering::Relaxed);
        conn
    }

    /// The URL's user.
    pub fn user(&self) -> &str {
        self.hosts.opts[0].user().unwrap_or("")
    }

    /// The URL's database (empty when it names none).
    pub fn name(&self) -> &str {
        self.hosts.opts[0].db_name().unwrap_or("")
    }

    /// Why the server refused to let this URL's user in, in words that name the user,
    /// the server and the database, never the password.
    pub fn refused_login(&self, error: &DbError) -> String {
        format!(
            "the server at {} refused user `{}` for database `{}` ({error}): check the user \
             and password in the database URL, and the user's grants",
            self.server(),
            self.user(),
            self.name()
        )
    }

    /// Stops `what` in session `connection_id` from a fresh side connection: the only
    /// way to interrupt a statement that is still running.
    pub async fn kill(&self, connection_id: u32, what: Kill) -> Result<(), DbError> {
        self.kill_within(connection_id, what, QUICK_TIMEOUT).await
    }

    /// As [`Database::kill`], waiting at most `limit` for each of connecting and KILL.
    pub async fn kill_within(
        &self,
        connection_id: u32,
        what: Kill,
        limit: Duration,
    ) -> Result<(), DbError> {
        let verb = match what {
            Kill::Query => "QUERY",
            Kill::Connection => "CONNECTION",
        };
        let kill = async {
            let mut conn = self.connect_within(limit).await?;
            let result = conn
                .query_drop(format!("KILL {verb} {connection_id}"))
                .await;
            let _ = conn.disconnect().await;
            match result {
                // It ended by itself meanwhile.
                Err(mysql_async::Error::Server(e)) if e.code == ER_NO_SUCH_THREAD => {
                    Ok::<_, DbError>(())
                }
                other => Ok(other?),
            }
        };
        within("a KILL", limit * 2, kill).await
    }
}

impl Database {
    /// Its sessions take their places in `budget` from now on.
    pub fn within(mut self, budget: Arc<Budget>) -> Database {
        self.budget = Some(budget);
        self
    }

    /// A seat in the budget for one more connection — a place, or a connection to
    /// this database another gave up — waiting for one if needed; `None` without a
    /// budget.
    pub async fn seat(&self) -> Option<Seat> {
        match &self.budget {
            Some(budget) => Some(budget.seat(self.opts()).await),
            None => None,
        }
    }

    /// A connection in its seat, ready for use: a handed one reset to a new
    /// session's state (if that fails, a new connection in its place), else a new
    /// one; each within `limit`.
    pub async fn connect_seated(
        &self,
        seat: Option<Seat>,
        limit: Duration,
    ) -> Result<(Conn, Option<Place>), DbError> {
        let place = match seat {
            // A URL of several hosts connects afresh: a new connection goes to the
            // first host that takes writes, so the sessions move back to an earlier
            // host once it does again.
            Some(Seat::Handed(conn, place)) if self.hosts.opts.len() > 1 => {
                let _ = tokio::time::timeout(QUICK_TIMEOUT, conn.disconnect()).await;
                Some(place)
            }
            Some(Seat::Handed(mut conn, place)) => {
                let reset = within(CONNECTING, limit.min(QUICK_TIMEOUT), conn.reset()).await;
                if let Ok(true) = reset {
                    return Ok((conn, Some(place)));
                }
                Some(place)
            }
            Some(Seat::Fresh(place)) => Some(place),
            None => None,
        };
        Ok((self.connect_within(limit).await?, place))
    }

    /// Gives `conn` up: kept a moment for the next one that needs a connection to
    /// this database (see [`Budget::give_up`]); closed politely (COM_QUIT) at once
    /// without a budget.
    pub async fn give_up(&self, conn: Conn, place: Option<Place>) {
        match (&self.budget, place) {
            (Some(budget), Some(place)) => budget.give_up(self.opts(), conn, place).await,
            _ => {
                let _ = tokio::time::timeout(QUICK_TIMEOUT, conn.disconnect()).await;
            }
        }
    }

    /// Whether connections wait for a place in the budget.
    pub fn contended(&self) -> bool {
        self.budget.as_ref().is_some_and(|b| b.contended())
    }

    /// Whether the server answers a fresh connection and a ping within
    /// [`QUICK_TIMEOUT`]: a side look at a session whose statement runs long.
    pub async fn reachable(&self) -> bool {
        let look = async {
            let mut conn = self.connect_within(QUICK_TIMEOUT).await.ok()?;
            let answered = conn.ping().await.is_ok();
            let _ = conn.disconnect().await;
            Some(answered)
        };
        matches!(
            tokio::time::timeout(QUICK_TIMEOUT, look).await,
            Ok(Some(true))
        )
    }

    /// `host:port`: the server, whichever database and user (with several hosts,
    /// each, separated by commas).
    pub fn server(&self) -> String {
        let hosts: Vec<String> = self.hosts.opts.iter().map(server_of).collect();
        hosts.join(",")
    }
}

/// How long one host of several may take to connect and say whether it accepts
/// writes, before the next is tried.
pub const HOST_TIMEOUT: Duration = Duration::from_secs(5);

/// `host:port` of one host's options.
fn server_of(opts: &Opts) -> String {
    format!("{}:{}", opts.ip_or_hostname(), opts.tcp_port())
}

/// What connecting waits for, as its deadline says.
const CONNECTING: &str = "a connection";

/// Opens a connection to one host, giving up after `limit`. A failure that is not
/// the server's own answer names the address it could not reach.
async fn connect_to(opts: &Opts, limit: Duration) -> Result<Conn, DbError> {
    let opening = async {
        Conn::new(opts.clone()).await.map_err(|e| match e {
            e @ mysql_async::Error::Server(_) => e,
            e => mysql_async::Error::Other(
                format!(
                    "cannot connect to {}: {}",
                    server_of(opts),
                    describe_error(&e)
                )
                .into(),
            ),
        })
    };
    within(CONNECTING, limit, opening).await
}

/// Why the server on `conn` takes no writes now, if it does not: read-only
/// (`read_only`, which `super_read_only` sets too), or a Galera node not ready or
/// not synced.
async fn refuses_writes(conn: &mut Conn) -> Result<Option<Refusal>, mysql_async::Error> {
    let read_only: Option<u64> = conn.query_first("SELECT @@global.read_only").await?;
    if read_only.unwrap_or(0) != 0 {
        return Ok(Some(Refusal::ReadOnly));
    }
    // A server built with Galera but not running it has `wsrep_ready = OFF` too.
    let wsrep_on: Option<(String, String)> = conn
        .query_first("SHOW GLOBAL VARIABLES LIKE 'wsrep_on'")
        .await?;
    if !wsrep_on.is_some_and(|(_, on)| on.eq_ignore_ascii_case("ON")) {
        return Ok(None);
    }
    let wsrep: Vec<(String, String)> = conn
        .query(
            "SHOW GLOBAL STATUS WHERE Variable_name IN \
             ('wsrep_ready', 'wsrep_local_state_comment')",
        )
        .await?;
    let synced = wsrep
        .iter()
        .all(|(name, value)| match name.to_ascii_lowercase().as_str() {
            "wsrep_ready" => value.eq_ignore_ascii_case("ON"),
            _ => value.eq_ignore_ascii_case("Synced"),
        });
    Ok((!synced).then_some(Refusal::NotSynced))
}

/// `url` once per host it lists: `mysql://u:p@h1,h2/db` as `mysql://u:p@h1/db` and
/// `mysql://u:p@h2/db`; a URL of one host as it is.
fn one_url_per_host(url: &str) -> Result<Vec<String>, DatabaseUrlError> {
    let start = url.find("://").map_or(0, |i| i + 3);
    let authority_end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    let hosts_start = url[start..authority_end]
        .rfind('@')
        .map_or(start, |at| start + at + 1);
    let hosts = &url[hosts_start..authority_end];
    if !hosts.contains(',') {
        return Ok(vec![url.to_string()]);
    }
    let (before, after) = (&url[..hosts_start], &url[authority_end..]);
    hosts
        .split(',')
        .map(|host| match host.trim() {
            "" => Err(DatabaseUrlError(
                "its list of hosts has an empty entry: write them as host1:3306,host2:3306"
                    .to_string(),
            )),
            host => Ok(format!("{before}{host}{after}")),
        })
        .collect()
}

/// The options of one host's URL, with tableq's defaults.
fn host_opts(url: &str) -> Result<Opts, DatabaseUrlError> {
    let opts = Opts::from_url(url).map_err(|e| DatabaseUrlError(url_error(&e)))?;
    if opts.db_name().is_none() {
        return Err(DatabaseUrlError(
            "it names no database: add one to its path, mysql://USER:PASSWORD@HOST:3306/DATABASE"
                .to_string(),
        ));
    }
    // No statement cache: a worker holds its prepared statements for the life of
    // the connection, and the cache would close the least recently used ones.
    let mut builder = OptsBuilder::from_opts(opts)
        .tcp_keepalive(Some(TCP_KEEPALIVE))
        .stmt_cache_size(0);
    if !url.contains("prefer_socket=") {
        builder = builder.prefer_socket(false);
    }
    Ok(builder.into())
}

/// `user@host:port/database`: a database named for logs, without its password.
impl std::fmt::Display for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}/{}", self.user(), self.server(), self.name())
    }
}

/// What to stop in another session.
#[derive(Debug, Clone, Copy)]
pub enum Kill {
    /// The running statement; the transaction stays open.
    Query,
    /// The whole session; the server rolls its transaction back.
    Connection,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mysql_and_mariadb_urls_and_never_shows_the_password() {
        let database = Database::from_url("mariadb://app:s3cret@db.example:3307/shop").unwrap();
        assert_eq!(database.to_string(), "app@db.example:3307/shop");
        assert!(!database.opts().prefer_socket());
        assert_eq!(database.opts().tcp_keepalive(), Some(TCP_KEEPALIVE));
        assert_eq!(database.opts().stmt_cache_size(), 0);
        let err = Database::from_url("postgres://app:s3cret@db/x").unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
        assert!(err.to_string().contains("expected mysql://"), "{err}");
    }

    #[test]
    fn a_bad_percent_escape_is_refused_naming_the_part_not_its_text() {
        for (url, part, text) in [
            ("mysql://app:s3%zzcret@db/shop", "password", "s3%zzcret"),
            ("mysql://a%g1:s3cret@db/shop", "user name", "a%g1"),
            ("mysql://app@db/sh%op", "database name", "sh%op"),
            ("mysql://app@db/shop?socket=%", "parameters", "socket"),
        ] {
            let err = Database::from_url(url).unwrap_err().to_string();
            assert!(
                err.contains(&format!("a `%` in its {part} ")),
                "{url}: {err}"
            );
            assert!(!err.contains(text) && !err.contains("s3"), "{err}");
        }
        assert!(Database::from_url("mysql://app:p%40ss@db/shop").is_ok());
    }

    #[test]
    fn a_password_with_a_slash_or_at_not_encoded_is_told_to_percent_encode() {
        for url in [
            "mysql://app:s3c/rt@db/shop",
            "mysql://app:s3c@rt/w@db:3306/shop",
            "mysql://app:s3c#rt@db/shop",
            "mysql://app:s3c@rt@db/shop",
        ] {
            let err = Database::from_url(url).unwrap_err().to_string();
            assert!(err.contains("must be percent-encoded"), "{url}: {err}");
            assert!(err.contains("`%2F`") && err.contains("`%40`"), "{err}");
            assert!(!err.contains("s3c"), "the password is not shown: {err}");
        }
        assert!(Database::from_url("mysql://app:p%2Fss%40@db/shop").is_ok());
        assert!(Database::from_url("mysql://app@db/shop?socket=/run/my@sql.sock").is_ok());
    }

    #[test]
    fn an_unknown_parameter_is_named_with_the_ones_there_are() {
        let err = Database::from_url("mysql://app@db/shop?ssl-mode=REQUIRED")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown parameter `ssl-mode`"), "{err}");
        assert!(err.contains("require_ssl=true"), "{err}");
        let tls = Database::from_url("mysql://app@db/shop?require_ssl=true&verify_identity=false");
        assert!(tls.is_ok());
    }

    #[test]
    fn a_url_may_list_several_hosts() {
        let database =
            Database::from_url("mysql://app:s3cret@db1:3306,db2:3307, db3/shop?require_ssl=true")
                .unwrap();
        assert_eq!(database.to_string(), "app@db1:3306,db2:3307,db3:3306/shop");
        assert_eq!(database.host_in_use().as_deref(), Some("db1:3306"));
        assert!(database.hosts.opts.iter().all(|o| o.ssl_opts().is_some()));
        let one = Database::from_url("mysql://app@db1/shop").unwrap();
        assert_eq!(one.host_in_use(), None);
        let err = Database::from_url("mysql://app@db1,,db2/shop").unwrap_err();
        assert!(err.to_string().contains("an empty entry"), "{err}");
        let err = Database::from_url("mysql://app@db1,db2").unwrap_err();
        assert!(err.to_string().contains("names no database"), "{err}");
    }

    #[test]
    fn a_url_without_a_database_is_refused() {
        for url in [
            "mysql://app@db",
            "mysql://app@db/",
            "mysql://app@db:3306/?require_ssl=true",
        ] {
            let err = Database::from_url(url).unwrap_err().to_string();
            assert!(err.contains("names no database"), "{url}: {err}");
        }
    }
}
