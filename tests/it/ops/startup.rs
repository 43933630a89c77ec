//! Starting up as an operator sees it: a wrong password or a missing grant is a
//! configuration error (exit 2) that names the user, the server and the database but
//! never the password; a connection error names host:port; log lines to a pipe or a
//! file carry no escape codes, and none of their own timestamps under the journal;
//! every queue is listed as starting from the first moment.

use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use crate::support::daemon::{run_to_end, tableq, Daemon};
use crate::support::endpoint::{get, start_with_metrics};
use crate::support::{
    assert_has, eventually, free_port, job_table, waiting_jobs, QueueFiles, TestDb,
};

fn queue(files: &QueueFiles) -> std::path::PathBuf {
    waiting_jobs("jobs").action_sql("DO 1").write(files)
}

/// `db.url` with `user:password` in place of root.
fn as_user(db: &TestDb, user: &str, password: &str) -> String {
    db.url.replacen("root@", &format!("{user}:{password}@"), 1)
}

/// A wrong password (1045) and a user without access to the database (1044) stop
/// `run` at once with exit 2, naming user, server and database, never the password;
/// `check` says the same words (not "cannot reach the database").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_login_exits_2_naming_user_host_and_database() {
    let db = TestDb::new().await;
    job_table(&db, &[]).await;
    let user = format!("u{}", &db.name[3..].replace('_', ""));
    db.exec(&format!(
        "CREATE USER '{user}'@'%' IDENTIFIED BY 'right-secret'; CREATE USER '{user}'@'localhost' IDENTIFIED BY 'right-secret'"
    ))
    .await;
    let files = QueueFiles::new();
    let file = queue(&files);
    let address = db
        .url
        .split('@')
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    for (password, why) in [("wr0ng-pass", "1045"), ("right-secret", "1044")] {
        let mut cmd = tableq(&["run"]);
        cmd.arg(&file)
            .env("TABLEQ_DATABASE_URL", as_user(&db, &user, password));
        let done = run_to_end(cmd, Duration::from_secs(30)).await;
        assert_eq!(done.code(), Some(2), "{why}: {}", done.stderr);
        for expected in [
            format!(
                "the server at {address} refused user `{user}` for database `{}`",
                db.name
            ),
            format!("ERROR {why}"),
        ] {
            assert!(
                done.stderr.contains(&expected),
                "{expected}: {}",
                done.stderr
            );
        }
        assert!(!done.stderr.contains(password), "{}", done.stderr);
        assert!(!done.stderr.contains("queue started"), "{}", done.stderr);
        let mut cmd = tableq(&["check"]);
        cmd.arg(&file)
            .env("TABLEQ_DATABASE_URL", as_user(&db, &user, password));
        let checked = run_to_end(cmd, Duration::from_secs(30)).await;
        assert_eq!(checked.code(), Some(1), "{why}: {}", checked.stdout);
        let refused = format!("refused user `{user}` for database `{}`", db.name);
        assert_has(&checked.stdout, &refused);
        assert_has(&checked.stdout, "check the user and password");
        assert!(
            !checked.stdout.contains("cannot reach"),
            "{}",
            checked.stdout
        );
        assert!(!checked.stdout.contains(password), "{}", checked.stdout);
    }
    db.exec(&format!(
        "DROP USER '{user}'@'%'; DROP USER '{user}'@'localhost'"
    ))
    .await;
}

/// `count` against a port where nothing listens names that host and port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_error_names_host_and_port() {
    let port = free_port();
    let files = QueueFiles::new();
    let file = queue(&files);
    let mut cmd = tableq(&["count"]);
    cmd.arg(&file).env(
        "TABLEQ_DATABASE_URL",
        format!("mysql://app:s3cret@127.0.0.1:{port}/shop"),
    );
    let done = run_to_end(cmd, Duration::from_secs(30)).await;
    assert_eq!(done.code(), Some(1), "{}", done.stderr);
    assert_has(&done.stderr, &format!("cannot connect to 127.0.0.1:{port}"));
    assert!(!done.stderr.contains("s3cret"), "{}", done.stderr);
}

/// Logs to a pipe carry no escape codes, even with colour not switched off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_to_a_pipe_carry_no_escape_codes() {
    let db = TestDb::new().await;
    job_table(&db, &[]).await;
    let files = QueueFiles::new();
    let mut cmd = tableq(&["run"]);
    cmd.arg(queue(&files))
        .env("TABLEQ_DATABASE_URL", &db.url)
        .env_remove("NO_COLOR");
    let mut daemon = Daemon::spawn(cmd);
    daemon
        .wait_for_log("queue started", Duration::from_secs(30))
        .await;
    daemon.terminate().await;
    let log = daemon.stderr();
    assert!(!log.contains('\x1b'), "{log:?}");
    assert!(
        log.lines().all(|l| l.starts_with("20")),
        "timestamped: {log}"
    );
}

/// When stderr is the stream `JOURNAL_STREAM` names, lines carry no timestamp (the
/// journal adds its own) and start with their syslog priority, `<4>` for a warning,
/// so `journalctl -p warning` finds them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_journal_lines_carry_no_timestamp() {
    let files = QueueFiles::new();
    let path = files.path().join("stderr.log");
    let stderr = std::fs::File::create(&path).unwrap();
    let meta = stderr.metadata().unwrap();
    // A database that cannot be reached: tableq logs it at once, and waits.
    let mut cmd = tableq(&["run"]);
    cmd.arg(queue(&files))
        .env("TABLEQ_DATABASE_URL", "mysql://root@127.0.0.1:1/x")
        .env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()))
        .stdout(std::process::Stdio::null())
        .stderr(stderr);
    let mut child = cmd.spawn().unwrap();
    let log = || std::fs::read_to_string(&path).unwrap();
    eventually("a log line", Duration::from_secs(30), || async {
        log().contains("cannot connect")
    })
    .await;
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0), "{}", log());
    let log = log();
    for line in log.lines() {
        let (priority, rest) = line
            .strip_prefix('<')
            .and_then(|l| l.split_once('>'))
            .unwrap_or_else(|| panic!("no priority: {line}"));
        let level = rest.trim_start().get(..4).unwrap_or("");
        let expected = match level {
            "INFO" => "6",
            "WARN" => "4",
            "ERRO" => "3",
            _ => panic!("not a level, or a timestamp first: {line}"),
        };
        assert_eq!(priority, expected, "{line}");
    }
    assert!(
        log.lines()
            .any(|l| l.starts_with("<4>") && l.contains("cannot connect")),
        "{log}"
    );
}

/// With no root certificates on the machine (an empty store, as in a slim image
/// without ca-certificates), an HTTP queue is refused at start with the reason and
/// the fix, and `check` reports the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_certificate_store_is_named_by_run_and_check() {
    let files = QueueFiles::new();
    let empty_dir = files.path().join("certs");
    std::fs::create_dir(&empty_dir).unwrap();
    let empty_file = files.write("roots.pem", "");
    let file = waiting_jobs("hooks")
        .action_http("http://127.0.0.1:9/{id}")
        .write(&files);
    let expected = "cannot set up the HTTP client: no root certificates found";
    let fix = "install ca-certificates, or set `ca_file`";
    for args in [&["run"][..], &["check", "--offline"][..]] {
        let mut cmd = tableq(args);
        cmd.arg(&file)
            .env("TABLEQ_DATABASE_URL", "mysql://root@127.0.0.1:1/none")
            .env("SSL_CERT_FILE", &empty_file)
            .env("SSL_CERT_DIR", &empty_dir);
        let done = run_to_end(cmd, Duration::from_secs(30)).await;
        let said = format!("{}{}", done.stdout, done.stderr);
        assert!(
            said.contains(expected) && said.contains(fix),
            "{args:?}: {said}"
        );
        let code = if args[0] == "run" { 2 } else { 1 };
        assert_eq!(done.code(), Some(code), "{args:?}: {said}");
    }
}

/// Every configured queue is listed at once, as starting, while `run` opens the
/// queues' first connections (one waits for a server that never answers): on the
/// status page, in `/status.json`, and in `/readyz`'s answer; once started, running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_queue_is_listed_as_starting_at_once() {
    let db = TestDb::new().await;
    job_table(&db, &[1]).await;
    let files = QueueFiles::new();
    waiting_jobs("quick").action_sql("DO 1").write(&files);
    let silent = crate::support::web::silent_server().await;
    waiting_jobs("stalled")
        .database_url(&format!("mysql://root@{silent}/away"))
        .set("database_timeout", "10s")
        .action_sql("DO 1")
        .write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    let json: serde_json::Value =
        serde_json::from_str(&get(&format!("{base}/status.json")).await.1).unwrap();
    let states: Vec<(&str, &str)> = json["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| (q["name"].as_str().unwrap(), q["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [("quick", "starting"), ("stalled", "starting")],
        "{json}"
    );
    assert_eq!(json["summary"]["starting"], 2, "{json}");
    let page = get(&format!("{base}/")).await.1;
    assert!(
        page.contains("data-field=\"starting\">starting: opening its first connection"),
        "{page}"
    );
    let (status, ready) = get(&format!("{base}/readyz")).await;
    assert_eq!(status, 503, "{ready}");
    for queue in ["quick", "stalled"] {
        assert!(
            ready.contains(&format!("queue {queue} is starting")),
            "{ready}"
        );
    }
    eventually("the queues started", Duration::from_secs(60), || async {
        let json: serde_json::Value =
            serde_json::from_str(&get(&format!("{base}/status.json")).await.1).unwrap();
        json["queues"][0]["state"] == "running" && json["queues"][1]["state"] == "running"
    })
    .await;
    daemon.terminate().await;
}
