//! Secrets from files, through the real binary: `TABLEQ_DATABASE_URL_FILE`, the
//! systemd credential `database-url`, and `${file:/PATH}` in a queue file's
//! `database_url`, `signing_secret` and header values — read, refused where no
//! secret goes, named with the file and the key when they cannot be read; and a file
//! that every user can read gets a `check` warning.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::check::{job_db, GOOD};
use crate::support::daemon::{run_to_end, tableq, Finished};
use crate::support::web::{Reply, WebServer};
use crate::support::{assert_has, QueueFile, QueueFiles, TestDb};

/// Writes `text` to `name` in `files` with permissions `mode`.
fn secret(files: &QueueFiles, name: &str, text: &str, mode: u32) -> PathBuf {
    let path = files.write(name, text);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// `tableq ARGS` with `env` set, to its end.
async fn tableq_with(args: &[&str], env: &[(&str, &Path)]) -> Finished {
    let mut cmd = tableq(args);
    for (name, value) in env {
        cmd.env(name, value);
    }
    run_to_end(cmd, Duration::from_secs(60)).await
}

/// The database URL is read from TABLEQ_DATABASE_URL_FILE (its trailing newline
/// dropped), or from systemd's credential directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_url_comes_from_a_file_or_a_systemd_credential() {
    let db = job_db().await;
    let files = QueueFiles::new();
    let queue = files.write("jobs.toml", GOOD);
    let url_file = secret(&files, "database-url", &format!("{}\n", db.url), 0o600);
    let queue_arg = queue.to_str().unwrap();

    let from_file = tableq_with(
        &["count", queue_arg],
        &[("TABLEQ_DATABASE_URL_FILE", &url_file)],
    )
    .await;
    assert_eq!(from_file.code(), Some(0), "{}", from_file.stderr);
    assert_eq!(from_file.stdout, "jobs\t3\n");

    let credentials = QueueFiles::new();
    secret(&credentials, "database-url", &db.url, 0o400);
    let from_credential = tableq_with(
        &["count", queue_arg],
        &[("CREDENTIALS_DIRECTORY", &credentials.path())],
    )
    .await;
    assert_eq!(
        from_credential.code(),
        Some(0),
        "{}",
        from_credential.stderr
    );
    assert_eq!(from_credential.stdout, "jobs\t3\n");
}

/// A URL file that is missing or empty, or one given beside a URL, stops the command
/// with exit 2 and says which file and which variable.
#[tokio::test]
async fn a_url_file_that_cannot_be_used_is_named() {
    let files = QueueFiles::new();
    let queue = files.write("jobs.toml", GOOD);
    let queue_arg = queue.to_str().unwrap();
    let missing = files.path().join("missing-url");

    let done = tableq_with(
        &["count", queue_arg],
        &[("TABLEQ_DATABASE_URL_FILE", &missing)],
    )
    .await;
    assert_eq!(done.code(), Some(2));
    assert_eq!(
        done.stderr,
        format!(
            "--database-url-file (TABLEQ_DATABASE_URL_FILE): cannot read {}: No such file or \
             directory (os error 2)\n",
            missing.display()
        )
    );

    let empty = secret(&files, "empty-url", "\n", 0o600);
    let done = tableq_with(
        &["count", queue_arg],
        &[("TABLEQ_DATABASE_URL_FILE", &empty)],
    )
    .await;
    assert_eq!(done.code(), Some(2));
    assert_eq!(
        done.stderr,
        format!(
            "{} is empty: it should hold the database URL, \
             mysql://USER:PASSWORD@HOST:3306/DATABASE\n",
            empty.display()
        )
    );

    let url = secret(&files, "url", "mysql://u@h/d", 0o600);
    let mut both = tableq(&["count", queue_arg]);
    both.env("TABLEQ_DATABASE_URL_FILE", &url)
        .env("TABLEQ_DATABASE_URL", "mysql://u@h/d");
    let done = run_to_end(both, Duration::from_secs(60)).await;
    assert_eq!(done.code(), Some(2));
    assert_eq!(
        done.stderr,
        "both --database-url (TABLEQ_DATABASE_URL) and --database-url-file \
         (TABLEQ_DATABASE_URL_FILE) are set: give the URL one way\n"
    );
}

/// `check` warns of a URL file that every user of the machine can read (and fails
/// on it with --strict); one only its owner and group can read is fine.
#[tokio::test]
async fn check_warns_of_a_url_file_others_can_read() {
    let files = QueueFiles::new();
    let queue = files.write("jobs.toml", GOOD);
    let queue_arg = queue.to_str().unwrap();
    let open = secret(&files, "database-url", "mysql://u:p@h/d", 0o644);

    let done = tableq_with(
        &["check", "--offline", queue_arg],
        &[("TABLEQ_DATABASE_URL_FILE", &open)],
    )
    .await;
    let warning = format!(
        "{0}: warning: --database-url-file (TABLEQ_DATABASE_URL_FILE) names this file, which \
         every user of this machine can read (mode 644): `chmod o-r {0}` so that only its owner \
         (and group) can",
        open.display()
    );
    assert_has(&done.stdout, &warning);
    assert!(
        done.stdout.ends_with("0 errors, 1 warning\n"),
        "{}",
        done.stdout
    );
    assert_eq!(done.code(), Some(0));
    let strict = tableq_with(
        &["check", "--offline", "--strict", queue_arg],
        &[("TABLEQ_DATABASE_URL_FILE", &open)],
    )
    .await;
    assert_eq!(strict.code(), Some(1), "{}", strict.stdout);

    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o640)).unwrap();
    let done = tableq_with(
        &["check", "--offline", queue_arg],
        &[("TABLEQ_DATABASE_URL_FILE", &open)],
    )
    .await;
    assert!(
        done.stdout.ends_with("0 errors, 0 warnings\n"),
        "{}",
        done.stdout
    );
}

/// A queue's own `database_url = "${file:…}"` is the URL it counts on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_reads_its_database_url_from_a_file() {
    let db = job_db().await;
    let files = QueueFiles::new();
    let url_file = secret(&files, "database-url", &format!("{}\n", db.url), 0o600);
    let queue = files.write(
        "jobs.toml",
        &format!(
            "database_url = \"${{file:{}}}\"\n{GOOD}",
            url_file.display()
        ),
    );
    let done = run_to_end(
        tableq(&["count", queue.to_str().unwrap()]),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    assert_eq!(done.stdout, "jobs\t3\n");
}

/// An HTTP queue sends the header value and signs with the key that its files hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_and_the_signing_secret_come_from_files() {
    let server = WebServer::start(|_| Reply::status(204)).await;
    let db = TestDb::new().await;
    db.exec("CREATE TABLE hook (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting')")
        .await;
    db.exec("INSERT INTO hook (id) VALUES (1), (2)").await;
    let files = QueueFiles::new();
    let key = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let key_file = secret(&files, "signing-key", &format!("{key}\n"), 0o600);
    let token_file = secret(&files, "token", "s3cret-token\n", 0o600);
    let mut headers = toml::Table::new();
    headers.insert(
        "Authorization".into(),
        format!("Bearer ${{file:{}}}", token_file.display()).into(),
    );
    let queue = QueueFile::new("hooks")
        .select("SELECT id FROM hook WHERE state = 'waiting'")
        .action_http(&server.url("/hook"))
        .action_set("headers", headers)
        .action_set(
            "signing_secret",
            format!("${{file:{}}}", key_file.display()),
        )
        .on_success("UPDATE hook SET state = 'done' WHERE id = :id")
        .on_failure("UPDATE hook SET state = 'failed' WHERE id = :id")
        .write(&files);
    support::daemon::run_binary_until_empty(&queue, &db.url).await;

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.header("authorization"), "Bearer s3cret-token");
        let mut signed = axum::http::HeaderMap::new();
        for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
            signed.insert(name, request.headers[name].clone());
        }
        standardwebhooks::Webhook::new(key)
            .unwrap()
            .verify(&request.body, &signed)
            .expect("signed with the key from the file");
    }
}

/// A `${file:…}` that cannot be read stops the queue file from loading, with the
/// file, the line, the key and why; one in a key that holds no secret, or a
/// relative path, is refused with what to write instead.
#[tokio::test]
async fn a_secret_file_that_cannot_be_read_names_the_file_and_the_key() {
    let files = QueueFiles::new();
    let missing = files.path().join("missing");
    let queue = files.write(
        "hooks.toml",
        &format!(
            r#"database_url = "${{file:{m}}}"
select = "SELECT id FROM hook WHERE state = 'waiting'"
[action]
type = "http"
url = "http://127.0.0.1:9/${{file:{m}}}"
headers = {{ Authorization = "Bearer ${{file:{m}}}" }}
signing_secret = "${{file:secrets/key}}"
[on_failure]
sql = "UPDATE hook SET state = 'failed' WHERE id = :id"
"#,
            m = missing.display()
        ),
    );
    let done = run_to_end(
        tableq(&["check", "--offline", queue.to_str().unwrap()]),
        Duration::from_secs(60),
    )
    .await;
    let at = |line: usize| format!("{}:{line}: queue hooks: error: ", queue.display());
    let unreadable = format!(
        "`${{file:…}}`: cannot read {}: No such file or directory (os error 2)",
        missing.display()
    );
    let expected = [
        format!("{}`database_url`: {unreadable}", at(1)),
        format!(
            "{}`action.url`: `${{file:…}}` is read only where a secret goes (`database_url`, \
             `action.signing_secret`, `action.headers`); here use `${{NAME}}`",
            at(5)
        ),
        format!("{}header `Authorization`: {unreadable}", at(6)),
        format!(
            "{}`action.signing_secret`: `${{file:secrets/key}}` is not an absolute path: name \
             the file from the root, e.g. `${{file:/run/secrets/database-url}}`",
            at(7)
        ),
    ];
    let mut found: Vec<&str> = done
        .stdout
        .lines()
        .filter(|l| l.contains(": error: "))
        .collect();
    found.sort();
    let mut expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    expected.sort();
    assert_eq!(found, expected, "{}", done.stdout);
    assert_eq!(done.code(), Some(1));
}

/// `check` warns of a `${file:…}` that every user can read, at the key that reads it.
#[tokio::test]
async fn check_warns_of_a_secret_file_others_can_read() {
    let files = QueueFiles::new();
    let token = secret(&files, "token", "t0ken", 0o604);
    let queue = files.write(
        "hooks.toml",
        &format!(
            r#"select = "SELECT id FROM hook WHERE state = 'waiting'"
[action]
type = "http"
url = "http://127.0.0.1:9/hook"
headers = {{ Authorization = "Bearer ${{file:{}}}" }}
[on_failure]
sql = "UPDATE hook SET state = 'failed' WHERE id = :id"
"#,
            token.display()
        ),
    );
    let done = run_to_end(
        tableq(&["check", "--offline", queue.to_str().unwrap()]),
        Duration::from_secs(60),
    )
    .await;
    let warning = format!(
        "{}:5: queue hooks: warning: `action.headers.Authorization` reads its secret from {1}, \
         which every user of this machine can read (mode 604): `chmod o-r {1}` so that only \
         its owner (and group) can",
        queue.display(),
        token.display()
    );
    assert_eq!(
        done.stdout.lines().collect::<Vec<_>>(),
        [
            warning.as_str(),
            "checked 1 queue offline: 0 errors, 1 warning"
        ],
        "{}",
        done.stdout
    );
}

/// A key rotated in its file makes the reloaded queue differ, so SIGHUP starts it
/// with the new key (the key itself never shows in the queue's `Debug`).
#[test]
fn a_rotated_key_file_changes_the_queue() {
    let files = QueueFiles::new();
    let key_file = secret(
        &files,
        "signing-key",
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        0o600,
    );
    let queue = QueueFile::new("hooks")
        .select("SELECT id FROM hook WHERE state = 'waiting'")
        .action_http("http://127.0.0.1:9/hook")
        .action_set(
            "signing_secret",
            format!("${{file:{}}}", key_file.display()),
        )
        .on_failure("UPDATE hook SET state = 'failed' WHERE id = :id")
        .write(&files);
    let before = support::load(std::slice::from_ref(&queue));
    std::fs::write(&key_file, "whsec_dGFibGVxLXRlc3Qtc2VjcmV0LTIwMjY=\n").unwrap();
    let after = support::load(std::slice::from_ref(&queue));
    assert!(!before[0].same_as(&after[0]), "the new key went unnoticed");
    assert!(support::load(&[queue])[0].same_as(&after[0]));
    assert!(!format!("{:?}", after[0]).contains("dGFibGVx"));
}
