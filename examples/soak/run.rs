//! One soak, start to end: set up, faults, drain, stop, check, report.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use base64::Engine;

use crate::checker::{self, Outcome};
use crate::data::{self, PWNED};
use crate::database;
use crate::deliveries;
use crate::fleet::{Fleet, Setup};
use crate::mariadb::MariaDb;
use crate::nemesis::{Kind, Nemesis, World};
use crate::options::Options;
use crate::queues;
use crate::receiver::Receiver;
use crate::report;
use crate::rng::{seed_from_clock, Rng};

/// tableq processes over the same queue files.
const PROCESSES: usize = 3;
/// How long the queues may take to drain once the faults have stopped.
const DRAIN_LIMIT: Duration = Duration::from_secs(180);

/// What the soak runs on.
struct Rig {
    /// The work directory: logs, the queue files, the receiver's log.
    dir: PathBuf,
    server: Arc<MariaDb>,
    url: String,
    receiver: Receiver,
    queues: PathBuf,
    fleet: Option<Fleet>,
}

/// Runs the soak; true if it passed. Its files are kept when it did not, or with
/// `--keep`.
pub async fn soak(options: &Options) -> anyhow::Result<bool> {
    let seed = options.seed.unwrap_or_else(seed_from_clock);
    println!(
        "soak: seed {seed} (--seed {seed} replays the faults), {} rows per queue, {} s of faults, \
         {PROCESSES} tableq processes, {} workers per queue each",
        options.rows, options.seconds, options.workers
    );
    let work = tempfile::Builder::new().prefix("tableq-soak-").tempdir()?;
    println!("soak: files in {}", work.path().display());
    let result = soak_in(options, seed, work.path().to_path_buf()).await;
    if !matches!(result, Ok(true)) || options.keep {
        println!("soak: kept {}", work.keep().display());
    }
    result
}

async fn soak_in(options: &Options, seed: u64, dir: PathBuf) -> anyhow::Result<bool> {
    let (mut rig, setup) = rig(options, seed, dir).await?;
    let producer = tokio::spawn(data::produce(
        rig.url.clone(),
        options.rows,
        options.fill_time(),
    ));
    database::wait_for_rows(&rig.url).await?;
    tableq_check(&setup, &rig.url)?;
    let fleet = rig.fleet.insert(Fleet::start(setup, PROCESSES).await?);
    let mut nemesis = Nemesis::new(seed, &rig.dir.join("nemesis.log"))?;
    let mut world = World {
        fleet,
        server: rig.server.clone(),
        receiver: &rig.receiver,
        queues: rig.queues.clone(),
        workers: options.workers,
    };
    nemesis
        .run(&mut world, Instant::now() + options.nemesis_time())
        .await?;
    producer.await?.context("the producer")?;
    drain(&mut rig, &mut nemesis.anomalies).await?;
    if let Some(fleet) = rig.fleet.as_mut() {
        stop(fleet, &mut nemesis.anomalies).await;
    }
    let outcome = check(&rig, options.rows, &nemesis).await?;
    report::faults(&nemesis.faults);
    report::rows(&outcome.queues);
    report::duplicates(&outcome.queues);
    Ok(report::verdict(&outcome))
}

/// The database, the receiver and the queue files; the tableq processes' setup.
async fn rig(options: &Options, seed: u64, dir: PathBuf) -> anyhow::Result<(Rig, Setup)> {
    let server = Arc::new(tokio::task::spawn_blocking(MariaDb::start).await?);
    let url = database::create(&server.base_url()).await?;
    let secret = signing_secret(seed);
    let receiver = Receiver::start(&dir.join("receiver.log"), &secret).await?;
    let queues = dir.join("queues");
    let logs = dir.join("logs");
    std::fs::create_dir_all(&queues)?;
    std::fs::create_dir_all(&logs)?;
    queues::write(&queues, &receiver.url(), options.workers)?;
    queues::write_script(&queues)?;
    let setup = Setup {
        bin: tableq_binary()?,
        queues: queues.clone(),
        logs,
        database: format!("127.0.0.1:{}", server.port()).parse()?,
        secret,
    };
    let rig = Rig {
        dir,
        server,
        url,
        receiver,
        queues,
        fleet: None,
    };
    Ok((rig, setup))
}

/// `TABLEQ_BIN`, or the tableq cargo built next to this example
/// (target/debug/examples/soak → target/debug/tableq).
fn tableq_binary() -> anyhow::Result<PathBuf> {
    let bin = match std::env::var_os("TABLEQ_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => std::env::current_exe()?
            .parent()
            .and_then(|examples| examples.parent())
            .context("where is the tableq binary?")?
            .join("tableq"),
    };
    anyhow::ensure!(
        bin.exists(),
        "no tableq binary at {} (cargo build first)",
        bin.display()
    );
    Ok(bin)
}

/// `tableq check --strict` on the queue files, once rows are there: it must find
/// them safe to run, without a warning.
fn tableq_check(setup: &Setup, url: &str) -> anyhow::Result<()> {
    let out = std::process::Command::new(&setup.bin)
        .args(["check", "--strict"])
        .arg(&setup.queues)
        .env("TABLEQ_DATABASE_URL", url)
        .env("SOAK_SIGNING_SECRET", &setup.secret)
        .env("SOAK_PROCESS", "check")
        .output()?;
    let said = String::from_utf8_lossy(&out.stdout);
    for line in said.lines() {
        println!("soak: tableq check: {line}");
    }
    anyhow::ensure!(out.status.success(), "tableq check failed: {}", out.status);
    Ok(())
}

/// A Standard Webhooks secret, from the seed.
fn signing_secret(seed: u64) -> String {
    let mut rng = Rng::new(seed ^ 0x005e_ed5e_c2e7);
    let key: Vec<u8> = (0..24).map(|_| rng.next() as u8).collect();
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

/// Waits for every queue to have nothing waiting (the faults have stopped), starting
/// again any process that exits meanwhile.
async fn drain(rig: &mut Rig, anomalies: &mut Vec<String>) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut conn = database::connect(&rig.url).await?;
    let mut said = Instant::now();
    loop {
        let waiting = database::waiting(&mut conn).await?;
        if waiting == 0 || started.elapsed() > DRAIN_LIMIT {
            println!(
                "soak: drained in {:.1?}: {waiting} rows waiting",
                started.elapsed()
            );
            return Ok(());
        }
        if said.elapsed() > Duration::from_secs(10) {
            println!("soak: draining: {waiting} rows waiting");
            said = Instant::now();
        }
        if let Some(fleet) = rig.fleet.as_mut() {
            anomalies.extend(fleet.restart_the_fallen().await?);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// SIGTERM to every process at once; each must exit 0.
async fn stop(fleet: &mut Fleet, anomalies: &mut Vec<String>) {
    for stop in fleet.terminate_all().await {
        let status = stop
            .status
            .map_or("still running".into(), |s| s.to_string());
        println!(
            "soak: {} stopped on SIGTERM: {status} after {:.1?}",
            stop.label, stop.took
        );
        if !stop.clean() {
            anomalies.push(format!("{} did not stop cleanly at the end", stop.label));
        }
    }
}

/// Reads the tables, the receiver's and the scripts' logs and the tableq
/// processes' logs: the figures, and what went wrong.
async fn check(rig: &Rig, rows: u64, nemesis: &Nemesis) -> anyhow::Result<Outcome> {
    let mut conn = database::connect(&rig.url).await?;
    let http = deliveries::http(&rig.dir.join("receiver.log"))?;
    let command = deliveries::command(&rig.queues, queues::COMMAND_LOG)?;
    let lease = deliveries::command(&rig.queues, queues::LEASE_LOG)?;
    let faults = &nemesis.faults;
    let lease_rows = data::rows_of("lease", rows);
    let queues = vec![
        checker::sql(&mut conn, rows).await?,
        checker::delivered(&mut conn, "http", rows, &http, faults).await?,
        checker::delivered(&mut conn, "command", rows, &command, faults).await?,
        checker::delivered(&mut conn, "lease", lease_rows, &lease, faults).await?,
    ];
    let read_only = faults.iter().filter(|f| f.kind == Kind::ReadOnly).count();
    Ok(Outcome {
        queues,
        said: checker::said(&mut conn, &rig.dir.join("logs")).await?,
        read_only_faults: read_only as u64,
        renewals: checker::renewals(&mut conn).await?,
        leaks: command.leaks + lease.leaks,
        pwned: rig.queues.join(PWNED).exists(),
        anomalies: nemesis.anomalies.clone(),
    })
}
