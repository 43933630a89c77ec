//! `mode = "lease"` and its `[lease]` table: for long jobs, a row is claimed in a
//! short transaction (the lease SQL takes it out of the select), worked on with no
//! transaction held, kept by renewals, and settled by outcome SQL guarded by the
//! lease. Here: the keys, their checks, and the rule that every statement touching
//! a leased row restricts by the key and `:lease_id`.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::validate::validator::Validator;
use crate::config::value::duration::DurationText;
use crate::config::value::statements::Statements;
use crate::sql::lex::{is_kw, spans, Lex};
use crate::sql::statement::ParsedStatement;

/// `[lease] connections` when the file does not set it.
pub const DEFAULT_LEASE_CONNECTIONS: usize = 4;
/// The most connections a lease-mode queue may keep.
pub const MAX_LEASE_CONNECTIONS: usize = 100;

/// `[lease]`, in lease mode: renewal, release and outcome SQL must be UPDATE or
/// DELETE with the key and :lease_id in their WHERE.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLease {
    /// Runs for each claimed row in the claim's transaction, taking it out of the
    /// select under a fresh :lease_id (this claim's random token); :worker is
    /// host:pid:worker. Keep the lease in UTC or unix time (UTC_TIMESTAMP(),
    /// UNIX_TIMESTAMP()): NOW() against a DATETIME moves with the session's time zone.
    pub sql: Statements,
    /// Runs (and commits) every renew_every while the action runs; :progress is the
    /// action's last progress line. A renewal that matches no row means the lease is
    /// lost: the action is cancelled. Optional: without it the lease must outlast the
    /// action.
    pub renew_sql: Option<Statements>,
    /// When shutdown cancels an action, or the circuit breaker keeps a leased row from
    /// running: the row is waiting again at once. Optional: without it the row waits
    /// for its lease to expire.
    pub release_sql: Option<Statements>,
    /// How often renew_sql runs. Default: a third of the shorter lease sql and
    /// renew_sql give, each in its one INTERVAL <n> SECOND|MINUTE|HOUR|DAY (otherwise
    /// required); it must be shorter than that lease.
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub renew_every: Option<Duration>,
    /// How long a lease lasts, when its SQL does not say it in one INTERVAL (a time
    /// token: the framework's retry_after or redeliver_timeout, which its select
    /// compares with): renew_every must be shorter, and renewals that keep failing
    /// until it runs out cancel the action, so another worker may take the row.
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub length: Option<Duration>,
    /// The pool of connections the workers share. Default 4, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub connections: Option<u32>,
    /// What :lease_id is: "random" (default), a fresh random token per claim for a
    /// lease column of its own; or the claim's time, for a table whose own
    /// reservation column is the lease (Laravel's jobs.reserved_at, Symfony's
    /// messenger_messages.delivered_at): "unix_time" (whole seconds) or
    /// "utc_datetime" ('YYYY-MM-DD HH:MM:SS', UTC), by tableq's clock. With a time,
    /// renew_sql moves the lease to :new_lease_id (a later time) and the lease is
    /// then held under it.
    #[schemars(with = "Option<String>", extend("enum" = ["random", "unix_time", "utc_datetime"]))]
    pub token: Option<LeaseToken>,
}

/// What a lease's `:lease_id` is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LeaseToken {
    /// 128 random bits as hex, fresh for each claim; a renewal keeps it.
    #[default]
    Random,
    /// The claim's (then the last renewal's) time as unix seconds.
    UnixTime,
    /// The claim's (then the last renewal's) time as `YYYY-MM-DD HH:MM:SS` in UTC.
    UtcDatetime,
}

impl LeaseToken {
    /// A time token for `seconds` since the epoch (a random token's kind writes
    /// them as a number too).
    pub fn at(self, seconds: u64) -> String {
        match self {
            LeaseToken::UtcDatetime => {
                let at = std::time::UNIX_EPOCH + Duration::from_secs(seconds);
                // "2026-12-07T03:04:05Z" → "2026-12-07 03:04:05"
                let text = humantime::format_rfc3339_seconds(at).to_string();
                text.trim_end_matches('Z').replacen('T', " ", 1)
            }
            LeaseToken::Random | LeaseToken::UnixTime => seconds.to_string(),
        }
    }
}

/// A lease-mode queue's lease, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseConfig {
    /// Runs for each claimed row in the claim's transaction: takes the row out of
    /// the select, stamping it with `:lease_id`.
    pub sql: Vec<ParsedStatement>,
    /// Runs every `renew_every` while the action runs; 0 rows changed means the lease
    /// is lost. None: no renewals (the lease must outlast the action's timeout).
    pub renew_sql: Option<Vec<ParsedStatement>>,
    /// Runs when shutdown cancels an action, so the row is waiting again at once.
    pub release_sql: Option<Vec<ParsedStatement>>,
    /// How often `renew_sql` runs; `None` without it.
    pub renew_every: Option<Duration>,
    /// The most connections the queue's workers share.
    pub connections: usize,
    /// How long a lease lasts, when `sql` and `renew_sql` say it in one `INTERVAL`
    /// each (the shorter of the two).
    pub length: Option<Duration>,
    /// What `:lease_id` is.
    pub token: LeaseToken,
}

/// The `[lease]` table, validated (`mode = "lease"`: see [`crate::config::queue::mode`]).
pub(crate) fn table(v: &mut Validator, lease: &RawLease) -> LeaseConfig {
    let sql = v.statements(&["lease", "sql"], &lease.sql);
    let renew_sql = lease
        .renew_sql
        .as_ref()
        .map(|s| v.statements(&["lease", "renew_sql"], s));
    let release_sql = lease
        .release_sql
        .as_ref()
        .map(|s| v.statements(&["lease", "release_sql"], s));
    let renew_every = renew_every(v, lease);
    let connections = lease.connections.map_or(DEFAULT_LEASE_CONNECTIONS, |n| {
        let n = n as usize;
        if !(1..=MAX_LEASE_CONNECTIONS).contains(&n) {
            v.error(
                &["lease", "connections"],
                format!(
                    "`lease.connections` = {n} is out of range: use 1 to {MAX_LEASE_CONNECTIONS}"
                ),
            );
        }
        n
    });
    let token = lease.token.unwrap_or_default();
    let moves_on = |list: &Vec<ParsedStatement>| {
        list.iter().any(|s| {
            s.params
                .iter()
                .any(|p| p.eq_ignore_ascii_case("new_lease_id"))
        })
    };
    if token != LeaseToken::Random && renew_sql.as_ref().is_some_and(|list| !moves_on(list)) {
        v.error(
            &["lease", "renew_sql"],
            "with a time `token`, `renew_sql` must move the lease to :new_lease_id (`SET \
             reserved_at = :new_lease_id WHERE id = :id AND reserved_at = :lease_id`): the \
             lease is held under that time after a renewal, and the next would find it lost",
        );
    }
    LeaseConfig {
        sql,
        renew_sql,
        release_sql,
        renew_every,
        connections,
        length: shortest_lease(lease).map(|(_, length)| length),
        token,
    }
}

/// The shorter lease `[lease] sql` and `renew_sql` give, with the key that gives it:
/// the claim's lease must last to the first renewal, and each renewal's to the
/// next; `length` when the file says it. `None` when neither says it in one
/// `INTERVAL`, and the file gives no `length`.
fn shortest_lease(lease: &RawLease) -> Option<(&'static str, Duration)> {
    if let Some(length) = lease.length {
        return Some(("length", length));
    }
    let renew = lease.renew_sql.as_ref().map(|list| ("renew_sql", list));
    renew
        .into_iter()
        .chain([("sql", &lease.sql)])
        .filter_map(|(key, list)| match list.0.as_slice() {
            [one] => lease_length(one).map(|length| (key, length)),
            _ => None,
        })
        .min_by_key(|(_, length)| *length)
}

/// `renew_every`: as given, else a third of the [`shortest_lease`]; refused when it
/// is not shorter than that lease. `None` without `renew_sql`.
fn renew_every(v: &mut Validator, lease: &RawLease) -> Option<Duration> {
    if lease.renew_sql.is_none() {
        if lease.renew_every.is_some() {
            v.error(
                &["lease", "renew_every"],
                "`renew_every` without `renew_sql` renews nothing: add renew_sql, the UPDATE that \
                 moves the lease on (`WHERE id = :id AND lease_id = :lease_id`), or remove renew_every",
            );
        }
        return None;
    }
    let shortest = shortest_lease(lease);
    let path = ["lease", "renew_every"];
    match (lease.renew_every, shortest) {
        (Some(every), Some((key, length))) if every >= length => {
            let (every, length) = (
                humantime::format_duration(every),
                humantime::format_duration(length),
            );
            v.error(
                &path,
                format!(
                    "`renew_every` = {every} is not shorter than the lease `{key}` gives \
                     ({length}): the lease would expire between renewals; renew every third of it"
                ),
            );
            None
        }
        (Some(every), _) => Some(v.positive(&path, Some(every), every)),
        (None, Some((_, length))) => Some(length / 3),
        (None, None) => {
            v.error(
                &["lease", "renew_sql"],
                "`renew_sql` needs `renew_every`: how often to renew, a third of the lease it gives \
                 (e.g. renew_every = \"40s\" for INTERVAL 2 MINUTE); tableq reads it by itself only \
                 from one `INTERVAL <n> SECOND|MINUTE|HOUR|DAY`",
            );
            None
        }
    }
}

/// The lease's length as one statement gives it: its only `INTERVAL <n> <unit>`, in
/// seconds, minutes, hours or days. `None` if there is not exactly one.
fn lease_length(sql: &str) -> Option<Duration> {
    let pieces = spans(sql);
    let mut found = None;
    for window in pieces.windows(3) {
        let [(first, _), (Lex::Literal, number), (Lex::Word(unit), _)] = window else {
            continue;
        };
        if !is_kw(first, "INTERVAL") {
            continue;
        }
        let count: u64 = sql[number.clone()].parse().ok()?;
        let seconds = match unit.to_ascii_uppercase().as_str() {
            "SECOND" => 1,
            "MINUTE" => 60,
            "HOUR" => 3600,
            "DAY" => 86400,
            _ => return None,
        };
        if found.is_some() {
            return None;
        }
        found = Some(Duration::from_secs(count.checked_mul(seconds)?));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_lease_length_from_one_interval() {
        let renew = "UPDATE v SET lease_until = NOW() + INTERVAL 2 MINUTE WHERE id = :id";
        assert_eq!(lease_length(renew), Some(Duration::from_secs(120)));
        let two = "UPDATE v SET a = NOW() + INTERVAL 2 MINUTE, b = NOW() + INTERVAL 1 HOUR";
        assert_eq!(lease_length(two), None);
        let micro = "UPDATE v SET a = NOW(3) + INTERVAL 500000 MICROSECOND";
        assert_eq!(lease_length(micro), None);
        assert_eq!(lease_length("UPDATE v SET a = 1"), None);
    }
}
