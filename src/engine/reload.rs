//! The daemon around [`run`]: stop signals, and SIGHUP reloading the queue files.
//!
//! A reload loads and validates the new files first; if they are wrong, the error is
//! logged and the queues keep running as they were. Otherwise the running queues
//! stop claiming, finish what is in flight (bounded by the shutdown timeout), and
//! the new ones start.

use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::config::{LoadError, QueueConfig, QueueSource};
use crate::db::{OpenError, Session};
use crate::diagnostic::{Finding, Findings};
use crate::engine::supervisor::{build_actions, resolve_databases, run, RunOptions};

/// Runs `queues` until `shutdown`, reloading them from `source` on every SIGHUP.
/// Only the first start can fail the process: a reload that cannot start goes back
/// to the queues that ran before it.
pub async fn run_with_reload(
    source: QueueSource,
    queues: Vec<QueueConfig>,
    options: RunOptions,
    shutdown: CancellationToken,
) -> Result<(), Findings> {
    let mut hangups = signal(SignalKind::hangup()).map_err(|e| {
        Findings(vec![Finding::error(
            &source.paths[0],
            format!("cannot listen for SIGHUP: {e}"),
        )])
    })?;
    let mut current = queues;
    // The queues that ran before `current`, while `current` has not started yet.
    let mut fallback: Option<Vec<QueueConfig>> = None;
    loop {
        let generation = shutdown.child_token();
        let running = run(current.clone(), options.clone(), generation.clone());
        tokio::pin!(running);
        let (next, still_running) = loop {
            tokio::select! {
                result = &mut running => match (result, fallback.take()) {
                    (Ok(_), _) => return Ok(()),
                    (Err(findings), None) => return Err(findings),
                    (Err(findings), Some(previous)) => {
                        for finding in &findings.0 {
                            error!(%finding, "the reloaded queues could not start; going back to the ones before");
                        }
                        break (previous, false);
                    }
                },
                _ = hangups.recv() => {
                    info!("SIGHUP: reloading the queue files");
                    match validated(&source, &options).await {
                        Ok(next) => break (next, true),
                        Err(findings) => {
                            for finding in &findings.0 {
                                error!(%finding, "reload refused; the queues keep running as they were");
                            }
                        }
                    }
                }
            }
        };
        if still_running {
            generation.cancel();
            // A generation told to stop always ends with Ok.
            let _ = running.await;
            if shutdown.is_cancelled() {
                return Ok(());
            }
            info!(queues = next.len(), "reloaded");
            fallback = Some(std::mem::replace(&mut current, next));
        } else {
            current = next;
        }
    }
}

/// Loads the queue files again and prepares each queue's SQL on its database, so a
/// reload never swaps working queues for broken ones.
async fn validated(
    source: &QueueSource,
    options: &RunOptions,
) -> Result<Vec<QueueConfig>, Findings> {
    let queues = source
        .load(&|name| std::env::var(name).ok())
        .map_err(|e| match e {
            LoadError::Files(findings) => findings,
            unknown => Findings(vec![Finding::error(&source.paths[0], unknown.to_string())]),
        })?;
    let resolved = resolve_databases(queues.clone(), options.database_url.as_deref())?;
    build_actions(&resolved)?;
    let mut findings = Vec::new();
    for (queue, database) in &resolved {
        match Session::open(queue, database).await {
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
