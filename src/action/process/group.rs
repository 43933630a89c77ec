//! A started program's process group: killed whole when the program ends, times
//! out, is cancelled or retired, so grandchildren never outlive it.

use crate::lock::lock;
use std::collections::BTreeSet;
use std::sync::Mutex;

/// Kills a whole process group when dropped: at the deadline, when the program has
/// exited (taking anything it left behind with it), or when the item is cancelled.
pub struct ProcessGroup(i32);

/// The process groups of the programs running now, so that an exit that skips
/// destructors (a second stop signal) can still kill them.
static RUNNING: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

impl ProcessGroup {
    pub fn new(pgid: i32) -> ProcessGroup {
        lock(&RUNNING).insert(pgid);
        ProcessGroup(pgid)
    }
}

impl ProcessGroup {
    /// Kills every process of the group now (it is still watched until dropped).
    pub fn kill(&self) {
        // SAFETY: killpg only sends a signal; a group that is gone yields ESRCH.
        unsafe { libc::killpg(self.0, libc::SIGKILL) };
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
        lock(&RUNNING).remove(&self.0);
    }
}

/// Whether `pid` is a program tableq runs now (each leads a process group of its
/// own): its exit status is tableq's to collect, not the orphan reaper's.
pub fn owns(pid: i32) -> bool {
    lock(&RUNNING).contains(&pid)
}

/// Kills every program's process group: for an exit that runs no destructors.
pub fn kill_all() {
    for pgid in lock(&RUNNING).iter() {
        // SAFETY: as above.
        unsafe { libc::killpg(*pgid, libc::SIGKILL) };
    }
}
