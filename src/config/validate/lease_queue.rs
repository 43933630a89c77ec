//! A lease-mode queue as a whole, once its tables are validated: the statements
//! that must check the lease (by the key and `:lease_id`), the statements that read
//! the session's clock (a time zone change would move every lease), and how long a
//! lease may last.

use std::time::Duration;

use crate::config::queue::lease::LeaseConfig;
use crate::config::validate::names::key_name;
use crate::config::{statement_path, QueueConfig};
use crate::diagnostic::{Finding, Severity};
use crate::sql::lex::{ident, is_any_kw, lex, Lex};
use crate::sql::shape::{inserts_from_key, restricts_to_key};
use crate::sql::statement::{first_word, ParsedStatement};

/// Every statement of a lease-mode queue that touches its leased row and does not
/// restrict by the key (and, but for the lease SQL, by `:lease_id`), as errors: a
/// renewal or outcome that does not check the lease would record a worker's result
/// after another worker took the row over.
pub fn unguarded(queue: &QueueConfig) -> Vec<Finding> {
    let Some(lease) = queue.lease() else {
        return Vec::new();
    };
    let key = key_name(queue);
    let mut findings = Vec::new();
    let mut check = |path: &[&str], statements: &[ParsedStatement], by_lease: bool| {
        for (index, statement) in statements.iter().enumerate() {
            if let Some(problem) = guard_problem(&statement.text, key.as_deref(), by_lease) {
                let at = statement_path(path, index, statements.len());
                let at: Vec<&str> = at.iter().map(String::as_str).collect();
                let message = format!("`{}` {problem}", path.join("."));
                findings.push(queue.finding(Severity::Error, &at, message));
            }
        }
    };
    check(&["lease", "sql"], &lease.sql, false);
    if let Some(renew) = &lease.renew_sql {
        check(&["lease", "renew_sql"], renew, true);
    }
    if let Some(release) = &lease.release_sql {
        check(&["lease", "release_sql"], release, true);
    }
    for (path, list) in queue.outcome_statements() {
        check(&path, list, true);
    }
    findings
}

/// What is wrong with one statement's guard, if anything. It must be an UPDATE or
/// DELETE (its row count says whether the lease still holds) whose WHERE uses the
/// key and, when `by_lease`, `:lease_id`.
fn guard_problem(sql: &str, key: Option<&str>, by_lease: bool) -> Option<String> {
    let example = match key {
        Some(key) => format!("WHERE {key} = :{key} AND lease_id = :lease_id"),
        None => "WHERE id = :id AND lease_id = :lease_id".to_string(),
    };
    // An INSERT … SELECT copies the leased row (a framework's failed_jobs row).
    let restricts = |param: &str| restricts_to_key(sql, param).or(inserts_from_key(sql, param));
    let shape = first_word(sql);
    let copies = shape.as_deref() == Some("INSERT") && inserts_from_key(sql, "").is_some();
    if !matches!(shape.as_deref(), Some("UPDATE" | "DELETE")) && !copies {
        return Some(format!(
            "must be an UPDATE or DELETE of the leased row, or an INSERT … SELECT of it (its row \
             count tells whether the lease still holds), restricted by `{example}`"
        ));
    }
    if let Some(key) = key {
        if restricts(key) != Some(true) {
            return Some(format!(
                "does not restrict by the key (no `:{key}` in its WHERE): in lease mode it must \
                 touch only the leased row; write `{example}`"
            ));
        }
    }
    if by_lease && restricts("lease_id") != Some(true) {
        return Some(format!(
            "does not check the lease (no `:lease_id` in its WHERE): after the lease expired and \
             another worker took the row, it would overwrite that worker's work; write `{example}`"
        ));
    }
    None
}

/// The SQL functions whose value follows the session's time zone.
const SESSION_CLOCK: &[&str] = &[
    "NOW",
    "CURRENT_TIMESTAMP",
    "SYSDATE",
    "LOCALTIME",
    "LOCALTIMESTAMP",
];

/// A statement of a lease-mode queue's select or `[lease]` that reads the session's
/// clock: a lease kept in a DATETIME column against it moves whenever the session's
/// time zone does (a DATETIME holds no time zone; NOW() is the session's local time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionClock {
    /// The key that holds it: `lease.renew_sql`.
    pub key: String,
    /// Where it is: `["lease", "renew_sql"]` (and its index, in an array).
    pub path: Vec<String>,
    /// The function, as the warning names it: `NOW()`.
    pub function: String,
    /// The names the statement mentions (a column among them, perhaps).
    pub names: Vec<String>,
}

/// The select and `[lease]` statements of a lease-mode queue that read the
/// session's clock (none for a queue in transaction mode).
pub fn session_clock(queue: &QueueConfig) -> Vec<SessionClock> {
    let Some(lease) = queue.lease() else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut look = |path: &[&str], statements: &[ParsedStatement]| {
        for (index, statement) in statements.iter().enumerate() {
            let pieces = lex(&statement.text);
            let Some(function) = pieces.iter().find(|p| is_any_kw(p, SESSION_CLOCK)) else {
                continue;
            };
            let Lex::Word(function) = function else {
                continue;
            };
            found.push(SessionClock {
                key: path.join("."),
                path: statement_path(path, index, statements.len()),
                function: format!("{}()", function.to_ascii_uppercase()),
                names: pieces.iter().filter_map(ident).collect(),
            });
        }
    };
    look(&["select"], std::slice::from_ref(&queue.select));
    look(&["lease", "sql"], &lease.sql);
    if let Some(renew) = &lease.renew_sql {
        look(&["lease", "renew_sql"], renew);
    }
    if let Some(release) = &lease.release_sql {
        look(&["lease", "release_sql"], release);
    }
    found
}

impl SessionClock {
    /// The warning for this statement; `column` is the DATETIME column it meets,
    /// when `check` has read the table (offline it cannot tell DATETIME from
    /// TIMESTAMP).
    pub fn warning(&self, queue: &QueueConfig, column: Option<&str>) -> Finding {
        let (key, function) = (&self.key, &self.function);
        let what = match column {
            Some(column) => format!(
                "`{key}` compares the DATETIME column `{column}` with {function}, which follows \
                 the session's time zone"
            ),
            None => format!(
                "`{key}` uses {function}, which follows the session's time zone: with a DATETIME \
                 lease column"
            ),
        };
        let at: Vec<&str> = self.path.iter().map(String::as_str).collect();
        queue.finding(
            Severity::Warning,
            &at,
            format!(
                "{what}, every lease moves when the time zone changes (a changed server time zone \
                 expires them all at once, and their jobs run twice); keep leases in UTC — \
                 UTC_TIMESTAMP() with a DATETIME column — or in unix time (UNIX_TIMESTAMP()), in \
                 the select too (a TIMESTAMP column with NOW() is safe)"
            ),
        )
    }
}

/// [`session_clock`]'s warnings, from the file alone.
pub fn session_clock_warnings(queue: &QueueConfig) -> Vec<Finding> {
    session_clock(queue)
        .iter()
        .map(|clock| clock.warning(queue, None))
        .collect()
}

impl LeaseConfig {
    /// The longest a lease taken or renewed now may last: its length, when the SQL
    /// says it; else three renewals; else (no renewals: the lease must outlast the
    /// action) the action's timeout.
    pub fn expires_within(&self, queue: &QueueConfig) -> Duration {
        self.length
            .or(self.renew_every.map(|every| every * 3))
            .unwrap_or_else(|| queue.action.timeout())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_insert_copying_the_leased_row_is_guarded_by_its_select() {
        let copy = "INSERT INTO failed_jobs (payload) SELECT payload FROM jobs \
                    WHERE id = :id AND reserved_at = :lease_id";
        assert_eq!(guard_problem(copy, Some("id"), true), None);
        let unguarded = "INSERT INTO failed_jobs (payload) SELECT payload FROM jobs WHERE id = :id";
        let problem = guard_problem(unguarded, Some("id"), true).unwrap();
        assert!(problem.contains(":lease_id"), "{problem}");
        let values = "INSERT INTO log (id) VALUES (:id)";
        assert!(guard_problem(values, Some("id"), false)
            .unwrap()
            .contains("INSERT … SELECT"));
    }

    #[test]
    fn a_guard_needs_the_key_and_the_lease_id_in_its_where() {
        let good = "UPDATE v SET state = 'done' WHERE id = :id AND lease_id = :lease_id";
        assert_eq!(guard_problem(good, Some("id"), true), None);
        let no_lease = "UPDATE v SET state = 'done' WHERE id = :id";
        let problem = guard_problem(no_lease, Some("id"), true).unwrap();
        assert!(problem.contains(":lease_id"), "{problem}");
        assert_eq!(guard_problem(no_lease, Some("id"), false), None);
        let no_key = "UPDATE v SET state = 'done' WHERE lease_id = :lease_id";
        let problem = guard_problem(no_key, Some("id"), true).unwrap();
        assert!(problem.contains("key"), "{problem}");
        let insert = "INSERT INTO log (id) VALUES (:id)";
        assert!(guard_problem(insert, Some("id"), true).is_some());
    }

    #[test]
    fn finds_the_session_clock_in_words_not_in_strings() {
        let words = |sql: &str| {
            lex(sql)
                .iter()
                .filter(|p| is_any_kw(p, SESSION_CLOCK))
                .count()
        };
        assert_eq!(
            words("UPDATE v SET lease_until = NOW() + INTERVAL 2 MINUTE"),
            1
        );
        assert_eq!(
            words("SELECT id FROM v WHERE lease_until < current_timestamp"),
            1
        );
        assert_eq!(
            words("UPDATE v SET lease_until = UTC_TIMESTAMP() + INTERVAL 2 MINUTE"),
            0
        );
        assert_eq!(
            words("UPDATE v SET until = UNIX_TIMESTAMP() + 120, note = 'NOW()'"),
            0
        );
    }
}
