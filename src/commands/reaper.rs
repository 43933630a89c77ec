//! tableq as a reaper. A command's grandchildren, orphaned when the command exits
//! or is killed at its deadline, are reparented to the nearest "child subreaper" —
//! tableq, once it has said it is one — or to PID 1, which tableq is in a container.
//! Either way they become tableq's zombies; this reaps them.
//!
//! tableq's own commands are its children too, and tokio waits for each of them: a
//! command that tableq runs now is never reaped here (its exit status is its
//! worker's), and a zombie that looks like one (the leader of its own process
//! group, in tableq's session) is left to tokio, unless it is still there long after
//! tokio would have reaped it.

use std::collections::HashMap;
use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};
use tokio::time::Instant;
use tracing::debug;

/// How often the reaper looks even without SIGCHLD.
const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// A zombie that looks like a command of tableq's is reaped after this long.
const LEFT_BEHIND: Duration = Duration::from_secs(30);

/// Makes tableq the reaper of its orphaned descendants, and reaps them from now on.
pub fn start() -> std::io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER only sets a flag on this process.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut children = signal(SignalKind::child())?;
    tokio::spawn(async move {
        let mut seen = HashMap::new();
        let mut sweeps = tokio::time::interval(SWEEP_EVERY);
        loop {
            tokio::select! {
                _ = children.recv() => {}
                _ = sweeps.tick() => {}
            }
            sweep(&mut seen);
        }
    });
    Ok(())
}

/// Reaps the zombies among tableq's children that no one else will.
fn sweep(seen: &mut HashMap<i32, Instant>) {
    let now = Instant::now();
    // SAFETY: getsid(0) only reads this process's session id.
    let own_session = unsafe { libc::getsid(0) };
    let zombies: Vec<Zombie> = children().filter_map(zombie).collect();
    seen.retain(|pid, _| zombies.iter().any(|z| z.pid == *pid));
    for zombie in zombies {
        if crate::action::process::owns(zombie.pid) {
            continue;
        }
        let a_command = zombie.group == zombie.pid && zombie.session == own_session;
        let since = *seen.entry(zombie.pid).or_insert(now);
        if a_command && now.duration_since(since) < LEFT_BEHIND {
            continue;
        }
        // SAFETY: waitpid on one exited child of ours; WNOHANG never blocks.
        let reaped = unsafe { libc::waitpid(zombie.pid, std::ptr::null_mut(), libc::WNOHANG) };
        if reaped == zombie.pid {
            debug!(pid = zombie.pid, "reaped an orphaned process");
            seen.remove(&zombie.pid);
        }
    }
}

/// The pids of this process's children, from every thread's `children` file.
fn children() -> impl Iterator<Item = i32> {
    let tasks = std::fs::read_dir("/proc/self/task").into_iter().flatten();
    tasks
        .filter_map(|task| task.ok())
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|pid| pid.parse().ok())
                .collect::<Vec<i32>>()
        })
}

struct Zombie {
    pid: i32,
    group: i32,
    session: i32,
}

/// `pid`, if it is a zombie: its process group and session from `/proc/PID/stat`.
fn zombie(pid: i32) -> Option<Zombie> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name in parentheses: state, ppid, pgrp, session, …
    let mut fields = stat.rsplit_once(") ")?.1.split_whitespace();
    let state = fields.next()?;
    let _parent = fields.next()?;
    let group = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    (state == "Z").then_some(Zombie {
        pid,
        group,
        session,
    })
}
