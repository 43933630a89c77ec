//! The processes a test's commands start: the pid a script wrote down, and whether
//! a process is gone.

use std::path::Path;

/// The pid in the file at `path`, once a script has written it there.
pub fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// True once process `pid` has exited: it no longer exists, or is a zombie waiting
/// for its (re)parent to reap it.
pub fn is_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(") ")
            .next()
            .is_some_and(|rest| rest.starts_with('Z')),
    }
}
