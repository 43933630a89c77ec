//! A reader that goes away (`tableq failed … | head -1`) ends a command quietly:
//! no panic, no "Broken pipe", no backtrace, and the exit status the command has
//! without a reader — for every command that writes to standard output.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::daemon::tableq;
use crate::support::{QueueFile, QueueFiles, TestDb};

/// `rows` jobs, every one given up with a long error: `failed` lists many kilobytes.
async fn given_up(db: &TestDb, rows: usize) {
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'failed',
         last_error VARCHAR(300) NOT NULL DEFAULT '', KEY (state))",
    )
    .await;
    db.fill("job", "id, last_error", rows, |i| {
        format!("{i}, REPEAT('the mailbox bounced the message ', 8)")
    })
    .await;
}

/// The queue of `job`, with a `[failed]` table.
fn queue(files: &QueueFiles) -> PathBuf {
    let failed = toml::Table::from_iter([
        (
            "select".to_string(),
            "SELECT id, last_error FROM job WHERE state = 'failed' ORDER BY id".into(),
        ),
        (
            "retry".to_string(),
            "UPDATE job SET state = 'waiting' WHERE id = :id AND state = 'failed'".into(),
        ),
        (
            "discard".to_string(),
            "DELETE FROM job WHERE id = :id AND state = 'failed'".into(),
        ),
    ]);
    QueueFile::new("mail")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .action_sql("DO :id")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .on_failure("UPDATE job SET state = 'failed' WHERE id = :id")
        .set("failed", failed)
        .write(files)
}

fn assert_quiet(what: &str, stderr: &str) {
    for loud in ["panicked", "Broken pipe", "backtrace"] {
        assert!(!stderr.contains(loud), "{what}: {loud:?} in\n{stderr}");
    }
}

/// `tableq failed … | head -1`: the reader takes one line of 2,000 rows and goes;
/// tableq ends at once, quietly, with exit status 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_piped_into_head_ends_quietly() {
    let db = TestDb::new().await;
    given_up(&db, 2000).await;
    let files = QueueFiles::new();
    let file = queue(&files);
    let mut cmd = tableq(&["failed", "--limit", "2000"]);
    cmd.arg(&file)
        .env("TABLEQ_DATABASE_URL", &db.url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start tableq failed");
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    reader.read_line(&mut first).await.unwrap();
    assert_eq!(first, "queue mail: 2000 rows\n");
    drop(reader);
    let ended = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("tableq ended once its reader went away")
        .unwrap();
    let stderr = String::from_utf8_lossy(&ended.stderr);
    assert_quiet("failed | head -1", &stderr);
    assert_eq!(ended.status.code(), Some(0), "{stderr}");
}

/// Every command that writes to standard output, its reader gone before the first
/// byte: each ends quietly with its own exit status (`check` that finds an error: 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_ends_quietly_when_its_reader_is_gone() {
    let db = TestDb::new().await;
    given_up(&db, 3).await;
    let files = QueueFiles::new();
    let file = queue(&files);
    let file = file.to_str().unwrap();
    let broken = QueueFile::new("broken")
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .action_sql("DO :nope")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
        .on_failure("UPDATE job SET state = 'failed' WHERE id = :id")
        .write(&files);
    let commands: [(&[&str], i32); 15] = [
        (&["--version"], 0),
        (&["--help"], 0),
        (&["schema"], 0),
        (&["completions", "bash"], 0),
        (&["man"], 0),
        (&["check", "--offline", file], 0),
        (&["check", "--offline", broken.to_str().unwrap()], 1),
        (&["check", file], 0),
        (&["count", file], 0),
        (&["count", "--print-sql", file], 0),
        (&["failed", file], 0),
        (&["inspect", "--key", "2", file], 0),
        (&["retry", "--dry-run", "--all", file], 0),
        (&["pause", file], 0),
        (&["resume", file], 0),
    ];
    for (args, code) in commands {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut cmd = tableq(args);
        cmd.env("TABLEQ_DATABASE_URL", &db.url)
            .stdout(writer)
            .stderr(Stdio::piped());
        let child = cmd.spawn().expect("start tableq");
        let ended = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("tableq {args:?} ended"))
            .unwrap();
        let stderr = String::from_utf8_lossy(&ended.stderr);
        assert_quiet(&format!("tableq {args:?}"), &stderr);
        assert_eq!(ended.status.code(), Some(code), "tableq {args:?}: {stderr}");
    }
}
