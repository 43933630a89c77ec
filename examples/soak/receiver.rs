//! The webhook receiver: a loopback web server (tests/it/support/web.rs) that checks
//! each request's Standard Webhooks signature and logs it — when, the row's key, its
//! `webhook-id`, the tableq process that sent it, what it answered, a fingerprint of
//! the values — one JSON line per request. The nemesis makes it answer 500 or hang;
//! a proxy in front of it (tests/it/support/proxy.rs) resets connections.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::clock::now;
use crate::data::{fingerprint, is_poison};
use crate::proxy::StallingProxy;
use crate::web::{Recorded, Reply, WebServer};

/// How long a hanging answer takes: well past the HTTP action's timeout.
const HANG: Duration = Duration::from_secs(6);

/// What the receiver answers while the nemesis leaves it alone, and otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Ok = 0,
    Error = 1,
    Hang = 2,
}

/// One request as the receiver logged it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    pub at: f64,
    pub key: String,
    pub webhook_id: String,
    /// The `x-soak-process` header: which tableq process, which start of it.
    pub process: String,
    /// `ok` (200), `error` (500), `hang` (200, after the sender gave up) or
    /// `poison` (422, for a poison row).
    pub answer: String,
    pub signed: bool,
    /// [`fingerprint`] of the label, body and raw values in the JSON body.
    pub print: String,
}

impl Request {
    /// Whether the receiver acted on it: it meant to answer 2xx.
    pub fn accepted(&self) -> bool {
        self.answer == "ok" || self.answer == "hang"
    }
}

pub struct Receiver {
    proxy: StallingProxy,
    answer: Arc<AtomicU8>,
    _server: WebServer,
}

impl Receiver {
    /// Starts the server, logging to `log`, verifying with `secret`; and its proxy.
    pub async fn start(log: &Path, secret: &str) -> anyhow::Result<Receiver> {
        let answer = Arc::new(AtomicU8::new(Answer::Ok as u8));
        let verifier = standardwebhooks::Webhook::new(secret)?;
        let file = Mutex::new(File::create(log)?);
        let mode = answer.clone();
        let server = WebServer::start(move |request: &Recorded| {
            let logged = log_entry(request, &verifier, mode.load(Ordering::Relaxed));
            if let Ok(line) = serde_json::to_string(&logged) {
                let _ = writeln!(file.lock().unwrap(), "{line}");
            }
            reply(&logged.answer)
        })
        .await;
        let proxy = StallingProxy::start(server.addr).await;
        Ok(Receiver {
            proxy,
            answer,
            _server: server,
        })
    }

    /// The base URL tableq posts to (through the proxy).
    pub fn url(&self) -> String {
        format!("http://{}", self.proxy.addr)
    }

    pub fn answer(&self, answer: Answer) {
        self.answer.store(answer as u8, Ordering::Relaxed);
    }

    /// Resets every connection to the receiver until [`Receiver::resume`].
    pub fn reset(&self) {
        self.proxy.reset();
    }

    pub fn resume(&self) {
        self.proxy.resume();
    }
}

fn log_entry(request: &Recorded, verifier: &standardwebhooks::Webhook, mode: u8) -> Request {
    let key = request
        .uri
        .path()
        .strip_prefix("/hook/")
        .unwrap_or("")
        .to_string();
    let poison = key.parse::<u64>().is_ok_and(is_poison);
    let answer = match mode {
        _ if poison => "poison",
        1 => "error",
        2 => "hang",
        _ => "ok",
    };
    Request {
        at: now(),
        print: print_of(&request.body, &key),
        webhook_id: request.header("webhook-id").to_string(),
        process: request.header("x-soak-process").to_string(),
        answer: answer.to_string(),
        signed: verifier.verify(&request.body, &request.headers).is_ok(),
        key,
    }
}

/// The fingerprint of the body's values, or what is wrong with the body.
fn print_of(body: &[u8], key: &str) -> String {
    let Ok(json) = serde_json::from_slice::<Json>(body) else {
        return "not JSON".to_string();
    };
    if json["id"].as_u64().map(|id| id.to_string()).as_deref() != Some(key) {
        return format!("id {} under key {key}", json["id"]);
    }
    fingerprint(&[
        json["label"].clone(),
        json["body"].clone(),
        json["raw"].clone(),
    ])
}

fn reply(answer: &str) -> Reply {
    match answer {
        "poison" => Reply::status(422).body("poison row"),
        "error" => Reply::status(500).body("the nemesis says 500"),
        "hang" => Reply::status(200).after(HANG),
        _ => Reply::status(200),
    }
}
