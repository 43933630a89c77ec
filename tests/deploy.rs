//! The code, the systemd unit and the Dockerfile agree on the stop signal, and the
//! supervisors wait longer than tableq's own shutdown timeout before SIGKILL.

use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

fn value<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key}"))
        .trim()
}

fn seconds(duration: &str) -> u64 {
    humantime::parse_duration(duration).unwrap().as_secs()
}

/// systemd stops tableq with SIGTERM, and waits past its shutdown timeout.
#[test]
fn systemd_unit_stops_with_sigterm_after_the_shutdown_timeout() {
    let unit = read("systemd/tableq.service");
    assert_eq!(value(&unit, "KillSignal="), "SIGTERM");
    assert_eq!(value(&unit, "ExecReload="), "/bin/kill -HUP $MAINPID");
    let exec = value(&unit, "ExecStart=");
    let timeout = exec
        .split_whitespace()
        .skip_while(|w| *w != "--shutdown-timeout")
        .nth(1)
        .unwrap();
    let stop_after: u64 = value(&unit, "TimeoutStopSec=").parse().unwrap();
    assert!(
        stop_after > seconds(timeout),
        "systemd would SIGKILL during the graceful stop"
    );
    assert_eq!(
        value(&unit, "RestartPreventExitStatus="),
        "2",
        "bad queue files are not retried"
    );
}

/// The container stops tableq with SIGTERM too.
#[test]
fn dockerfile_stops_with_sigterm() {
    assert_eq!(value(&read("Dockerfile"), "STOPSIGNAL"), "SIGTERM");
}
