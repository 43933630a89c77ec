//! Trace export over OTLP/HTTP (protobuf), when `run --otlp-endpoint` (or the
//! standard `OTEL_EXPORTER_OTLP_*` variables) asks for it. A worker hands its
//! turn's spans ([`super::spans`]) to a bounded buffer and goes on: it never waits
//! for the collector. One task sends them in batches; while the collector is away,
//! slow or the buffer full, spans are dropped and counted
//! (`tableq_trace_spans_dropped_total`) rather than held.
//!
//! Like the log subscriber, the exporter is one per process, installed once by
//! `run`; nothing is exported (and nothing collected for it) without it.

use std::sync::{LazyLock, Mutex, OnceLock};
use std::time::Duration;

use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use prometheus_client::metrics::counter::Counter;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::lock::lock;

/// Spans waiting to be sent, at most; beyond, they are dropped.
const BUFFER: usize = 4096;
/// Spans in one export request, at most.
const BATCH: usize = 512;
/// How long a span waits for others to share its request.
const LINGER: Duration = Duration::from_secs(1);
/// How long one export may take, retries included, before its spans are dropped.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The process's exporter, once `run` started one.
static EXPORTER: OnceLock<Exporter> = OnceLock::new();

/// Spans dropped: the buffer was full, or the collector did not take them.
static DROPPED: LazyLock<Counter> = LazyLock::new(Counter::default);

struct Exporter {
    spans: mpsc::Sender<SpanData>,
    stop: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
}

/// Where traces go: `--otlp-endpoint` (a base URL, `/v1/traces` added), else
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (as is), else `OTEL_EXPORTER_OTLP_ENDPOINT`
/// (a base URL); `None`: no export. Empty values count as unset.
pub fn endpoint(flag: Option<&str>, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let set = |value: Option<String>| value.filter(|v| !v.trim().is_empty());
    let base = |url: String| format!("{}/v1/traces", url.trim().trim_end_matches('/'));
    if let Some(flag) = set(flag.map(str::to_string)) {
        return Some(base(flag));
    }
    if let Some(traces) = set(env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) {
        return Some(traces.trim().to_string());
    }
    set(env("OTEL_EXPORTER_OTLP_ENDPOINT")).map(base)
}

/// The `service.name` spans carry: `OTEL_SERVICE_NAME`, else `tableq`.
pub fn service_name(env: &dyn Fn(&str) -> Option<String>) -> String {
    env("OTEL_SERVICE_NAME")
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "tableq".to_string())
}

/// Starts exporting to `url` (the full URL of the traces endpoint) as `service`.
/// Called once, in the runtime; a second call changes nothing.
pub fn start(url: &str, service: &str) -> Result<(), String> {
    // reqwest is built without a default crypto provider: ring, as for MySQL.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .user_agent(concat!("tableq/", env!("CARGO_PKG_VERSION")))
        .timeout(EXPORT_TIMEOUT)
        .no_proxy()
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_endpoint(url)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| e.to_string())?;
    exporter.set_resource(
        &Resource::builder_empty()
            .with_service_name(service.to_string())
            .build(),
    );
    let (spans, received) = mpsc::channel(BUFFER);
    let stop = CancellationToken::new();
    let task = tokio::spawn(send(exporter, received, stop.clone(), url.to_string()));
    let _ = EXPORTER.set(Exporter {
        spans,
        stop,
        task: Mutex::new(Some(task)),
    });
    info!(endpoint = %url, service, "exporting a trace span per item over OTLP");
    Ok(())
}

/// Whether spans are exported: worth collecting what they tell.
pub fn enabled() -> bool {
    EXPORTER.get().is_some()
}

/// Hands `spans` on to be sent, never waiting: those the buffer has no room for
/// are dropped and counted.
pub fn export(spans: Vec<SpanData>) {
    let Some(exporter) = EXPORTER.get() else {
        return;
    };
    for span in spans {
        if exporter.spans.try_send(span).is_err() {
            DROPPED.inc();
        }
    }
}

/// The counter of spans dropped, for `/metrics` (0 without an exporter).
pub fn dropped() -> Counter {
    DROPPED.clone()
}

/// At shutdown: sends what is buffered, waiting at most `within`.
pub async fn finish(within: Duration) {
    let Some(exporter) = EXPORTER.get() else {
        return;
    };
    exporter.stop.cancel();
    let task = lock(&exporter.task).take();
    if let Some(mut task) = task {
        if tokio::time::timeout(within, &mut task).await.is_err() {
            // Not left running past shutdown, holding its connection.
            task.abort();
            warn!("the last trace spans were not sent in time; they are dropped");
        }
    }
}

/// The sending task: a batch once `BATCH` spans wait or the first waited `LINGER`;
/// at `stop`, what is left, once.
async fn send(
    exporter: opentelemetry_otlp::SpanExporter,
    mut received: mpsc::Receiver<SpanData>,
    stop: CancellationToken,
    url: String,
) {
    let mut failing = false;
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let stopping = tokio::select! {
            _ = stop.cancelled() => true,
            n = received.recv_many(&mut batch, BATCH) => n == 0,
        };
        if !stopping {
            let more = async {
                let mut room = BATCH.saturating_sub(batch.len());
                while room > 0 && received.recv_many(&mut batch, room).await > 0 {
                    room = BATCH.saturating_sub(batch.len());
                }
            };
            let _ = tokio::time::timeout(LINGER, more).await;
        } else {
            while batch.len() < BUFFER && received.try_recv().map(|s| batch.push(s)).is_ok() {}
        }
        if !batch.is_empty() {
            failing = exported(&exporter, std::mem::take(&mut batch), failing, &url).await;
        }
        if stopping {
            return;
        }
    }
}

/// Sends one batch; what the collector did not take is counted as dropped. Says
/// when export starts failing, and when it works again. Returns whether it failed.
async fn exported(
    exporter: &opentelemetry_otlp::SpanExporter,
    batch: Vec<SpanData>,
    failing: bool,
    url: &str,
) -> bool {
    let spans = batch.len() as u64;
    let result = tokio::time::timeout(EXPORT_TIMEOUT, exporter.export(batch)).await;
    let error = match result {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(_) => Some(format!(
            "no answer within {}",
            humantime::format_duration(EXPORT_TIMEOUT)
        )),
    };
    match error {
        None if failing => {
            info!(endpoint = %url, "exporting trace spans again");
            false
        }
        None => false,
        Some(error) => {
            DROPPED.inc_by(spans);
            if !failing {
                warn!(endpoint = %url, %error, "cannot export trace spans; they are dropped, and counted in tableq_trace_spans_dropped_total, until the collector takes them again");
            }
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_then_the_traces_variable_then_the_general_one() {
        let env = |name: &str| match name {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" => Some("http://t:4318/custom".to_string()),
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://g:4318/".to_string()),
            _ => None,
        };
        assert_eq!(
            endpoint(Some("http://f:4318"), &env).as_deref(),
            Some("http://f:4318/v1/traces")
        );
        assert_eq!(
            endpoint(None, &env).as_deref(),
            Some("http://t:4318/custom")
        );
        let general = |name: &str| env(name).filter(|_| name == "OTEL_EXPORTER_OTLP_ENDPOINT");
        assert_eq!(
            endpoint(None, &general).as_deref(),
            Some("http://g:4318/v1/traces")
        );
        assert_eq!(endpoint(Some(""), &|_| None), None);
        assert_eq!(service_name(&|_| None), "tableq");
    }
}
