//! What a command action sees of tableq's environment: an allowlist, never the
//! secrets a deployment hands tableq.

use std::time::Duration;

use crate::support;
use crate::support::check::jobs_file;
use crate::support::daemon::{run_to_end, tableq};
use crate::support::{assert_has, QueueFile, QueueFiles, TestDb};

const SIGNING_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A queue over the rows of `job` marked `name` that runs `/usr/bin/env` and keeps
/// what it printed.
fn env_queue(name: &str) -> QueueFile {
    QueueFile::new(name)
        .database_url("${APP_DATABASE_URL}")
        .select(&format!(
            "SELECT id FROM job WHERE queue = '{name}' AND output IS NULL ORDER BY id"
        ))
        .action_command(&["/usr/bin/env"])
        .on_success("UPDATE job SET output = :output WHERE id = :id")
}

/// By default a command sees PATH, HOME, LANG, LC_*, TZ and TABLEQ_QUEUE/TABLEQ_KEY —
/// not the database URL the file interpolated, MYSQL_PWD or a signing secret; a
/// variable named in `env` passes through, and `env = { NAME = "…" }` sets one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_sees_only_the_allowlist_and_what_env_names() {
    let db = TestDb::new().await;
    db.exec(
        // The index keeps each queue's claim to its own rows: without it, a claim
        // scanning the table briefly locks another queue's row, and that queue's
        // SKIP LOCKED claim at the same instant finds it empty (and stops).
        "CREATE TABLE job (id INT PRIMARY KEY, queue VARCHAR(10) NOT NULL, output MEDIUMTEXT NULL,
           INDEX (queue, id)) DEFAULT CHARSET=utf8mb4;
         INSERT INTO job (id, queue) VALUES (1, 'plain'), (2, 'named'), (3, 'set')",
    )
    .await;
    let files = QueueFiles::new();
    env_queue("plain").write(&files);
    env_queue("named")
        .action_set("env", vec!["SMTP_HOST"])
        .write(&files);
    let set = toml::Table::from_iter([("GREETING".to_string(), "hello ${SMTP_HOST}".into())]);
    env_queue("set").action_set("env", set).write(&files);
    let mut cmd = tableq(&["run", "--stop-when-empty"]);
    cmd.arg(files.path())
        .env("APP_DATABASE_URL", &db.url)
        .env("MYSQL_PWD", "hunter2")
        .env("WEBHOOK_SIGNING_SECRET", SIGNING_SECRET)
        .env("SMTP_HOST", "mail.example")
        .env("LC_TIME", "C")
        .env("TZ", "UTC");
    let done = run_to_end(cmd, Duration::from_secs(60)).await;
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    let outputs: Vec<(String, String)> = db.rows("SELECT queue, output FROM job ORDER BY id").await;
    for (queue, output) in &outputs {
        for secret in [
            "APP_DATABASE_URL",
            "MYSQL_PWD",
            "hunter2",
            "WEBHOOK_SIGNING_SECRET",
            "whsec_",
        ] {
            assert!(!output.contains(secret), "{queue} saw {secret}:\n{output}");
        }
        for expected in ["PATH=", "LC_TIME=C", "TZ=UTC", "TABLEQ_KEY="] {
            assert!(
                output.contains(expected),
                "{queue} lacks {expected}:\n{output}"
            );
        }
        assert!(
            output.contains(&format!("TABLEQ_QUEUE={queue}")),
            "{output}"
        );
    }
    assert!(!outputs[0].1.contains("SMTP_HOST"), "{}", outputs[0].1);
    assert_has(&outputs[1].1, "SMTP_HOST=mail.example");
    assert_has(&outputs[2].1, "GREETING=hello mail.example");
    assert!(!outputs[2].1.contains("SMTP_HOST="), "{}", outputs[2].1);
}

/// `check` warns when `env` passes a variable the file puts into `database_url`, or
/// one whose name says it is a secret.
#[tokio::test]
async fn check_warns_when_env_passes_a_secret() {
    let files = QueueFiles::new();
    let contents = std::fs::read_to_string(
        env_queue("jobs")
            .action_set("env", vec!["APP_DATABASE_URL", "API_TOKEN", "SMTP_HOST"])
            .on_failure("UPDATE job SET output = :error WHERE id = :id")
            .write(&files),
    )
    .unwrap();
    let (_files, path, shown) = jobs_file(&contents);
    let env = [
        ("APP_DATABASE_URL", "mysql://app:pw@db/app"),
        ("API_TOKEN", "t"),
    ];
    let done = check_with_env(&path, &env).await;
    let line = 1 + contents
        .lines()
        .position(|l| l.starts_with("env = "))
        .unwrap();
    let warning = |name: &str, why: &str| {
        format!(
            "{shown}:{line}: queue jobs: warning: `action.env` passes `{name}` to the command, and \
             {why}: the command (and its `:output`) would see it; pass only what the command needs"
        )
    };
    assert_has(
        &done.stdout,
        &warning(
            "APP_DATABASE_URL",
            "this file puts it into `database_url` or a signing secret",
        ),
    );
    assert_has(
        &done.stdout,
        &warning("API_TOKEN", "its name says it holds a secret"),
    );
    assert!(!done.stdout.contains("`SMTP_HOST`"), "{}", done.stdout);
    assert!(
        done.stdout
            .ends_with("1 queue offline: 0 errors, 2 warnings\n"),
        "{}",
        done.stdout
    );
}

/// `tableq check --offline PATH` with `env` set.
async fn check_with_env(path: &std::path::Path, env: &[(&str, &str)]) -> support::daemon::Finished {
    let mut cmd = tableq(&["check", "--offline"]);
    cmd.arg(path);
    for (name, value) in env {
        cmd.env(name, value);
    }
    run_to_end(cmd, Duration::from_secs(30)).await
}
