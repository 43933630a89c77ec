//! The tableq processes: `tableq run` over the same queue files, each reaching the
//! database as the ordinary user (not root) through a loopback proxy of its own (so
//! the nemesis can stall one) and logging to a file of its own; killed (-9),
//! stopped (SIGTERM), reloaded (SIGHUP) and started again. Each start has a label,
//! `p2.3` for the third start of process 2, which its webhooks and commands carry
//! (`SOAK_PROCESS`), so a duplicate can be traced to the process that made it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::database::worker_url;
use crate::mariadb::spawn_tied_to_process;
use crate::proxy::StallingProxy;
use crate::queues::SHUTDOWN_TIMEOUT;

/// Where the processes find what they need.
pub struct Setup {
    pub bin: PathBuf,
    pub queues: PathBuf,
    pub logs: PathBuf,
    /// The database server's address (the proxies forward to it).
    pub database: SocketAddr,
    pub secret: String,
}

pub struct Fleet {
    setup: Setup,
    members: Vec<Member>,
}

struct Member {
    proxy: StallingProxy,
    child: Option<Child>,
    starts: u32,
}

/// How long a start may take to install its signal handlers.
const READY_LIMIT: Duration = Duration::from_secs(30);

/// How a graceful stop went.
#[derive(Debug)]
pub struct Stop {
    pub label: String,
    /// None: it had not exited when the soak gave up waiting (and killed it).
    pub status: Option<ExitStatus>,
    pub took: Duration,
}

impl Stop {
    pub fn clean(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
}

impl Fleet {
    /// Starts `count` processes.
    pub async fn start(setup: Setup, count: usize) -> anyhow::Result<Fleet> {
        let mut members = Vec::new();
        for _ in 0..count {
            members.push(Member {
                proxy: StallingProxy::start(setup.database).await,
                child: None,
                starts: 0,
            });
        }
        let mut fleet = Fleet { setup, members };
        for index in 0..count {
            fleet.spawn(index).await?;
        }
        Ok(fleet)
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// The label of process `index`'s current (or last) start.
    pub fn label(&self, index: usize) -> String {
        format!("p{}.{}", index + 1, self.members[index].starts)
    }

    /// Starts process `index` (again) and waits until it is ready for signals;
    /// returns the new start's label.
    pub async fn spawn(&mut self, index: usize) -> anyhow::Result<String> {
        self.members[index].starts += 1;
        let label = self.label(index);
        let mut log = self.log(index)?;
        writeln!(
            log,
            "==== soak: {label} starts at {:.3}",
            crate::clock::now()
        )?;
        let from = log.metadata()?.len();
        // The ordinary user: root would write through the nemesis's `read_only`.
        let url = worker_url(self.members[index].proxy.addr);
        let mut cmd = Command::new(&self.setup.bin);
        cmd.arg("run")
            .arg("--shutdown-timeout")
            .arg(humantime::format_duration(SHUTDOWN_TIMEOUT).to_string())
            .arg(&self.setup.queues)
            .env("TABLEQ_DATABASE_URL", url)
            .env("TABLEQ_LOG", "info")
            .env("NO_COLOR", "1")
            .env_remove("TABLEQ_LOG_FORMAT")
            .env("SOAK_SIGNING_SECRET", &self.setup.secret)
            .env("SOAK_PROCESS", &label)
            // Not for commands to see: their environment is an allowlist.
            .env("MYSQL_PWD", "not-for-commands")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        self.members[index].child = Some(spawn_tied_to_process(cmd)?);
        self.ready(index, from).await;
        Ok(label)
    }

    /// Waits until process `index` has logged, after byte `from` of its log, that a
    /// queue is starting: by then it has its SIGTERM and SIGHUP handlers (before,
    /// either signal would end it). Gives up quietly after [`READY_LIMIT`].
    async fn ready(&self, index: usize, from: u64) {
        let path = self.log_path(index);
        let deadline = Instant::now() + READY_LIMIT;
        while Instant::now() < deadline {
            let news = read_from(&path, from).unwrap_or_default();
            if news.contains("queue started") || news.contains("cannot connect") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn log(&self, index: usize) -> std::io::Result<File> {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(index))
    }

    fn log_path(&self, index: usize) -> PathBuf {
        self.setup.logs.join(format!("tableq-{}.log", index + 1))
    }

    /// Sends `signal` to process `index`; returns its label.
    pub fn signal(&self, index: usize, signal: i32) -> String {
        if let Some(child) = &self.members[index].child {
            unsafe { libc::kill(child.id() as i32, signal) };
        }
        self.label(index)
    }

    /// kill -9 of process `index`, waiting until it is gone; returns its label.
    pub async fn kill(&mut self, index: usize) -> String {
        let label = self.signal(index, libc::SIGKILL);
        wait_for_exit(&mut self.members[index].child, Duration::from_secs(10)).await;
        self.members[index].child = None;
        label
    }

    /// SIGTERM to process `index`, and its exit waited for.
    pub async fn terminate(&mut self, index: usize) -> Stop {
        let started = Instant::now();
        let label = self.signal(index, libc::SIGTERM);
        self.stopped(index, label, started).await
    }

    /// Stops every process with SIGTERM, all at once.
    pub async fn terminate_all(&mut self) -> Vec<Stop> {
        let started = Instant::now();
        let labels: Vec<String> = (0..self.len())
            .map(|index| self.signal(index, libc::SIGTERM))
            .collect();
        let mut stops = Vec::new();
        for (index, label) in labels.into_iter().enumerate() {
            stops.push(self.stopped(index, label, started).await);
        }
        stops
    }

    /// Waits for process `index`, sent SIGTERM at `started`, to exit: for the
    /// shutdown timeout and 15 s more, after which it is killed.
    async fn stopped(&mut self, index: usize, label: String, started: Instant) -> Stop {
        let limit = SHUTDOWN_TIMEOUT + Duration::from_secs(15);
        let status = wait_for_exit(&mut self.members[index].child, limit).await;
        if status.is_none() {
            self.kill(index).await;
        }
        self.members[index].child = None;
        Stop {
            label,
            status,
            took: started.elapsed(),
        }
    }

    /// Processes that ended by themselves (a crash): each described, and started again.
    pub async fn restart_the_fallen(&mut self) -> anyhow::Result<Vec<String>> {
        let mut fallen = Vec::new();
        for index in 0..self.len() {
            let exited = match self.members[index].child.as_mut() {
                Some(child) => child.try_wait()?,
                None => continue,
            };
            if let Some(status) = exited {
                fallen.push(format!("{} exited by itself: {status}", self.label(index)));
                self.spawn(index).await?;
            }
        }
        Ok(fallen)
    }

    pub fn proxy(&self, index: usize) -> &StallingProxy {
        &self.members[index].proxy
    }
}

/// The file at `path` from byte `from` on.
fn read_from(path: &std::path::Path, from: u64) -> std::io::Result<String> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(from))?;
    let mut news = Vec::new();
    file.read_to_end(&mut news)?;
    Ok(String::from_utf8_lossy(&news).into_owned())
}

/// Waits up to `limit` for `child` to exit; its status, or None if it is still running.
async fn wait_for_exit(child: &mut Option<Child>, limit: Duration) -> Option<ExitStatus> {
    let child = child.as_mut()?;
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}
