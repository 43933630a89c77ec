//! Queue files that are not files: a FIFO or a device named on the command line,
//! a file of megabytes, and the entries of a queue directory that cannot be queue
//! files (a dangling link, a link loop, a FIFO) — each refused or reported by
//! name, at once, never waited on, read without end, or skipped without a word.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::daemon::{run_to_end, tableq, Finished};
use crate::support::{assert_has, QueueFile, QueueFiles, TestDb};

fn mkfifo(path: &Path) {
    let name = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o644) }, 0, "mkfifo");
}

fn good_queue(files: &QueueFiles) -> PathBuf {
    QueueFile::new("typed")
        .select("SELECT id FROM typed_job WHERE state = 'waiting' ORDER BY id")
        .action_sql("UPDATE typed_job SET state = 'done' WHERE id = :id")
        .write(files)
}

/// `tableq run PATH` against the test database, to its end (a minute at most).
async fn run(path: &Path, url: &str) -> Finished {
    let mut cmd = tableq(&["run", "--stop-when-empty"]);
    cmd.arg(path).env("TABLEQ_DATABASE_URL", url);
    run_to_end(cmd, Duration::from_secs(60)).await
}

async fn typed_table() -> TestDb {
    let db = TestDb::new().await;
    db.exec(
        "CREATE TABLE typed_job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting')",
    )
    .await;
    db
}

/// A FIFO named as a queue file is refused at once (exit 2), named, not read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_named_as_a_queue_file_is_refused() {
    let db = typed_table().await;
    let files = QueueFiles::new();
    let fifo = files.path().join("pipe.toml");
    mkfifo(&fifo);
    let finished = run(&fifo, &db.url).await;
    assert_eq!(finished.code(), Some(2), "{}", finished.stderr);
    let expected = format!("{}: error: not a queue file: it is a FIFO", fifo.display());
    assert_has(&finished.stderr, &expected);
}

/// /dev/zero named as a queue file is refused at once as a device, not read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_named_as_a_queue_file_is_refused() {
    let db = typed_table().await;
    let finished = run(Path::new("/dev/zero"), &db.url).await;
    assert_eq!(finished.code(), Some(2), "{}", finished.stderr);
    assert_has(
        &finished.stderr,
        "/dev/zero: error: not a queue file: it is a device; a queue file must be a regular file",
    );
}

/// A queue file over 1 MiB — here a select of 2 MiB — is refused as the file's
/// problem, naming the cap and the statement, before any connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_file_over_a_mebibyte_is_refused() {
    let db = typed_table().await;
    let files = QueueFiles::new();
    let padding = "x".repeat(2 * 1024 * 1024);
    let file = QueueFile::new("huge")
        .select(&format!(
            "SELECT id FROM typed_job /* {padding} */ WHERE state = 'waiting' ORDER BY id"
        ))
        .action_sql("UPDATE typed_job SET state = 'done' WHERE id = :id")
        .write(&files);
    let finished = run(&file, &db.url).await;
    assert_eq!(finished.code(), Some(2), "{}", finished.stderr);
    let said = &finished.stderr;
    assert!(
        said.contains(&format!("{}: error:", file.display())),
        "{said}"
    );
    assert!(said.contains("(1 MiB) a queue file may hold"), "{said}");
    assert!(said.contains("is a statement in it this large?"), "{said}");
}

/// In a queue directory, a dangling link, a link loop and a FIFO named `*.toml` are
/// each reported by name (and stop `run`), next to the queue file that is fine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_of_a_directory_that_are_not_queue_files_are_reported() {
    let db = typed_table().await;
    let files = QueueFiles::new();
    good_queue(&files);
    let dir = files.path();
    std::os::unix::fs::symlink(dir.join("gone"), dir.join("dangling.toml")).unwrap();
    std::os::unix::fs::symlink(dir.join("loop.toml"), dir.join("loop.toml")).unwrap();
    mkfifo(&dir.join("pipe.toml"));

    let mut cmd = tableq(&["check", "--offline"]);
    cmd.arg(&dir).env("TABLEQ_DATABASE_URL", &db.url);
    let checked = run_to_end(cmd, Duration::from_secs(60)).await;
    assert_ne!(checked.code(), Some(0), "{}", checked.stdout);
    let report = &checked.stdout;
    for (entry, why) in [
        ("dangling.toml", "a symbolic link to "),
        ("loop.toml", "a loop of symbolic links"),
        ("pipe.toml", "not a queue file: it is a FIFO"),
    ] {
        let expected = format!("{}: error: {why}", dir.join(entry).display());
        assert!(report.contains(&expected), "{expected}\n{report}");
    }

    let finished = run(&dir, &db.url).await;
    assert_eq!(finished.code(), Some(2), "{}", finished.stderr);
    assert_has(&finished.stderr, "dangling.toml");
}
