//! A command's process group: killed whole when the command ends, times out or is
//! cancelled, so grandchildren never outlive their item.

use crate::lock::lock;
use std::collections::BTreeSet;
use std::sync::Mutex;

/// Kills a whole process group when dropped: at the deadline, when the command has
/// exited (taking anything it left behind with it), or when the item is cancelled.
pub struct ProcessGroup(i32);

/// The process groups of the commands running now, so that an exit that skips
/// destructors (a second stop signal) can still kill them.
static RUNNING: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

impl ProcessGroup {
    pub fn new(pgid: i32) -> ProcessGroup {
        lock(&RUNNING).insert(pgid);
        ProcessGroup(pgid)
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // SAFETY: killpg only sends a signal; a group that is gone yields ESRCH.
        unsafe { libc::killpg(self.0, libc::SIGKILL) };
        lock(&RUNNING).remove(&self.0);
    }
}

/// Whether `pid` is a command tableq runs now (each leads a process group of its
/// own): its exit status is tableq's to collect, not the orphan reaper's.
pub fn owns(pid: i32) -> bool {
    lock(&RUNNING).contains(&pid)
}

/// Kills every command's process group: for an exit that runs no destructors.
pub fn kill_all() {
    for pgid in lock(&RUNNING).iter() {
        // SAFETY: as above.
        unsafe { libc::killpg(*pgid, libc::SIGKILL) };
    }
}
