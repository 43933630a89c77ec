//! The real tableq binary, as the benchmark runs it: which build, a queue file for
//! an email table, its command line and environment, and one drain of the `email`
//! table with `run --stop-when-empty`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::ensure;

use crate::claim::Claim;
use crate::email;
use crate::engine::Sample;
use crate::measure::{self, Exit, Process};
use crate::server::Bench;

/// `TABLEQ_BIN`, or the binary cargo built next to this benchmark.
pub fn binary() -> anyhow::Result<PathBuf> {
    let bin = std::env::var_os("TABLEQ_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_tableq")));
    ensure!(bin.exists(), "no tableq binary at {}", bin.display());
    Ok(bin)
}

/// tableq drains the `email` table of its `n` rows: the real binary,
/// `run --stop-when-empty`.
pub async fn drain(
    bench: &mut Bench,
    claim: Claim,
    workers: usize,
    batch: usize,
    n: u64,
) -> anyhow::Result<Sample> {
    drain_with(bench, &queue_file("email", claim, workers, batch), n).await
}

/// tableq drains the `email` table of its `n` rows with the queue file `queue`.
pub async fn drain_with(bench: &mut Bench, queue: &str, n: u64) -> anyhow::Result<Sample> {
    bench.runs += 1;
    let file = bench.dir.path().join(format!("email-{}.toml", bench.runs));
    std::fs::write(&file, queue)?;
    let log = bench.dir.path().join(format!("tableq-{}.log", bench.runs));
    let before = bench.probe.snapshot().await?;
    let process = start(bench, &[&"run", &"--stop-when-empty", &file], &log)?;
    let exit = process.wait().await?;
    let after = bench.probe.snapshot().await?;
    let delta = bench.probe.delta(&before, &after);
    ensure_success("tableq", &exit, &log)?;
    email::verify_sent(&mut bench.admin, n).await?;
    Ok(Sample::new(
        n,
        exit.wall.as_secs_f64(),
        exit.cpu,
        Some(exit.max_rss_kb),
        &delta,
    ))
}

/// A queue named after `table` that marks each item sent with an SQL action.
pub fn queue_file(table: &str, claim: Claim, workers: usize, batch: usize) -> String {
    let action = format!("UPDATE {table} SET status = 'sent' WHERE id = :id");
    queue_file_with(table, claim, workers, batch, "item", &action)
}

/// The same queue in batch scope: one UPDATE per batch, joined with `:batch`.
pub fn set_based_queue_file(table: &str, claim: Claim, workers: usize, batch: usize) -> String {
    let action = format!(
        "UPDATE {table} JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id BIGINT PATH '$.id')) AS b \
         USING (id) SET {table}.status = 'sent'"
    );
    queue_file_with(table, claim, workers, batch, "batch", &action)
}

fn queue_file_with(
    table: &str,
    claim: Claim,
    workers: usize,
    batch: usize,
    scope: &str,
    action: &str,
) -> String {
    format!(
        r#"name = "{table}"
workers = {workers}
batch = {batch}
scope = "{scope}"
poll_interval = "1s"
select = "{select}"
key = "id"

[action]
type = "sql"
sql = "{action}"
"#,
        select = claim.select(table)
    )
}

/// Starts tableq with `args` on the benchmark's database, its output in `log`.
pub fn start(bench: &Bench, args: &[&dyn AsRef<OsStr>], log: &Path) -> anyhow::Result<Process> {
    let mut cmd = Command::new(&bench.bin);
    cmd.args(args.iter().map(|a| a.as_ref()))
        .env("TABLEQ_DATABASE_URL", &bench.url)
        .env("TABLEQ_LOG", "warn")
        .env_remove("DATABASE_URL")
        .env_remove("TABLEQ_LOG_FORMAT")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(log)?)
        .stderr(std::fs::File::create(log)?);
    Ok(measure::spawn(cmd)?)
}

/// Fails unless tableq (`what`) exited with status 0; the error holds its `log`.
pub fn ensure_success(what: &str, exit: &Exit, log: &Path) -> anyhow::Result<()> {
    ensure!(
        exit.code == Some(0),
        "{what} exited with {:?}: {}",
        exit.code,
        std::fs::read_to_string(log).unwrap_or_default()
    );
    Ok(())
}
