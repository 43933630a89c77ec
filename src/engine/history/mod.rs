//! The copy's history in the database, for the console of every copy: one task,
//! [`recorder`], that writes each queue's minutes once a minute (and at shutdown),
//! its failed attempts as their turns commit, and the copy's heartbeat every 10 s,
//! into the `tableq_*` tables of each queue's database (`db::history`), with one
//! connection per database. It never holds a worker up: a history that cannot be
//! written is a WARN and a count (`tableq_history_write_errors_total`).

pub mod options;
pub mod recorder;

pub use options::HistoryOptions;

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::telemetry::stats::monitor::Monitor;

/// The history being kept; [`Recorder::finish`] writes what is left.
pub struct Recorder {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

/// How long the last writes at shutdown may take.
const FINISH_WITHIN: Duration = Duration::from_secs(10);

impl Recorder {
    /// Starts keeping the history of `monitor`'s queues.
    pub fn start(monitor: Arc<Monitor>, options: HistoryOptions) -> Recorder {
        let stop = CancellationToken::new();
        let writer = recorder::Writer::new(monitor, options);
        let task = tokio::spawn(writer.run(stop.clone()));
        Recorder { stop, task }
    }

    /// Writes the minute under way and the attempts not yet written, and says the
    /// copy left; within [`FINISH_WITHIN`].
    pub async fn finish(self) {
        self.stop.cancel();
        let _ = tokio::time::timeout(FINISH_WITHIN, self.task).await;
    }
}
