//! Row values in the text log: a key or a command's stderr with CR, LF or terminal
//! escape sequences is written escaped, so it can neither start a line of its own
//! (a forged log line) nor reach the terminal as control characters.

use std::time::Duration;

use crate::support::daemon::{run_to_end, tableq};
use crate::support::{QueueFile, QueueFiles, TestDb};

/// What a hostile key holds: a line break and a forged line, a screen clear, a
/// window title, a C1 control.
const HOSTILE_KEY: &str =
    "evil\r\n2026-01-01T00:00:00Z ERROR FORGED-BY-KEY\u{1b}[2J\u{1b}]0;pwned\u{7}\u{9b}31m";

/// A failing command's stderr (the `:error` tableq logs) and a key with CR/LF, ESC,
/// BEL and a C1 control come out of the text log escaped: no raw control byte, no
/// line that the values began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_in_values_are_escaped_in_the_text_log() {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE esc_job (id VARCHAR(200) PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting')
         DEFAULT CHARSET=utf8mb4",
    )
    .await;
    let mut conn = db.conn().await;
    use mysql_async::prelude::Queryable;
    conn.exec_drop("INSERT INTO esc_job (id) VALUES (?)", (HOSTILE_KEY,))
        .await
        .unwrap();
    drop(conn);
    let files = QueueFiles::new();
    let script = files.script(
        "fail.sh",
        r"printf 'boom\033[2J\033]0;pwned\007\r\nFORGED-BY-STDERR level=ERROR\n' >&2; exit 3",
    );
    let file = QueueFile::new("esc_queue")
        .select("SELECT id FROM esc_job WHERE state = 'waiting' ORDER BY id")
        .action_command(&[script.to_str().unwrap()])
        .on_failure("UPDATE esc_job SET state = 'failed' WHERE id = :id")
        .write(&files);

    let mut cmd = tableq(&["run", "--stop-when-empty", "--log-format", "text"]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
    let finished = run_to_end(cmd, Duration::from_secs(60)).await;
    let log = finished.stderr;
    assert_eq!(finished.status.code(), Some(0), "{log}");
    db.assert_count("SELECT COUNT(*) FROM esc_job WHERE state = 'failed'", 1)
        .await;
    // The values were logged: escaped.
    assert!(log.contains(r"evil\r\n2026-01-01T00:00:00Z"), "{log}");
    assert!(log.contains(r"\u{1b}[2J"), "{log}");
    assert!(log.contains("FORGED-BY-STDERR"), "{log}");
    for control in ['\r', '\u{1b}', '\u{7}', '\u{9b}'] {
        assert!(
            !log.contains(control),
            "the log holds a raw {control:?}:\n{log}"
        );
    }
    for line in log.lines() {
        assert!(
            !line.starts_with("2026-01-01T00:00:00Z") && !line.starts_with("FORGED"),
            "a value began a line of its own: {line:?}\n{log}"
        );
    }
}
