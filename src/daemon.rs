//! The daemon around [`run`]: stop signals, and SIGHUP reloading the queue files.
//!
//! A reload loads and validates the new files first; if they are wrong, the error is
//! logged and the queues keep running as they were. Otherwise the running queues
//! stop claiming, finish what is in flight (bounded by the shutdown timeout), and
//! the new ones start.

use std::path::PathBuf;

use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::config::{load_paths, select_queues, QueueConfig};
use crate::database::parse_database_url;
use crate::diagnostic::{Finding, Findings};
use crate::runner::{run, RunOptions};
use crate::session::{OpenError, Session};

/// Where the queues come from, so they can be read again.
#[derive(Debug, Clone)]
pub struct QueueSource {
    pub paths: Vec<PathBuf>,
    pub names: Vec<String>,
}

impl QueueSource {
    pub fn load(&self) -> Result<Vec<QueueConfig>, Findings> {
        let queues = load_paths(&self.paths, &|name| std::env::var(name).ok())?;
        select_queues(queues, &self.names)
            .map_err(|message| Findings(vec![Finding::error(&self.paths[0], message)]))
    }
}

/// Runs `queues` until `shutdown`, reloading them from `source` on every SIGHUP.
pub async fn run_with_reload(
    source: QueueSource,
    mut queues: Vec<QueueConfig>,
    options: RunOptions,
    shutdown: CancellationToken,
) -> Result<(), Findings> {
    let mut hangups = signal(SignalKind::hangup()).map_err(|e| {
        Findings(vec![Finding::error(
            &source.paths[0],
            format!("cannot listen for SIGHUP: {e}"),
        )])
    })?;
    loop {
        let generation = shutdown.child_token();
        let running = run(queues, options.clone(), generation.clone());
        tokio::pin!(running);
        let next = loop {
            tokio::select! {
                result = &mut running => return result.map(|_| ()),
                _ = hangups.recv() => {
                    info!("SIGHUP: reloading the queue files");
                    match validated(&source, &options).await {
                        Ok(next) => break next,
                        Err(findings) => {
                            for finding in &findings.0 {
                                error!(%finding, "reload refused; the queues keep running as they were");
                            }
                        }
                    }
                }
            }
        };
        generation.cancel();
        running.await?;
        if shutdown.is_cancelled() {
            return Ok(());
        }
        info!(queues = next.len(), "reloaded");
        queues = next;
    }
}

/// Loads the queue files again and prepares each queue's SQL on its database, so a
/// reload never swaps working queues for broken ones.
async fn validated(
    source: &QueueSource,
    options: &RunOptions,
) -> Result<Vec<QueueConfig>, Findings> {
    let queues = source.load()?;
    let mut findings = Vec::new();
    for queue in &queues {
        let url = queue
            .database_url
            .as_deref()
            .or(options.database_url.as_deref());
        let Some(opts) = url.and_then(|url| parse_database_url(url).ok()) else {
            continue; // `run` reports it, with the same words as at start.
        };
        match Session::open(queue, &opts).await {
            Ok(_) => {}
            Err(OpenError::Invalid(mut problems)) => findings.append(&mut problems),
            Err(OpenError::Unreachable(error)) => {
                warn!(queue = %queue.name, %error, "cannot check the reloaded queue now; it will wait for its database")
            }
        }
    }
    if findings.is_empty() {
        Ok(queues)
    } else {
        Err(Findings(findings))
    }
}
