//! `type = "fastcgi"`: hand an item to a script run by a FastCGI server (PHP-FPM,
//! warm: opcache, the pool sized and supervised by its owners) — the row as a JSON
//! POST body, as `type = "http"` sends it, `TABLEQ_QUEUE` and `TABLEQ_KEY` as
//! params, and the script's `Status:` read as an HTTP answer.
//!
//! - [`config`]: its `[action]` table — the address, the script, signing.
//! - `record`: the protocol (requests, answers, GET_VALUES).
//! - `pool`: the connections kept between runs (FCGI_KEEP_CONN).
//! - `judge`: what an answer, or its absence, means.
//! - `probe`: what `check` finds at the address; `settings`: what the pool does
//!   with PHP's errors, asked of PHP there.

pub mod config;
mod judge;
mod pool;
mod probe;
mod record;
mod settings;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use tokio::sync::Semaphore;

use super::http::batch_id;
use super::http::signing::signature;
use super::progress::Progress;
use super::{Action, ActionError, External, Job, Outcome, Ready};
use crate::db::row_json::{item_json, items_json, keys_json};
use config::FastcgiAction;
use pool::Pool;
use record::{Answer, ExchangeError};
use settings::ErrorLog;

/// A FastCGI action with its kept connections, shared by all the queue's workers.
pub struct Fastcgi {
    config: Arc<FastcgiAction>,
    pool: Arc<Pool>,
    /// One permit per connection the server may hold at once (`max_connections`).
    slots: Arc<Semaphore>,
    /// Where the pool logs PHP's errors, asked of it once as the queue starts.
    error_log: ErrorLog,
    /// The address as messages say it.
    server: String,
}

impl Ready for FastcgiAction {
    fn ready(&self) -> Result<Action, ActionError> {
        Ok(Action::external(Fastcgi {
            server: self.address.to_string(),
            config: Arc::new(self.clone()),
            pool: Pool::new(),
            slots: Arc::new(Semaphore::new(self.max_connections)),
            error_log: ErrorLog::ask(self),
        }))
    }
}

impl External for Fastcgi {
    fn run<'a>(&'a self, job: Job<'a>) -> BoxFuture<'a, Outcome> {
        Box::pin(self.deliver(job))
    }

    fn slots(&self) -> Option<&Arc<Semaphore>> {
        Some(&self.slots)
    }

    fn waiting_for(&self) -> Option<String> {
        Some(format!(
            "for PHP-FPM at {} to answer (a slow script, or every child busy: see pm.max_children)",
            self.server
        ))
    }
}

impl Fastcgi {
    /// Sends the job: one item, its row as the body and its key in `TABLEQ_KEY`; or
    /// in batch scope the rows as a JSON array, their keys as a JSON array in
    /// `TABLEQ_KEYS`.
    async fn deliver(&self, job: Job<'_>) -> Outcome {
        let Some(first) = job.first() else {
            return Outcome::success();
        };
        let (body, key, id) = match job.batch {
            true => (
                items_json(job.items),
                ("TABLEQ_KEYS", keys_json(job.items).to_string()),
                batch_id(job.queue, job.items),
            ),
            false => (
                item_json(first),
                ("TABLEQ_KEY", first.key_text()),
                format!("{}_{}", job.queue, first.key_text()),
            ),
        };
        let body = match serde_json::to_vec(&body) {
            Ok(body) => body,
            Err(e) => return Outcome::failure(format!("cannot encode the row as JSON: {e}")),
        };
        let request = self.request(job.queue, key, &id, job.progress.as_deref(), &body);
        let progress = job.progress.clone();
        let mut heard = |chunk: &[u8]| hear(progress.as_deref(), chunk);
        match self.send(&request, &mut heard).await {
            Ok(answer) => {
                log_stderr(&answer.stderr);
                let error_log = match judge::died_silently(&answer) {
                    true => self.error_log.file().await,
                    false => None,
                };
                judge::judge(&answer, &self.server, &self.config, error_log)
            }
            Err(outcome) => outcome,
        }
    }

    /// The request's bytes: the CGI params a PHP script expects, tableq's own, the
    /// signature when there are signing keys, and the body.
    fn request(
        &self,
        queue: &str,
        key: (&str, String),
        id: &str,
        progress: Option<&Progress>,
        body: &[u8],
    ) -> Vec<u8> {
        let script = self.config.script.as_bytes();
        let length = body.len().to_string();
        let mut params: Vec<(&str, Vec<u8>)> = vec![
            ("GATEWAY_INTERFACE", b"CGI/1.1".to_vec()),
            ("SERVER_SOFTWARE", SOFTWARE.as_bytes().to_vec()),
            ("SERVER_PROTOCOL", b"HTTP/1.1".to_vec()),
            ("REQUEST_METHOD", b"POST".to_vec()),
            ("SCRIPT_FILENAME", script.to_vec()),
            ("SCRIPT_NAME", script.to_vec()),
            ("REQUEST_URI", script.to_vec()),
            ("CONTENT_TYPE", b"application/json".to_vec()),
            ("CONTENT_LENGTH", length.into_bytes()),
            ("TABLEQ_QUEUE", queue.as_bytes().to_vec()),
            (key.0, key.1.into_bytes()),
            ("HTTP_WEBHOOK_ID", id.as_bytes().to_vec()),
        ];
        if let Some(progress) = progress {
            let path = progress.path().as_os_str().as_encoded_bytes().to_vec();
            params.push(("TABLEQ_PROGRESS", path));
        }
        if !self.config.signing_keys.is_empty() {
            let timestamp = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let signed = signature(&self.config.signing_keys, id, timestamp, body);
            params.push(("HTTP_WEBHOOK_TIMESTAMP", timestamp.to_string().into_bytes()));
            params.push(("HTTP_WEBHOOK_SIGNATURE", signed.into_bytes()));
        }
        let pairs: Vec<(&str, &[u8])> = params.iter().map(|(n, v)| (*n, v.as_slice())).collect();
        record::request(&pairs, body)
    }

    /// Sends `request` on a kept connection, or a new one; the connection is kept
    /// again once its answer was read whole. A kept connection that fails before
    /// any answer (the server closed it just as it was taken) gets the request once
    /// more, on a new connection — and as the first may have reached a child, a
    /// new connection refused then is trouble downstream, not unreached.
    async fn send(
        &self,
        request: &[u8],
        heard: &mut (dyn FnMut(&[u8]) + Send),
    ) -> Result<Answer, Outcome> {
        let mut sent = false;
        if let Some(mut kept) = self.pool.take() {
            match record::exchange(&mut kept, request, heard).await {
                Ok(answer) => {
                    self.pool.give_back(kept);
                    return Ok(answer);
                }
                Err(ExchangeError::Io {
                    answered: false, ..
                }) => sent = true,
                Err(e) => return Err(judge::failed(&e, &self.server)),
            }
        }
        let mut conn = pool::connect(&self.config.address)
            .await
            .map_err(|e| match judge::cannot_connect(&e, &self.server) {
                unreached if !sent => unreached,
                refused => Outcome::downstream(refused.error.unwrap_or_default()),
            })?;
        let answer = record::exchange(&mut conn, request, heard)
            .await
            .map_err(|e| judge::failed(&e, &self.server))?;
        self.pool.give_back(conn);
        Ok(answer)
    }
}

/// What the request says it comes from.
const SOFTWARE: &str = concat!("tableq/", env!("CARGO_PKG_VERSION"));

/// Hears the `progress: …` messages of a chunk of the script's stderr (PHP's
/// `error_log("progress: 40%"); flush();`), for lease mode's `:progress`.
fn hear(progress: Option<&Progress>, chunk: &[u8]) {
    let Some(progress) = progress else {
        return;
    };
    for message in judge::messages(chunk) {
        progress.hear(message.as_bytes());
    }
}

/// What the script wrote to stderr besides its progress, said in the item's span:
/// PHP-FPM hands it to the client, as nginx logs it.
fn log_stderr(stderr: &[u8]) {
    for message in judge::messages(stderr) {
        if !message.starts_with("progress:") {
            tracing::warn!(stderr = %message, "the script wrote to stderr");
        }
    }
}
