//! Items counted by the queue's `label` column — a job's class in a framework's
//! table — for `/metrics` (`tableq_items_by_label_total`) and the status page. At
//! most [`LABELS_KEPT`] values are told apart; the rest count as [`OTHER`], so a
//! column that is not a kind after all cannot grow the metrics without bound.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::Serialize;

use crate::lock::lock;

/// Values told apart per queue.
pub const LABELS_KEPT: usize = 100;
/// What the values past [`LABELS_KEPT`] (and a NULL) count as.
pub const OTHER: &str = "other";

/// What became of one label's items since the process started.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LabelCounts {
    pub done: u64,
    pub failed: u64,
    pub returned: u64,
}

/// How an item ended, as these counts tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Done,
    Failed,
    Returned,
}

/// A queue's items by label.
#[derive(Debug, Default)]
pub struct ByLabel(Mutex<BTreeMap<String, LabelCounts>>);

impl ByLabel {
    /// Counts an item whose label column held `label` (`None`: NULL).
    pub fn count(&self, label: Option<&str>, ended: Ended) {
        let mut labels = lock(&self.0);
        let label = match label {
            Some(label) if labels.contains_key(label) || labels.len() < LABELS_KEPT => label,
            _ => OTHER,
        };
        let counts = labels.entry(label.to_string()).or_default();
        match ended {
            Ended::Done => counts.done += 1,
            Ended::Failed => counts.failed += 1,
            Ended::Returned => counts.returned += 1,
        }
    }

    /// Every label's counts, by label.
    pub fn all(&self) -> Vec<(String, LabelCounts)> {
        lock(&self.0)
            .iter()
            .map(|(label, counts)| (label.clone(), *counts))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_label_and_the_rest_as_other() {
        let by_label = ByLabel::default();
        by_label.count(Some("App\\Jobs\\SendInvoice"), Ended::Done);
        by_label.count(Some("App\\Jobs\\SendInvoice"), Ended::Failed);
        by_label.count(None, Ended::Returned);
        for n in 0..LABELS_KEPT + 5 {
            by_label.count(Some(&format!("Job{n}")), Ended::Done);
        }
        let all = by_label.all();
        assert_eq!(all.len(), LABELS_KEPT);
        let other = all.iter().find(|(label, _)| label == OTHER).unwrap().1;
        assert_eq!(other.returned, 1);
        assert_eq!(other.done, 7, "the values past the limit");
        let invoice = all
            .iter()
            .find(|(l, _)| l == "App\\Jobs\\SendInvoice")
            .unwrap()
            .1;
        assert_eq!(
            invoice,
            LabelCounts {
                done: 1,
                failed: 1,
                returned: 0
            }
        );
    }
}
