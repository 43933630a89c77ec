//! `mode` and `scope` as one typed value: a queue works in transaction mode, its
//! statements once per item or once per batch, or in lease mode, where every row is
//! leased, renewed and recorded on its own. Lease mode with batch scope has no value
//! of this type; the loader refuses it (and lease mode with an action that runs in
//! the transaction) with what to write instead.

use crate::config::action::ActionConfig;
use crate::config::load::raw::RawQueue;
use crate::config::queue::lease::{self, LeaseConfig};
use crate::config::queue::scope::Scope;
use crate::config::validate::validator::Validator;

/// How a queue's workers claim rows and carry them to their end.
#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    /// Each batch in one transaction that holds its rows' locks to the end.
    Transaction { scope: Scope },
    /// A short claim that leases the rows, the work with no transaction held, and
    /// outcomes guarded by the lease (`[lease]`).
    Lease(LeaseConfig),
}

/// Reads `mode`, `scope` and `[lease]`: transaction mode, item scope, by default.
pub(crate) fn validate<A>(v: &mut Validator, raw: &RawQueue<A>, action: &ActionConfig) -> Mode {
    let scope = v.scope(raw.scope.as_deref());
    let lease_mode = match raw.mode.as_deref() {
        None | Some("transaction") => false,
        Some("lease") => true,
        Some(other) => {
            v.error(
                &["mode"],
                format!("`mode` = {other:?} is not a mode: use \"transaction\" (the default) or \"lease\""),
            );
            return Mode::Transaction { scope };
        }
    };
    match (&raw.lease, lease_mode) {
        (None, true) => v.error(
            &["mode"],
            "`mode = \"lease\"` needs a [lease] table with `sql`, the UPDATE that takes a claimed \
             row out of the select, e.g. sql = \"UPDATE video SET state = 'rendering', lease_until = \
             UTC_TIMESTAMP() + INTERVAL 2 MINUTE, lease_id = :lease_id WHERE id = :id\"",
        ),
        (Some(_), false) => v.error(
            &["lease"],
            "a [lease] table is only read with `mode = \"lease\"`; add it, or remove [lease]",
        ),
        (Some(table), true) => {
            lease_refusals(v, raw, action);
            return Mode::Lease(lease::table(v, table));
        }
        _ => {}
    }
    Mode::Transaction { scope }
}

/// What lease mode cannot go with.
fn lease_refusals<A>(v: &mut Validator, raw: &RawQueue<A>, action: &ActionConfig) {
    if action.in_transaction() {
        v.error(
            &["action", "type"],
            format!(
                "`mode = \"lease\"` runs the action with no transaction held, so a `type = \"{}\"` \
                 action has nothing to protect it: use mode = \"transaction\" for it, or an action \
                 that reaches outside the database",
                action.type_name()
            ),
        );
    }
    if raw.scope.as_deref() == Some("batch") {
        v.error(
            &["scope"],
            "`mode = \"lease\"` leases, renews and records each row on its own, by its key and \
             `:lease_id`, so `scope = \"batch\"` does not apply: remove `scope`, or use mode = \
             \"transaction\" for set-based batches",
        );
    }
    if raw.on_success.is_none() {
        v.error(
            &["mode"],
            "`mode = \"lease\"` needs [on_success]: the leased row stays out of the select only \
             until its lease expires, so record the work done, e.g. sql = \"UPDATE video SET state = \
             'done' WHERE id = :id AND lease_id = :lease_id\"",
        );
    }
}
