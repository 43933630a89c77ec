//! A worker that panics — a bug in tableq — is run again after a backoff, until the
//! queue stops; what its crash left behind is the database's to undo.

use std::future::Future;

use tracing::error;

use crate::duration::rounded;
use crate::engine::policy::retry::{Next, Retry};
use crate::engine::queue::QueueRuntime;

/// Runs worker `index` of `queue`, as `start` makes it, and again each time it
/// panics; `left` says what became of its rows (for the log line).
pub async fn restart_on_panic<F, W>(queue: &QueueRuntime, index: usize, left: &str, mut start: F)
where
    F: FnMut() -> W,
    W: Future<Output = ()> + Send + 'static,
{
    let mut retry = Retry::new(queue.config.error_backoff, &queue.stop);
    let run = || {
        let worker = tokio::spawn(start());
        async {
            match worker.await {
                Err(e) if e.is_panic() => Err(e),
                _ => Ok(()),
            }
        }
    };
    let _ = retry
        .run(run, |_, failure| {
            error!(queue = %queue.config.name, worker = index, retry_in = %rounded(failure.retry_in),
                "worker crashed (a bug in tableq; please report it); {left}; restarting it");
            Next::Again
        })
        .await;
}
