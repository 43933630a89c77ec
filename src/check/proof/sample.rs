//! The rows a proof follows. In item scope, one claimed row, its columns bound as
//! `:column`. In batch scope, a sample of up to [`BATCH_SAMPLE`] rows bound as one
//! `:batch`, with one more row claimed and left out of it: a statement on the
//! select's tables that changes more rows than the sample holds touches rows outside
//! the batch — it forgot to join `:batch` by the key.

use mysql_async::Params;

use super::Proof;
use crate::action::Outcome;
use crate::check::recurring::sample_next_run;
use crate::config::Scope;
use crate::db::bind::{bind, bind_batch};
use crate::db::item::{Item, OutcomeParams};
use crate::db::prepared::BoundStatement;
use crate::db::row_json::batch_json;
use crate::diagnostic::{Finding, Severity};
use crate::sql::statement::ParsedStatement;
use crate::sql::tables::{from_tables, statement_target};

/// The most rows a batch-scope proof binds in one `:batch`.
pub const BATCH_SAMPLE: usize = 10;

impl Proof<'_> {
    /// How many rows to claim: one in item scope; in batch scope the sample and one
    /// row to keep out of it.
    pub(super) fn claim_size(&self) -> usize {
        match self.queue.scope() {
            Scope::Item => 1,
            Scope::Batch => self.queue.batch.min(BATCH_SAMPLE) + 1,
        }
    }

    /// The rows the path runs for, out of those `claimed`: all but the last in batch
    /// scope (when there are several), so one claimed row stays outside the batch.
    pub(super) fn sample_of<'i>(&self, claimed: &'i [Item]) -> &'i [Item] {
        match self.queue.scope() {
            Scope::Batch if claimed.len() > 1 => &claimed[..claimed.len() - 1],
            _ => &claimed[..1.min(claimed.len())],
        }
    }

    /// The parameters of `bound` for `sample`, with `outcome` for outcome SQL.
    pub(super) fn params(
        &self,
        bound: &BoundStatement,
        sample: &[Item],
        outcome: Option<&Outcome>,
    ) -> Params {
        let name = &self.queue.name;
        match (self.queue.scope(), sample) {
            (Scope::Item, [item, ..]) => {
                let mut params = outcome.map_or(OutcomeParams::NONE, Outcome::params);
                // `[recurring]`: the row's own next due time, as `run` binds it.
                params.next_run = outcome.and_then(|_| sample_next_run(self.queue, item));
                bind(&bound.sources, item, name, &params)
            }
            _ => {
                let items = sample
                    .iter()
                    .map(|item| (item, outcome.map(Outcome::params)));
                bind_batch(&bound.sources, &batch_json(items), name)
            }
        }
    }

    /// In batch scope: a finding when `statement` (at `at`), on one of the select's
    /// tables, changed more rows (`affected`) than `sample` holds.
    pub(super) fn overreach(
        &self,
        at: &[&str],
        statement: &ParsedStatement,
        affected: u64,
        sample: &[Item],
    ) -> Option<Finding> {
        if self.queue.scope() != Scope::Batch || affected <= sample.len() as u64 {
            return None;
        }
        let queued = from_tables(&self.queue.select.text);
        let target = statement_target(&statement.text);
        let table = match target {
            Some(target) if !queued.iter().any(|t| t.same_as(&target)) => return None,
            Some(target) => target.name,
            None => "the select's tables".to_string(),
        };
        let key = at.iter().take(2).copied().collect::<Vec<_>>().join(".");
        let column = self.key_name(&sample[0]);
        Some(self.queue.finding(
            Severity::Error,
            at,
            format!(
                "`{key}` changed {affected} rows of {table} for a batch of {}: it touches rows \
                 outside the batch (every waiting row, if it forgot the join); join `:batch` by \
                 the key, e.g. `JOIN JSON_TABLE(:batch, '$[*]' COLUMNS ({column} BIGINT PATH \
                 '$.{column}')) AS b USING ({column})`",
                sample.len()
            ),
        ))
    }
}
