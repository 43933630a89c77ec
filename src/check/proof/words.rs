//! The proof's words: a finding for each way a path can end badly.

use super::{Path, Proof};
use crate::check::queries;
use crate::db::error::{
    describe_error, is_expected_contention, is_statement_error, is_value_too_long,
};
use crate::db::item::Item;
use crate::diagnostic::{Finding, Severity};

impl Proof<'_> {
    pub(super) fn key_name<'i>(&self, item: &'i Item) -> &'i str {
        item.columns
            .names
            .get(item.key_index)
            .map_or("key", String::as_str)
    }

    pub(super) fn row(&self, item: &Item) -> String {
        format!("row {} = {}", self.key_name(item), item.key_text())
    }

    /// `row id = 3`, or `rows id = 3, 4, 5` for a batch-scope sample.
    pub(super) fn rows(&self, sample: &[Item]) -> String {
        match sample {
            [item] => self.row(item),
            [first, ..] => {
                let keys: Vec<String> = sample.iter().map(Item::key_text).collect();
                format!("rows {} = {}", self.key_name(first), keys.join(", "))
            }
            [] => "no row".to_string(),
        }
    }

    /// The finding for statement `at`'s error; `None` when the connection failed.
    pub(super) fn stopped_by(
        &self,
        at: &[&str],
        sample: &[Item],
        e: &mysql_async::Error,
    ) -> Option<Finding> {
        let key = at.iter().take(2).copied().collect::<Vec<_>>().join(".");
        if matches!(e, mysql_async::Error::Server(s) if s.code == queries::XA_REFUSED) {
            Some(self.commits(at, &key))
        } else if is_expected_contention(e) {
            Some(self.queue.finding(
                Severity::Warning,
                at,
                format!(
                    "not proven: a running transaction held a lock the proof needed (`{key}` \
                     waited for it: {}); check again",
                    describe_error(e)
                ),
            ))
        } else if is_statement_error(e) {
            Some(self.statement_failed(at, &key, sample, e))
        } else {
            None
        }
    }

    /// The server refused a COMMIT inside check's XA transaction.
    fn commits(&self, at: &[&str], key: &str) -> Finding {
        self.queue.finding(
            Severity::Error,
            at,
            format!(
                "`{key}` commits: tableq runs it inside the item's transaction and commits that \
                 itself, once the outcome SQL has run (check's transaction refused the commit: \
                 ERROR {}); remove the COMMIT, or the statement that commits implicitly, from \
                 what it calls",
                queries::XA_REFUSED
            ),
        )
    }

    /// A statement's own error on the claimed row.
    fn statement_failed(
        &self,
        at: &[&str],
        key: &str,
        sample: &[Item],
        e: &mysql_async::Error,
    ) -> Finding {
        if at[0] == "action" {
            // The row's data may make the action fail: that is the failure path.
            return self.queue.finding(
                Severity::Warning,
                at,
                format!(
                    "not proven on success: the SQL action fails on {}: {}",
                    self.rows(sample),
                    describe_error(e)
                ),
            );
        }
        let hint = match is_value_too_long(e) {
            true => {
                "; `:error` may be 8 KiB and `:output` 64 KiB: keep what fits the column \
                     with LEFT(:error, n) (or LEFT(:output, n)), n its length"
            }
            false => "",
        };
        self.queue.finding(
            Severity::Error,
            at,
            format!(
                "`{key}` fails on {}: {}; the item would be rolled back and come straight back{hint}",
                self.rows(sample),
                describe_error(e)
            ),
        )
    }

    pub(super) fn stays_after_success(&self, item: &Item, sql_action: bool) -> Finding {
        let what = match (sql_action, self.queue.on_success.is_empty()) {
            (true, false) => "the SQL action and [on_success]",
            (true, true) => "the SQL action (there is no [on_success])",
            (false, false) => "[on_success]",
            (false, true) => "a successful action (there is no [on_success])",
        };
        let at: &[&str] = if self.queue.on_success.is_empty() {
            &["action"]
        } else {
            &["on_success"]
        };
        self.queue.finding(
            Severity::Error,
            at,
            format!(
                "on success the row stays in the queue: after {what} on {} the select still \
                 returns it, so it would be processed again and again; change the row in \
                 [on_success] so the select no longer returns it",
                self.row(item)
            ),
        )
    }

    pub(super) fn stays_after_failure(&self, item: &Item) -> Finding {
        self.queue.finding(
            Severity::Error,
            &["on_failure"],
            format!(
                "on failure the row stays in the queue: after [on_failure] on {} the select \
                 still returns it now, so a failing item comes straight back, at the front of \
                 the queue; change the row so it no longer matches now (a retry time in the \
                 future, or a final status)",
                self.row(item)
            ),
        )
    }

    /// The XA transaction was gone before check rolled it back.
    pub(super) fn ended_early(&self, path: Path, e: &mysql_async::Error) -> Finding {
        let at: &[&str] = match path {
            Path::Success => &["action"],
            Path::Failure => &["on_failure"],
            Path::Lease => &["lease"],
        };
        self.queue.finding(
            Severity::Error,
            at,
            format!(
                "a statement ended the transaction the item's lock lives in, before check rolled \
                 it back: its work may have been committed: {}",
                describe_error(e)
            ),
        )
    }
}
