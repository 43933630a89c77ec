//! `[alerts]`: every copy running a queue with alerts looks at it every few
//! seconds, in one transaction under the lock of the queue's rows of
//! `tableq_alerts` (`db::history::alerts`): it reads the queue afresh, and writes a
//! state change when what it saw disagrees with the row. Only the copy whose
//! transaction changed the row sends ("firing", or "resolved" when it clears), so a
//! breach is told once however many copies see it; a send that failed is taken up
//! by whichever copy next finds the row changed but unsent.
//!
//! - [`decide`]: what to do with one alert after a look (pure).
//! - [`message`]: the message, as JSON or for Slack.
//! - [`webhook`]: the POST, by the http kind's rules.

pub mod decide;
pub mod message;
pub mod webhook;

use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, info, warn};

use crate::backoff::{doubled, jitter};
use crate::config::queue::alerts::{AlertsConfig, Condition};
use crate::db::history::alerts::{AlertState, AlertsTable, Flip, Look};
use crate::db::DbError;
use crate::engine::policy::retry::sleep_unless_stopped;
use crate::engine::queue::QueueRuntime;
use crate::telemetry::log::throttle::Throttle;
use crate::telemetry::metrics::process::hostname;
use decide::{seen, step, Seen, Step};
use message::Message;
use webhook::Webhook;

/// How often each copy looks (jittered: between half of it and all of it).
const EVERY: Duration = Duration::from_secs(5);
/// How long the copy that is to send has before another copy may: the webhook's
/// timeout and a margin.
const HOLD: Duration = Duration::from_secs(45);
/// The first wait before a failed send is tried again; it doubles up to
/// [`MOST_BETWEEN_SENDS`].
const FIRST_RETRY: Duration = Duration::from_secs(5);
const MOST_BETWEEN_SENDS: Duration = Duration::from_secs(300);

/// What one copy needs to look at a queue's alerts and tell them.
struct Watcher {
    queue: Arc<QueueRuntime>,
    alerts: AlertsConfig,
    webhook: Webhook,
    table: AlertsTable,
    host: String,
    /// A failing look or send, said once a minute.
    failing: Throttle,
}

/// Looks at `queue`'s alerts every few seconds until it stops; returns at once
/// without `[alerts]`.
pub async fn watch(queue: Arc<QueueRuntime>) {
    let Some(alerts) = queue.config.alerts.clone() else {
        return;
    };
    let webhook = match Webhook::new(&alerts) {
        Ok(webhook) => webhook,
        Err(e) => {
            warn!(queue = %queue.config.name, error = %e, "[alerts]: no alert can be sent");
            return;
        }
    };
    let table = AlertsTable::new(queue.database.clone(), queue.config.database_timeout);
    let mut watcher = Watcher {
        queue,
        alerts,
        webhook,
        table,
        host: hostname(),
        failing: Throttle::default(),
    };
    let abort = watcher.queue.abort.clone();
    loop {
        // A round under way when the queue stops is finished (a send is not cut
        // off), unless the shutdown timeout runs out first.
        tokio::select! {
            _ = abort.cancelled() => break,
            () = watcher.round() => {}
        }
        if !sleep_unless_stopped(&watcher.queue.stop, jitter(EVERY)).await {
            break;
        }
    }
}

impl Watcher {
    /// One look, then the messages it decided this copy sends.
    async fn round(&mut self) {
        let tell = match self.look().await {
            Ok(tell) => tell,
            Err(e) => {
                self.table.forget();
                self.warn(
                    "cannot look at the queue's alerts in tableq_alerts",
                    &e.to_string(),
                );
                return;
            }
        };
        debug!(queue = %self.queue.config.name, "alerts looked at");
        for state in tell {
            self.send(&state).await;
        }
    }

    /// The look's transaction: the rows locked, the queue read, each alert's step
    /// written. The states whose messages this copy sends.
    async fn look(&mut self) -> Result<Vec<AlertState>, DbError> {
        let conditions = &self.alerts.conditions;
        let names: Vec<&str> = conditions.iter().map(|c| c.name()).collect();
        let queue = &self.queue.config;
        let mut look = self.table.look(&queue.name, &names).await?;
        let seen_now = observe(&mut look, queue, conditions).await?;
        let mut tell = Vec::new();
        for (condition, seen_now) in conditions.iter().zip(seen_now) {
            let Some(state) = look.states.iter().find(|s| s.alert == condition.name()) else {
                continue;
            };
            let state = state.clone();
            match step(&state, seen_now) {
                Step::Nothing => {}
                Step::Flip { firing, tell: told } => {
                    let value = seen_now.map_or(0.0, |s| s.value);
                    let flip = Flip {
                        alert: condition.name(),
                        firing,
                        value,
                        limit: condition.limit(),
                        seen_by: &self.host,
                        tell: told,
                        hold: HOLD,
                    };
                    let now = look.flip(&flip).await?;
                    if told {
                        tell.push(now);
                    }
                }
                Step::TakeUp => {
                    look.take_up(&state.alert, HOLD).await?;
                    tell.push(state);
                }
            }
        }
        look.commit().await?;
        Ok(tell)
    }

    /// Sends `state`'s message, and writes down whether it went out.
    async fn send(&mut self, state: &AlertState) {
        let queue = self.queue.config.name.clone();
        let message = Message {
            queue: &queue,
            alert: &state.alert,
            firing: state.firing,
            value: state.value.unwrap_or_default(),
            limit: state.limit.unwrap_or_default(),
            host: &state.seen_by,
            at: state.since,
        };
        let body = message.body(self.alerts.format);
        let noted = match self.webhook.send(&body).await {
            Ok(()) => {
                info!(queue = %queue, alert = %state.alert, state = message.state(), "alert sent");
                self.table.sent(&queue, &state.alert, state.flips).await
            }
            Err(error) => {
                let wait = doubled(FIRST_RETRY, state.send_attempts + 1, MOST_BETWEEN_SENDS);
                let what = format!("alert {} ({}) not sent", state.alert, message.state());
                self.warn(&what, &error);
                self.table
                    .not_sent(&queue, &state.alert, state.flips, &error, wait)
                    .await
            }
        };
        if let Err(e) = noted {
            self.table.forget();
            self.warn(
                "cannot note an alert's send in tableq_alerts",
                &e.to_string(),
            );
        }
    }

    /// A WARN, once a minute at most.
    fn warn(&self, what: &str, error: &str) {
        if let Some(times) = self.failing.record() {
            warn!(queue = %self.queue.config.name, error, times, "{what}");
        }
    }
}

/// What the look sees of each condition, read under the lock.
async fn observe(
    look: &mut Look<'_>,
    queue: &crate::config::QueueConfig,
    conditions: &[Condition],
) -> Result<Vec<Option<Seen>>, DbError> {
    let reads_backlog = conditions
        .iter()
        .any(|c| matches!(c, Condition::OldestWaiting(_) | Condition::GaveUp));
    let backlog = match reads_backlog {
        true => Some(look.backlog(queue).await?),
        false => None,
    };
    let reads_failures = conditions
        .iter()
        .any(|c| matches!(c, Condition::FailedPerMinute(_)));
    let failed = match reads_failures {
        true => look.failed_last_minute().await?,
        false => None,
    };
    Ok(conditions
        .iter()
        .map(|c| seen(*c, backlog.as_ref(), failed))
        .collect())
}
