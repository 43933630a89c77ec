//! The database URL as the user gives it: a password on the command line is warned
//! about, a parameter the driver does not know is named with those it does, a `%`
//! that is no percent-escape is refused instead of ending as "access denied", and
//! `check --offline` flags a URL that names no database — each without ever
//! showing the password.

use std::time::Duration;

use crate::support::daemon::{run_to_end, tableq, Finished};
use crate::support::{assert_has, QueueFile, QueueFiles, TestDb};

/// The table the queue file of these tests reads.
const URL_JOB: &str =
    "CREATE TABLE url_job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting')";

fn queue_file(files: &QueueFiles) -> std::path::PathBuf {
    QueueFile::new("urls")
        .select("SELECT id FROM url_job WHERE state = 'waiting' ORDER BY id")
        .action_sql("UPDATE url_job SET state = 'done' WHERE id = :id")
        .on_failure("UPDATE url_job SET state = 'failed' WHERE id = :id")
        .write(files)
}

/// `tableq ARGS FILE`, with `env_url` as TABLEQ_DATABASE_URL when given.
async fn tableq_with(args: &[&str], file: &std::path::Path, env_url: Option<&str>) -> Finished {
    let mut cmd = tableq(args);
    cmd.arg(file);
    if let Some(url) = env_url {
        cmd.env("TABLEQ_DATABASE_URL", url);
    }
    run_to_end(cmd, Duration::from_secs(60)).await
}

/// A URL with a password given as `--database-url` is warned about, pointing at
/// the environment and TABLEQ_DATABASE_URL_FILE; the same URL from the environment,
/// or one without a password, is not. The password is never printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_on_the_command_line_is_warned_about() {
    let files = QueueFiles::new();
    let file = queue_file(&files);
    let url = "mysql://app:hunter2@127.0.0.1:3306/shop";
    let flagged = tableq_with(&["check", "--offline", "--database-url", url], &file, None).await;
    assert_eq!(flagged.code(), Some(0), "{}", flagged.stdout);
    assert_has(
        &flagged.stderr,
        "--database-url holds a password on the command line",
    );
    assert!(flagged.stderr.contains("TABLEQ_DATABASE_URL_FILE"));
    let joined = format!("--database-url={url}");
    let joined = tableq_with(&["check", "--offline", &joined], &file, None).await;
    assert_has(&joined.stderr, "holds a password");
    for done in [&flagged, &joined] {
        assert!(!format!("{}{}", done.stdout, done.stderr).contains("hunter2"));
    }

    let from_env = tableq_with(&["check", "--offline"], &file, Some(url)).await;
    assert!(
        !from_env.stderr.contains("holds a password"),
        "{}",
        from_env.stderr
    );
    let no_password = "mysql://app@127.0.0.1:3306/shop";
    let without = tableq_with(
        &["check", "--offline", "--database-url", no_password],
        &file,
        None,
    )
    .await;
    assert!(
        !without.stderr.contains("holds a password"),
        "{}",
        without.stderr
    );
}

/// `?ssl-mode=REQUIRED` is refused naming the parameter, the ones there are and
/// `require_ssl=true` — by `check --offline` and by `run` (exit 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_url_parameter_is_named_with_what_works() {
    let db = TestDb::new().await;
    let files = QueueFiles::new();
    let file = queue_file(&files);
    let url = format!("{}?ssl-mode=REQUIRED", db.url);
    let checked = tableq_with(&["check", "--offline"], &file, Some(&url)).await;
    assert_eq!(checked.code(), Some(1), "{}", checked.stdout);
    for expected in [
        "unknown parameter `ssl-mode`",
        "require_ssl, verify_ca",
        "?require_ssl=true",
    ] {
        assert!(
            checked.stdout.contains(expected),
            "{expected}\n{}",
            checked.stdout
        );
    }
    let ran = tableq_with(&["run", "--stop-when-empty"], &file, Some(&url)).await;
    assert_eq!(ran.code(), Some(2), "{}", ran.stderr);
    assert_has(&ran.stderr, "unknown parameter `ssl-mode`");
}

/// A password with `%zz` in it (no percent-escape) is refused before connecting,
/// naming the password as the part — not its text — and how to write a `%`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_percent_escape_is_refused() {
    let db = TestDb::new().await;
    db.exec(URL_JOB).await;
    let files = QueueFiles::new();
    let file = queue_file(&files);
    let (scheme_and_user, rest) = db.url.split_once('@').unwrap();
    let url = format!("{scheme_and_user}:se%zzcret@{rest}");
    let ran = tableq_with(&["run", "--stop-when-empty"], &file, Some(&url)).await;
    assert_eq!(ran.code(), Some(2), "{}", ran.stderr);
    assert_has(
        &ran.stderr,
        "a `%` in its password is not followed by two hex digits: write `%25`",
    );
    assert!(!ran.stderr.contains("se%zzcret"), "{}", ran.stderr);
    let checked = tableq_with(&["check", "--offline"], &file, Some(&url)).await;
    assert_eq!(checked.code(), Some(1), "{}", checked.stdout);
    assert_has(&checked.stdout, "a `%` in its password");
}

/// `check --offline` flags a URL that names no database — the queue's own
/// `database_url` or the one it is given — as the book says; `run` refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_offline_flags_a_url_without_a_database() {
    let files = QueueFiles::new();
    let file = queue_file(&files);
    let given = tableq_with(
        &["check", "--offline"],
        &file,
        Some("mysql://app@127.0.0.1:3306"),
    )
    .await;
    assert_eq!(given.code(), Some(1), "{}", given.stdout);
    assert!(
        given.stdout.contains(
            "queue urls: error: --database-url: not a usable database URL (it names no database"
        ),
        "{}",
        given.stdout
    );
    let own = QueueFile::new("own")
        .database_url("mysql://app@127.0.0.1:3306/")
        .select("SELECT id FROM url_job WHERE state = 'waiting' ORDER BY id")
        .action_sql("UPDATE url_job SET state = 'done' WHERE id = :id")
        .write(&files);
    let checked = tableq_with(&["check", "--offline"], &own, None).await;
    assert_eq!(checked.code(), Some(1), "{}", checked.stdout);
    assert!(
        checked.stdout.contains(
            "queue own: error: `database_url`: not a usable database URL (it names no database"
        ),
        "{}",
        checked.stdout
    );
    let ran = tableq_with(&["run", "--stop-when-empty"], &own, None).await;
    assert_eq!(ran.code(), Some(2), "{}", ran.stderr);
    assert_has(&ran.stderr, "names no database");
}
