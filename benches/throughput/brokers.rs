//! Part 5, brokers: tableq publishing the email table to the RabbitMQ and the NATS
//! JetStream this machine runs (127.0.0.1:5672, 127.0.0.1:4222) — each row one
//! persistent, confirmed message (a PubAck from a file-backed stream) — `workers =
//! 8`, at `batch = 1` and `batch = 100`, and at `batch = 100` in `scope = "batch"`
//! (publish the batch, then await every confirm), runs alternated. Beside the HTTP
//! part, it shows what the broker's acknowledgement costs per row. A queue or
//! stream of the benchmark's own, deleted at the end; each run is checked to have
//! put exactly one message per row into it.

use anyhow::{ensure, Context};
use async_nats::jetstream;
use lapin::options::{QueueDeclareOptions, QueueDeleteOptions, QueuePurgeOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ConnectionProperties};

use crate::claim::Claim;
use crate::engine::Sample;
use crate::measure::{median, table, thousands};
use crate::options::Options;
use crate::server::Bench;
use crate::{daemon, email};

pub const WORKERS: usize = 8;
const RABBITMQ_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
const NATS_URL: &str = "nats://127.0.0.1:4222";

/// One configuration: the kind, the batch size and the scope.
#[derive(Clone, Copy)]
struct Run {
    kind: &'static str,
    batch: usize,
    batch_scope: bool,
}

const RUNS: [Run; 6] = [
    Run::new("amqp", 1, false),
    Run::new("amqp", 100, false),
    Run::new("amqp", 100, true),
    Run::new("nats", 1, false),
    Run::new("nats", 100, false),
    Run::new("nats", 100, true),
];

impl Run {
    const fn new(kind: &'static str, batch: usize, batch_scope: bool) -> Run {
        Run {
            kind,
            batch,
            batch_scope,
        }
    }

    fn label(&self) -> String {
        let scope = if self.batch_scope {
            " (batch scope)"
        } else {
            ""
        };
        format!("{} b={}{scope}", self.kind, self.batch)
    }
}

/// What the part measured: the samples of each configuration.
pub struct Brokers {
    pub rows: u64,
    runs: Vec<(Run, Vec<Sample>)>,
}

/// Where the messages go, made for the benchmark and deleted after it.
struct Targets {
    channel: Channel,
    connection: Connection,
    queue: String,
    stream: jetstream::Context,
    subjects: String,
}

pub async fn measure(bench: &mut Bench, options: &Options) -> anyhow::Result<Brokers> {
    let n = options.rows;
    eprintln!(
        "==> brokers: {n} rows, {WORKERS} workers, amqp and nats (JetStream) at batch 1 and \
         100, {} repetitions",
        options.reps
    );
    let targets = Targets::create().await?;
    let mut runs: Vec<(Run, Vec<Sample>)> = RUNS.iter().map(|&r| (r, Vec::new())).collect();
    let measured = async {
        for _ in 0..options.reps {
            for (run, samples) in runs.iter_mut() {
                email::fresh(&mut bench.admin, Claim::Forced, n).await?;
                targets.empty().await?;
                let sample = daemon::drain_with(bench, &targets.queue_file(*run), n).await?;
                let held = targets.held(run.kind).await?;
                ensure!(held == n, "{}: {held} messages for {n} rows", run.label());
                eprintln!(
                    "    {:<22} {:>9} messages/s",
                    run.label(),
                    thousands(n as f64 / sample.wall)
                );
                samples.push(sample);
            }
        }
        Ok::<_, anyhow::Error>(())
    }
    .await;
    targets.delete().await;
    measured?;
    Ok(Brokers { rows: n, runs })
}

impl Targets {
    async fn create() -> anyhow::Result<Targets> {
        let suffix: String = (0..8).map(|_| fastrand::lowercase()).collect();
        let connection = Connection::connect(RABBITMQ_URL, ConnectionProperties::default())
            .await
            .context("connect to RabbitMQ on 127.0.0.1:5672 (guest/guest)")?;
        let channel = connection.create_channel().await?;
        let queue = format!("tableq-bench-{suffix}");
        let durable = QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        };
        channel
            .queue_declare(queue.as_str().into(), durable, FieldTable::default())
            .await?;
        let client = async_nats::connect(NATS_URL)
            .await
            .context("connect to NATS on 127.0.0.1:4222")?;
        let stream = jetstream::new(client);
        let subjects = format!("tableq_bench_{suffix}");
        stream
            .create_stream(jetstream::stream::Config {
                name: subjects.to_uppercase(),
                subjects: vec![format!("{subjects}.>")],
                storage: jetstream::stream::StorageType::File,
                ..Default::default()
            })
            .await
            .context("create a JetStream stream (is the server started with -js?)")?;
        Ok(Targets {
            channel,
            connection,
            queue,
            stream,
            subjects,
        })
    }

    /// Empties the queue and the stream before a run.
    async fn empty(&self) -> anyhow::Result<()> {
        self.channel
            .queue_purge(self.queue.as_str().into(), QueuePurgeOptions::default())
            .await?;
        let stream = self.stream.get_stream(self.subjects.to_uppercase()).await?;
        stream.purge().await?;
        Ok(())
    }

    /// How many messages the run left where `kind` publishes.
    async fn held(&self, kind: &str) -> anyhow::Result<u64> {
        if kind == "amqp" {
            let passive = QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            };
            // Every message was confirmed, so the queue counts it.
            let queue = self
                .channel
                .queue_declare(self.queue.as_str().into(), passive, FieldTable::default())
                .await?;
            return Ok(queue.message_count().into());
        }
        let mut stream = self.stream.get_stream(self.subjects.to_uppercase()).await?;
        Ok(stream.info().await?.state.messages)
    }

    /// The queue file of `run`. Its message ids are the run's own: the stream would
    /// drop a repeat of an earlier run's id within its duplicate window, purged or not.
    fn queue_file(&self, run: Run) -> String {
        let tag: String = (0..8).map(|_| fastrand::lowercase()).collect();
        let action = match run.kind {
            "amqp" => format!(
                "type = \"amqp\"\nurl = \"{RABBITMQ_URL}\"\nrouting_key = \"{}\"",
                self.queue
            ),
            _ => format!(
                "type = \"nats\"\nurl = \"{NATS_URL}\"\nsubject = \"{}.email\"\njetstream = true",
                self.subjects
            ),
        };
        let action = format!("{action}\nmessage_id = \"{tag}_{{id}}\"");
        let (scope, on_success) = match run.batch_scope {
            true => (
                "scope = \"batch\"\n",
                "UPDATE email JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id BIGINT PATH '$.id')) \
                 AS b USING (id) SET email.status = 'sent'",
            ),
            false => ("", "UPDATE email SET status = 'sent' WHERE id = :id"),
        };
        format!(
            r#"name = "email"
workers = {WORKERS}
batch = {batch}
{scope}poll_interval = "1s"
select = "{select}"
key = "id"

[action]
{action}

[on_success]
sql = "{on_success}"
"#,
            batch = run.batch,
            select = Claim::Forced.select("email")
        )
    }

    async fn delete(self) {
        let _ = self
            .channel
            .queue_delete(self.queue.as_str().into(), QueueDeleteOptions::default())
            .await;
        let _ = self.connection.close(200, "done".into()).await;
        let _ = self
            .stream
            .delete_stream(self.subjects.to_uppercase())
            .await;
    }
}

pub fn report(results: &Brokers) -> String {
    let rows: Vec<Vec<String>> = results
        .runs
        .iter()
        .map(|(run, samples)| {
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
            vec![
                run.label(),
                thousands(median(&per_second)),
                format!("{:.3}", median(&cpu)),
                format!("{:.1} MB", rss as f64 / 1024.0),
            ]
        })
        .collect();
    let mut out = format!(
        "\n## Brokers: {} rows to RabbitMQ (persistent, confirmed) and NATS JetStream \
         (PubAck, file storage) on this machine, {WORKERS} workers\n\n",
        results.rows
    );
    out.push_str(&table(
        &["kind, batch", "messages/s", "tableq CPU s/1k", "peak RSS"],
        &rows,
    ));
    out
}
