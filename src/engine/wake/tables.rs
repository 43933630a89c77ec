//! Which tables wake a queue: every table its select reads, at any depth (joins,
//! `EXISTS` and `IN` subqueries, derived tables), a view's base tables in its place
//! once they are read at start ([`Watched::seen_through`]), plus `tableq_paused` (so
//! a resume is seen at once), and statements logged as text in their schemas. A
//! select whose tables cannot all be told (a `WITH`, a table function) wakes on any
//! change in its database.

use crate::db::binlog::{ChangedTable, Commit};
use crate::sql::tables::{tables_read, TableRef};

/// The tables a queue is woken by.
#[derive(Debug, Clone)]
pub enum Watched {
    Tables(Vec<TableRef>),
    /// Anything that changes in the database.
    Anything,
}

impl Watched {
    /// Reads `select`'s tables.
    pub fn of(select: &str) -> Watched {
        match tables_read(select) {
            Some(mut tables) => {
                tables.push(TableRef {
                    schema: None,
                    name: crate::db::pause::TABLE.to_string(),
                });
                Watched::Tables(tables)
            }
            None => Watched::Anything,
        }
    }

    /// The tables watched, if they are told.
    pub fn tables(&self) -> Option<&[TableRef]> {
        match self {
            Watched::Tables(tables) => Some(tables),
            Watched::Anything => None,
        }
    }

    /// These tables with the views among them replaced (`tables`, as the binary log
    /// names them: see [`crate::db::views::seen_through`]).
    pub fn seen_through(&self, tables: Vec<TableRef>) -> Watched {
        match self {
            Watched::Tables(_) => Watched::Tables(tables),
            Watched::Anything => Watched::Anything,
        }
    }

    /// Whether `commit` changed a table watched here; a table with no schema is in
    /// `database`, the queue's own.
    pub fn woken_by(&self, commit: &Commit, database: &str) -> bool {
        if commit.anything {
            return true;
        }
        let ran_in = |schema: &str| {
            commit
                .schemas
                .iter()
                .any(|s| s.eq_ignore_ascii_case(schema))
        };
        match self {
            Watched::Anything => {
                ran_in(database)
                    || commit
                        .tables
                        .iter()
                        .any(|t| t.schema.eq_ignore_ascii_case(database))
            }
            Watched::Tables(watched) => watched.iter().any(|w| {
                let schema = w.schema.as_deref().unwrap_or(database);
                ran_in(schema) || commit.tables.iter().any(|t| same(w, t, database))
            }),
        }
    }
}

/// Whether `commit` may have changed `tableq_paused` in `database`: a pause or a
/// resume the queue should read now, not at its next read.
pub fn pause_changed(commit: &Commit, database: &str) -> bool {
    let paused = TableRef {
        schema: None,
        name: crate::db::pause::TABLE.to_string(),
    };
    commit.anything
        || commit
            .schemas
            .iter()
            .any(|s| s.eq_ignore_ascii_case(database))
        || commit.tables.iter().any(|t| same(&paused, t, database))
}

fn same(watched: &TableRef, changed: &ChangedTable, database: &str) -> bool {
    let schema = watched.schema.as_deref().unwrap_or(database);
    watched.name.eq_ignore_ascii_case(&changed.name) && schema.eq_ignore_ascii_case(&changed.schema)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changed(schema: &str, name: &str) -> Commit {
        Commit {
            tables: vec![ChangedTable {
                schema: schema.into(),
                name: name.into(),
            }],
            ..Commit::default()
        }
    }

    fn statements_in(schema: &str) -> Commit {
        Commit {
            schemas: vec![schema.into()],
            ..Commit::default()
        }
    }

    #[test]
    fn a_queue_wakes_on_the_tables_its_select_reads_in_its_database() {
        let watched = Watched::of(
            "SELECT j.id FROM job j JOIN other.customer c ON c.id = j.customer \
             WHERE j.state = 'new' AND NOT EXISTS (SELECT 1 FROM hold h WHERE h.job = j.id)",
        );
        assert!(watched.woken_by(&changed("app", "job"), "app"));
        assert!(watched.woken_by(&changed("app", "JOB"), "app"));
        assert!(watched.woken_by(&changed("other", "customer"), "app"));
        assert!(watched.woken_by(&changed("app", "hold"), "app"));
        assert!(watched.woken_by(&changed("app", "tableq_paused"), "app"));
        assert!(!watched.woken_by(&changed("shop", "job"), "app"));
        assert!(!watched.woken_by(&changed("app", "customer"), "app"));
        assert!(watched.woken_by(&statements_in("app"), "app"));
        assert!(watched.woken_by(&statements_in("other"), "app"));
        assert!(!watched.woken_by(&statements_in("shop"), "app"));
        let anything = Commit {
            anything: true,
            ..Commit::default()
        };
        assert!(watched.woken_by(&anything, "app"));
    }

    #[test]
    fn a_select_whose_tables_cannot_be_told_wakes_on_anything() {
        let watched = Watched::of("WITH w AS (SELECT id FROM job) SELECT id FROM w");
        assert!(watched.woken_by(&changed("app", "unrelated"), "app"));
        assert!(watched.woken_by(&statements_in("app"), "app"));
        assert!(!watched.woken_by(&changed("shop", "job"), "app"));
    }
}
