//! Part 4, webhooks: tableq delivering the email table to a local HTTP endpoint that
//! answers at once (204), `workers = 8`, at `batch = 1` and `batch = 50`, runs
//! alternated. What it shows is tableq's own cost per delivery, the endpoint being
//! free.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::ensure;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;

use crate::claim::Claim;
use crate::engine::Sample;
use crate::measure::{median, table, thousands};
use crate::options::Options;
use crate::server::Bench;
use crate::{daemon, email};

pub const WORKERS: usize = 8;
pub const BATCHES: [usize; 2] = [1, 50];

/// What the part measured: the samples of each batch size.
pub struct Http {
    pub rows: u64,
    pub runs: Vec<(usize, Vec<Sample>)>,
}

pub async fn measure(bench: &mut Bench, options: &Options) -> anyhow::Result<Http> {
    let n = options.rows;
    eprintln!(
        "==> http: {n} rows, {WORKERS} workers, batch {BATCHES:?}, {} repetitions",
        options.reps
    );
    let (endpoint, received) = endpoint().await?;
    let mut runs: Vec<(usize, Vec<Sample>)> = BATCHES.iter().map(|&b| (b, Vec::new())).collect();
    for _ in 0..options.reps {
        for (batch, samples) in runs.iter_mut() {
            email::fresh(&mut bench.admin, Claim::Forced, n).await?;
            let before = received.load(Ordering::Relaxed);
            let sample = daemon::drain_with(bench, &queue_file(&endpoint, *batch), n).await?;
            let delivered = received.load(Ordering::Relaxed) - before;
            ensure!(
                delivered == n,
                "the endpoint received {delivered} requests for {n} rows"
            );
            eprintln!(
                "    http b={batch:<3} {:>9} deliveries/s",
                thousands(n as f64 / sample.wall)
            );
            samples.push(sample);
        }
    }
    Ok(Http { rows: n, runs })
}

/// A local endpoint that answers every POST with 204 at once; counts them.
async fn endpoint() -> anyhow::Result<(String, Arc<AtomicU64>)> {
    let received = Arc::new(AtomicU64::new(0));
    let counter = received.clone();
    let app = Router::new().route(
        "/deliver/{id}",
        post(move || {
            counter.fetch_add(1, Ordering::Relaxed);
            async { StatusCode::NO_CONTENT }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/deliver/{{id}}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((url, received))
}

fn queue_file(url: &str, batch: usize) -> String {
    format!(
        r#"name = "email"
workers = {WORKERS}
batch = {batch}
poll_interval = "1s"
select = "{select}"
key = "id"

[action]
type = "http"
url = "{url}"

[on_success]
sql = "UPDATE email SET status = 'sent' WHERE id = :id"
"#,
        select = Claim::Forced.select("email")
    )
}

pub fn report(results: &Http) -> String {
    let rows: Vec<Vec<String>> = results
        .runs
        .iter()
        .map(|(batch, samples)| {
            let per_second: Vec<f64> = samples.iter().map(|s| s.items as f64 / s.wall).collect();
            let cpu: Vec<f64> = samples
                .iter()
                .map(|s| s.cpu / s.items as f64 * 1000.0)
                .collect();
            let rss = samples
                .iter()
                .filter_map(|s| s.max_rss_kb)
                .max()
                .unwrap_or(0);
            let statements: Vec<f64> = samples
                .iter()
                .map(|s| s.questions as f64 / s.items as f64)
                .collect();
            vec![
                batch.to_string(),
                thousands(median(&per_second)),
                format!("{:.3}", median(&cpu)),
                format!("{:.1} MB", rss as f64 / 1024.0),
                format!("{:.2}", median(&statements)),
            ]
        })
        .collect();
    let mut out = format!(
        "\n## HTTP: {} rows to a local endpoint that answers 204 at once, {WORKERS} workers\n\n",
        results.rows
    );
    out.push_str(&table(
        &[
            "batch",
            "deliveries/s",
            "tableq CPU s/1k",
            "peak RSS",
            "statements/item",
        ],
        &rows,
    ));
    out
}
