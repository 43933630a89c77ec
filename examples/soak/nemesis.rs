//! The nemesis: seeded faults, one at a time with a short pause between, drawn from
//! a shuffled deck of every kind so that each kind comes up once in every twelve
//! faults. Each fault undoes itself before the next (a killed process is started
//! again, a stall resumes, the endpoint answers again), and is logged — a line on
//! stdout, and a JSON line in `nemesis.log` with its start, end and the tableq
//! process it hit — so that the checker can attribute duplicates.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use serde::{Deserialize, Serialize};

use crate::clock::now;
use crate::database;
use crate::fleet::Fleet;
use crate::mariadb::MariaDb;
use crate::queues;
use crate::receiver::{Answer, Receiver};
use crate::rng::Rng;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Kind {
    Kill,
    Term,
    Hup,
    DatabaseKill,
    Stall,
    EndpointHang,
    EndpointError,
    EndpointReset,
    CommandFail,
    CommandHang,
    ReadOnly,
    SlowRenewal,
}

impl Kind {
    pub const ALL: [Kind; 12] = [
        Kind::Kill,
        Kind::Term,
        Kind::Hup,
        Kind::DatabaseKill,
        Kind::Stall,
        Kind::EndpointHang,
        Kind::EndpointError,
        Kind::EndpointReset,
        Kind::CommandFail,
        Kind::CommandHang,
        Kind::ReadOnly,
        Kind::SlowRenewal,
    ];

    pub fn describe(self) -> &'static str {
        match self {
            Kind::Kill => "kill -9 tableq, restart",
            Kind::Term => "SIGTERM tableq, restart",
            Kind::Hup => "SIGHUP tableq (reload)",
            Kind::DatabaseKill => "kill -9 MariaDB, restart",
            Kind::Stall => "network stall to MariaDB",
            Kind::EndpointHang => "endpoint hangs",
            Kind::EndpointError => "endpoint answers 500",
            Kind::EndpointReset => "endpoint resets",
            Kind::CommandFail => "command fails",
            Kind::CommandHang => "command hangs",
            Kind::ReadOnly => "MariaDB read-only (failover)",
            Kind::SlowRenewal => "lease renewals slow",
        }
    }
}

/// One fault as it happened. Times are seconds since the epoch ([`now`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Fault {
    pub kind: Kind,
    /// The tableq process it hit (`p2.3`), if it hit one.
    pub target: Option<String>,
    pub start: f64,
    pub end: f64,
    pub note: String,
}

/// What the nemesis acts on.
pub struct World<'a> {
    pub fleet: &'a mut Fleet,
    pub server: Arc<MariaDb>,
    pub receiver: &'a Receiver,
    /// The queue files' directory (SIGHUP rewrites them; the command switch is there).
    pub queues: PathBuf,
    pub workers: u32,
}

pub struct Nemesis {
    rng: Rng,
    deck: Vec<Kind>,
    log: File,
    started: f64,
    pub faults: Vec<Fault>,
    /// What went wrong besides the faults themselves (a process that exited by
    /// itself, a graceful stop that was not).
    pub anomalies: Vec<String>,
}

impl Nemesis {
    pub fn new(seed: u64, log: &Path) -> anyhow::Result<Nemesis> {
        Ok(Nemesis {
            rng: Rng::new(seed),
            deck: Vec::new(),
            log: File::create(log)?,
            started: now(),
            faults: Vec::new(),
            anomalies: Vec::new(),
        })
    }

    /// Faults until `until` (the last one may end a little later).
    pub async fn run(&mut self, world: &mut World<'_>, until: Instant) -> anyhow::Result<()> {
        while Instant::now() < until {
            let fallen = world.fleet.restart_the_fallen().await?;
            self.anomalies.extend(fallen);
            let kind = self.draw();
            let fault = self.apply(kind, world).await?;
            self.record(fault)?;
            let pause = self
                .rng
                .between(Duration::from_millis(500), Duration::from_millis(2500));
            let left = until.saturating_duration_since(Instant::now());
            tokio::time::sleep(pause.min(left)).await;
        }
        let fallen = world.fleet.restart_the_fallen().await?;
        self.anomalies.extend(fallen);
        Ok(())
    }

    fn draw(&mut self) -> Kind {
        if self.deck.is_empty() {
            self.deck = Kind::ALL.to_vec();
            self.rng.shuffle(&mut self.deck);
        }
        self.deck.pop().unwrap_or(Kind::Kill)
    }

    fn record(&mut self, fault: Fault) -> anyhow::Result<()> {
        println!(
            "{:>7.1}s  {:<26} {:<6} {}",
            fault.start - self.started,
            fault.kind.describe(),
            fault.target.as_deref().unwrap_or(""),
            fault.note
        );
        writeln!(self.log, "{}", serde_json::to_string(&fault)?)?;
        self.faults.push(fault);
        Ok(())
    }

    async fn apply(&mut self, kind: Kind, world: &mut World<'_>) -> anyhow::Result<Fault> {
        let start = now();
        let (target, note) = match kind {
            Kind::Kill => self.kill(world).await?,
            Kind::Term => self.term(world).await?,
            Kind::Hup => self.hup(world)?,
            Kind::DatabaseKill => self.database_kill(world).await?,
            Kind::Stall => self.stall(world).await,
            Kind::EndpointHang => self.endpoint(world, Answer::Hang).await,
            Kind::EndpointError => self.endpoint(world, Answer::Error).await,
            Kind::EndpointReset => self.reset(world).await,
            Kind::CommandFail => self.command(world, "fail").await?,
            Kind::CommandHang => self.command(world, "hang").await?,
            Kind::ReadOnly => self.read_only(world).await?,
            Kind::SlowRenewal => self.slow_renewal(world).await?,
        };
        Ok(Fault {
            kind,
            target,
            start,
            end: now(),
            note,
        })
    }
}

type Hit = (Option<String>, String);

/// The faults, each returning the process it hit and a note.
impl Nemesis {
    fn pick(&mut self, fleet: &Fleet) -> usize {
        self.rng.below(fleet.len() as u64) as usize
    }

    async fn kill(&mut self, world: &mut World<'_>) -> anyhow::Result<Hit> {
        let index = self.pick(world.fleet);
        let label = world.fleet.kill(index).await;
        let down = self
            .rng
            .between(Duration::from_millis(200), Duration::from_secs(2));
        tokio::time::sleep(down).await;
        let next = world.fleet.spawn(index).await?;
        Ok((Some(label), format!("down {down:.1?}, back as {next}")))
    }

    async fn term(&mut self, world: &mut World<'_>) -> anyhow::Result<Hit> {
        let index = self.pick(world.fleet);
        let stop = world.fleet.terminate(index).await;
        if !stop.clean() {
            self.anomalies.push(format!(
                "{} did not stop cleanly on SIGTERM: {:?} after {:.1?}",
                stop.label, stop.status, stop.took
            ));
        }
        let next = world.fleet.spawn(index).await?;
        let status = stop
            .status
            .map_or("still running".into(), |s| s.to_string());
        let note = format!("{status} after {:.1?}, back as {next}", stop.took);
        Ok((Some(stop.label), note))
    }

    /// Rewrites the queue files with another number of workers, then SIGHUP.
    fn hup(&mut self, world: &mut World<'_>) -> anyhow::Result<Hit> {
        let index = self.pick(world.fleet);
        let workers = (world.workers + self.rng.below(3) as u32)
            .saturating_sub(1)
            .max(1);
        queues::write(&world.queues, &world.receiver.url(), workers)?;
        let label = world.fleet.signal(index, libc::SIGHUP);
        Ok((
            Some(label),
            format!("queue files now have workers = {workers}"),
        ))
    }

    async fn database_kill(&mut self, world: &mut World<'_>) -> anyhow::Result<Hit> {
        let server = world.server.clone();
        tokio::task::spawn_blocking(move || server.kill()).await?;
        let down = self
            .rng
            .between(Duration::from_millis(500), Duration::from_secs(4));
        tokio::time::sleep(down).await;
        let server = world.server.clone();
        let began = Instant::now();
        tokio::task::spawn_blocking(move || server.start_again()).await?;
        let note = format!("down {down:.1?}, recovery took {:.1?}", began.elapsed());
        Ok((None, note))
    }

    async fn stall(&mut self, world: &mut World<'_>) -> Hit {
        let index = self.pick(world.fleet);
        let stalled = self
            .rng
            .between(Duration::from_secs(1), Duration::from_secs(8));
        world.fleet.proxy(index).stall();
        tokio::time::sleep(stalled).await;
        world.fleet.proxy(index).resume();
        (Some(world.fleet.label(index)), format!("for {stalled:.1?}"))
    }

    async fn endpoint(&mut self, world: &mut World<'_>, answer: Answer) -> Hit {
        let lasting = self
            .rng
            .between(Duration::from_secs(2), Duration::from_secs(5));
        world.receiver.answer(answer);
        tokio::time::sleep(lasting).await;
        world.receiver.answer(Answer::Ok);
        (None, format!("for {lasting:.1?}"))
    }

    async fn reset(&mut self, world: &mut World<'_>) -> Hit {
        let lasting = self
            .rng
            .between(Duration::from_secs(1), Duration::from_secs(3));
        world.receiver.reset();
        tokio::time::sleep(lasting).await;
        world.receiver.resume();
        (None, format!("for {lasting:.1?}"))
    }

    async fn command(&mut self, world: &mut World<'_>, mode: &str) -> anyhow::Result<Hit> {
        let lasting = self
            .rng
            .between(Duration::from_secs(2), Duration::from_secs(5));
        let switch = world.queues.join(queues::SWITCH);
        std::fs::write(&switch, format!("{mode}\n"))?;
        tokio::time::sleep(lasting).await;
        std::fs::write(&switch, "")?;
        Ok((None, format!("for {lasting:.1?}")))
    }

    /// `read_only` on for a few seconds, as a failover does, then off: the tableq
    /// processes' user is refused every write meanwhile.
    async fn read_only(&mut self, world: &mut World<'_>) -> anyhow::Result<Hit> {
        let lasting = self
            .rng
            .between(Duration::from_secs(2), Duration::from_secs(6));
        let began = Instant::now();
        as_root(world, "SET GLOBAL read_only = 1").await?;
        let took = began.elapsed();
        tokio::time::sleep(lasting).await;
        as_root(world, "SET GLOBAL read_only = 0").await?;
        Ok((
            None,
            format!("for {lasting:.1?} (setting it took {took:.1?})"),
        ))
    }

    /// Every lease renewal sleeps 1 to 5 s (on both sides of `database_timeout`)
    /// for a few seconds: the lease queue's `renew_sql` reads `soak_switch`.
    async fn slow_renewal(&mut self, world: &mut World<'_>) -> anyhow::Result<Hit> {
        let sleep = self
            .rng
            .between(Duration::from_secs(1), Duration::from_secs(5));
        let lasting = self
            .rng
            .between(Duration::from_secs(3), Duration::from_secs(8));
        let set = |seconds: f64| format!("UPDATE soak_switch SET renew_sleep = {seconds}");
        as_root(world, &set(sleep.as_secs_f64())).await?;
        tokio::time::sleep(lasting).await;
        as_root(world, &set(0.0)).await?;
        Ok((None, format!("{sleep:.1?} each, for {lasting:.1?}")))
    }
}

/// Runs `sql` on the soak's database as root (who writes through `read_only`).
async fn as_root(world: &World<'_>, sql: &str) -> anyhow::Result<()> {
    let url = format!("{}/{}", world.server.base_url(), database::NAME);
    let mut conn = database::connect(&url).await?;
    conn.query_drop(sql).await?;
    conn.disconnect().await.ok();
    Ok(())
}
