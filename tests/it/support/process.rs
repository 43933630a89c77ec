//! The processes a test's commands start: the pid a script wrote down, and whether
//! a process is gone.

use std::path::Path;
use std::time::Duration;

use super::eventually;

/// The pid in the file at `path`, once a script has written it there.
pub fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Waits (30 s at most) until the command has started and its script written its
/// pid to `path`; returns the pid.
pub async fn wait_for_pid(path: &Path) -> i32 {
    eventually("the command runs", Duration::from_secs(30), || async {
        read_pid(path).is_some()
    })
    .await;
    read_pid(path).unwrap()
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

/// The processes `pid` started (its threads' children), oldest first.
pub fn children(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut found: Vec<i32> = tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|child| child.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect();
    found.sort_unstable();
    found
}
