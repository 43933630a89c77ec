//! `scope`: whether a queue's statements run once per item (`"item"`, the default)
//! or once per batch (`"batch"`), with the items as one JSON array in `:batch`.
//!
//! In batch scope a statement cannot name one item's column: there is no one item.
//! It joins the array by key instead (`JSON_TABLE(:batch, '$[*]' COLUMNS (…))`), and
//! the refusal of a `:column` shows that form, built from the queue's own key.

use crate::config::validate::validator::Validator;

/// How many items one run of a queue's statements applies to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Scope {
    /// Once per item, each column a `:column` parameter.
    #[default]
    Item,
    /// Once per batch: `:batch` holds the items as a JSON array of objects.
    Batch,
}

/// The parameters a statement may use in batch scope.
pub const BATCH_PARAMS: &str = ":batch, :queue";

impl Validator<'_> {
    /// `scope = "item" | "batch"`; item scope when not given.
    pub(crate) fn scope(&mut self, text: Option<&str>) -> Scope {
        match text {
            None | Some("item") => Scope::Item,
            Some("batch") => Scope::Batch,
            Some(other) => {
                let message = format!(
                    "`scope` = {other:?} is not a scope: use \"item\" (each statement runs once per \
                     item) or \"batch\" (once per batch, the items in `:batch`)"
                );
                self.error(&["scope"], message);
                Scope::Item
            }
        }
    }
}

/// Whether `name` is a parameter batch-scope statements have.
pub fn is_batch_param(name: &str) -> bool {
    matches!(name, "batch" | "queue")
}
