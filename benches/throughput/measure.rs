//! What the benchmark measures with: the server's status counters, a process's CPU
//! and memory from /proc, a child's CPU and peak RSS from wait4(2), medians, and a
//! plain text table to print them in.

use std::collections::BTreeMap;
use std::io;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::mariadb;

/// The server counters the benchmark reads. `Questions` counts every statement a
/// client sent (prepared executions included): round trips, near enough.
const STATUS: &str = "SHOW GLOBAL STATUS WHERE Variable_name LIKE 'Handler_read%' \
    OR Variable_name IN ('Questions', 'Com_select', 'Com_stmt_execute', 'Com_commit', \
    'Com_savepoint', 'Com_update')";

/// A snapshot (or a difference) of the server's global status counters.
#[derive(Debug, Clone, Default)]
pub struct Counters(BTreeMap<String, u64>);

impl Counters {
    pub fn get(&self, name: &str) -> u64 {
        self.0.get(name).copied().unwrap_or(0)
    }

    /// Rows the SQL layer asked the storage engine for, by any access method.
    pub fn handler_reads(&self) -> u64 {
        self.0
            .iter()
            .filter(|(name, _)| name.starts_with("Handler_read"))
            .map(|(_, v)| v)
            .sum()
    }

    /// The handler reads by kind, as `(letter, count)`: f = Handler_read_first (an
    /// index walked from its start), k = Handler_read_key (an index lookup: a range
    /// start or a row by id), n = Handler_read_next (a step along an index), r =
    /// Handler_read_rnd* (a table scan or sorted rows), o = the rest (prev, last, retry).
    pub fn handler_reads_by_kind(&self) -> [(char, u64); 5] {
        let first = self.get("Handler_read_first");
        let key = self.get("Handler_read_key");
        let next = self.get("Handler_read_next");
        let rnd = self.get("Handler_read_rnd")
            + self.get("Handler_read_rnd_next")
            + self.get("Handler_read_rnd_deleted");
        let other = self.handler_reads() - first - key - next - rnd;
        [
            ('f', first),
            ('k', key),
            ('n', next),
            ('r', rnd),
            ('o', other),
        ]
    }

    fn minus(&self, earlier: &Counters) -> Counters {
        Counters(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), v.saturating_sub(earlier.get(k))))
                .collect(),
        )
    }
}

/// The server as the benchmark watches it: its counters over a connection of its
/// own, and its process's CPU when the server runs on this machine.
pub struct Probe {
    conn: Conn,
    /// What one `SHOW GLOBAL STATUS` adds to the counters itself.
    overhead: Counters,
    server_pid: Option<i32>,
}

/// The server at one moment.
pub struct Snapshot {
    counters: Counters,
    server_cpu: Option<f64>,
}

/// What the server did between two snapshots.
pub struct Delta {
    pub counters: Counters,
    pub server_cpu: Option<f64>,
}

impl Probe {
    pub async fn new(mut conn: Conn, server_pid: Option<i32>) -> anyhow::Result<Probe> {
        let first = read_status(&mut conn).await?;
        let second = read_status(&mut conn).await?;
        Ok(Probe {
            conn,
            overhead: second.minus(&first),
            server_pid,
        })
    }

    pub async fn snapshot(&mut self) -> anyhow::Result<Snapshot> {
        Ok(Snapshot {
            counters: read_status(&mut self.conn).await?,
            server_cpu: self.server_pid.and_then(process_cpu),
        })
    }

    pub fn delta(&self, before: &Snapshot, after: &Snapshot) -> Delta {
        Delta {
            counters: after.counters.minus(&before.counters).minus(&self.overhead),
            server_cpu: before.server_cpu.zip(after.server_cpu).map(|(b, a)| a - b),
        }
    }
}

async fn read_status(conn: &mut Conn) -> anyhow::Result<Counters> {
    let rows: Vec<(String, String)> = conn.query(STATUS).await.context("SHOW GLOBAL STATUS")?;
    Ok(Counters(
        rows.into_iter()
            .filter_map(|(name, value)| Some((name, value.parse().ok()?)))
            .collect(),
    ))
}

/// A child process started by [`spawn`], to be reaped by [`Process::wait`].
pub struct Process {
    pub pid: i32,
    started: Instant,
}

/// How a child ended, and what it cost.
#[derive(Debug, Clone, Copy)]
pub struct Exit {
    /// The exit status, or `None` if a signal ended it.
    pub code: Option<i32>,
    pub wall: Duration,
    /// User + system CPU seconds.
    pub cpu: f64,
    /// Peak resident set size, in KiB.
    pub max_rss_kb: u64,
}

/// Starts `cmd`, tied to this process: it gets SIGKILL if the benchmark dies
/// (PR_SET_PDEATHSIG; call this from the main thread, which outlives the child).
pub fn spawn(mut cmd: Command) -> io::Result<Process> {
    mariadb::die_with_parent(&mut cmd);
    let started = Instant::now();
    let child = cmd.spawn()?;
    Ok(Process {
        pid: child.id() as i32,
        started,
    })
}

impl Process {
    /// Waits for the child with wait4(2), which reports its own CPU time and peak RSS.
    pub async fn wait(self) -> io::Result<Exit> {
        let Process { pid, started } = self;
        tokio::task::spawn_blocking(move || {
            let mut status = 0;
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            loop {
                let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
                if reaped == pid {
                    break;
                }
                let error = io::Error::last_os_error();
                if error.kind() != io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }
            Ok(Exit {
                code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
                wall: started.elapsed(),
                cpu: seconds(usage.ru_utime) + seconds(usage.ru_stime),
                max_rss_kb: usage.ru_maxrss.max(0) as u64,
            })
        })
        .await
        .map_err(io::Error::other)?
    }

    pub fn terminate(&self) {
        unsafe { libc::kill(self.pid, libc::SIGTERM) };
    }
}

fn seconds(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}

/// This process's own CPU seconds so far (all threads).
pub fn self_cpu() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// A process's CPU seconds so far (user + system), from /proc/PID/stat.
pub fn process_cpu(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after "PID (comm) ": state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (per_second > 0).then(|| ticks as f64 / per_second as f64)
}

/// A `Vm…` line of /proc/PID/status (`VmRSS`, `VmHWM`), in KiB.
pub fn process_memory_kb(pid: i32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The local `mariadbd`/`mysqld` listening on `port`, found by its command line.
pub fn find_server_pid(port: u16) -> Option<i32> {
    let wanted = format!("--port={port}");
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            let program = String::from_utf8_lossy(args.first()?);
            let is_server = program.ends_with("mariadbd") || program.ends_with("mysqld");
            (is_server && args.contains(&wanted.as_bytes())).then_some(pid)
        })
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// The `p`-th percentile (0–100) of `values`, nearest rank.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n => sorted[((p / 100.0 * n as f64).ceil() as usize).clamp(1, n) - 1],
    }
}

/// A markdown-style table: `headers`, then one line per row, columns padded.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, &width)| format!("{cell:<width$}"))
            .collect();
        format!("| {} |\n", padded.join(" | "))
    };
    let mut out = line(headers.iter().map(|h| h.to_string()).collect());
    out.push_str(&line(widths.iter().map(|&w| "-".repeat(w)).collect()));
    for row in rows {
        out.push_str(&line(row.clone()));
    }
    out
}

/// `12345.6` → `12,346`.
pub fn thousands(value: f64) -> String {
    if !value.is_finite() {
        return "-".into();
    }
    let digits = format!("{:.0}", value.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if value < -0.5 {
        out.insert(0, '-');
    }
    out
}
