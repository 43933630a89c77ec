//! `tableq pause` and `tableq resume`: every running copy stops claiming within
//! `poll_interval` plus a second and goes on after `resume` or when `--for` runs
//! out; a paused queue is shown as paused (status page, `/status.json`,
//! `tableq_queue_paused`, `/readyz` ready with a note), locks nothing and sends at
//! most one read per `poll_interval`; a user who may not create or write the table
//! is told which grant is missing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use mysql_async::prelude::Queryable;

use crate::support::daemon::{run_to_end, tableq, Daemon, Finished};
use crate::support::endpoint::{get, start_with_metrics, start_with_metrics_alone};
use crate::support::scrape::sample;
use crate::support::{assert_has, eventually, private_db, QueueFile, QueueFiles, TestDb};

const POLL: Duration = Duration::from_secs(2);
/// The promise: every copy stops claiming within `poll_interval` plus this.
const REACHED_WITHIN: Duration = Duration::from_secs(1);

async fn job_table(db: &TestDb) {
    db.exec(
        "CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting', \
         KEY (state)) DEFAULT CHARSET=utf8mb4",
    )
    .await;
}

/// A database with an empty [`job_table`], and a directory for queue files.
async fn jobs_and_files() -> (TestDb, QueueFiles) {
    let db = TestDb::new().await;
    job_table(&db).await;
    (db, QueueFiles::new())
}

/// Adds jobs `from..to`, waiting.
async fn add_jobs(db: &TestDb, from: u32, to: u32) {
    let values: Vec<String> = (from..to).map(|id| format!("({id})")).collect();
    db.exec(&format!("INSERT INTO job (id) VALUES {}", values.join(",")))
        .await;
}

async fn done(db: &TestDb) -> u64 {
    db.count("SELECT COUNT(*) FROM job WHERE state = 'done'")
        .await
}

/// Queue `name` of `job`, polling every [`POLL`].
fn queue(name: &str) -> QueueFile {
    QueueFile::new(name)
        .select("SELECT id FROM job WHERE state = 'waiting' ORDER BY id")
        .workers(2)
        .poll_interval("2s")
        .action_sql("DO :id, SLEEP(0.02)")
        .on_success("UPDATE job SET state = 'done' WHERE id = :id")
}

/// `tableq ARGS… FILE` as the database URL's user, to its end.
async fn operate(url: &str, file: &Path, args: &[&str]) -> Finished {
    let mut cmd = tableq(args);
    cmd.arg(file).env("TABLEQ_DATABASE_URL", url);
    run_to_end(cmd, Duration::from_secs(60)).await
}

/// [`operate`], which must succeed and, where `says` is given, print it.
async fn operate_ok(url: &str, file: &Path, args: &[&str], says: Option<&str>) -> Finished {
    let done = operate(url, file, args).await;
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    if let Some(says) = says {
        assert_has(&done.stdout, says);
    }
    done
}

async fn claims(base: &str, queue: &str) -> Option<f64> {
    let text = get(&format!("{base}/metrics")).await.1;
    sample(
        &text,
        &format!(r#"tableq_claim_duration_seconds_count{{queue="{queue}"}}"#),
    )
}

async fn paused_gauge(base: &str, queue: &str) -> Option<f64> {
    let text = get(&format!("{base}/metrics")).await.1;
    sample(&text, &format!(r#"tableq_queue_paused{{queue="{queue}"}}"#))
}

/// When the daemon (logging JSON) first logged `phrase`.
fn logged_at(daemon: &Daemon, phrase: &str) -> SystemTime {
    let log = daemon.stderr();
    let line = log.lines().find(|l| l.contains(phrase)).expect(phrase);
    let event: serde_json::Value = serde_json::from_str(line).expect("a JSON log line");
    humantime::parse_rfc3339(event["timestamp"].as_str().expect("a timestamp")).unwrap()
}

/// Waits until each copy logs that it is paused; the longest it took after
/// `written` (by their logs) is within `poll_interval` + 1 s.
async fn every_copy_pauses(copies: &[(Daemon, String)], written: SystemTime) {
    let mut reached = Duration::ZERO;
    for (daemon, _) in copies {
        daemon
            .wait_for_log("the queue is paused", POLL + Duration::from_secs(30))
            .await;
        let at = logged_at(daemon, "the queue is paused");
        reached = reached.max(at.duration_since(written).unwrap_or_default());
    }
    println!("both copies paused {reached:?} after the pause was written (by their logs)");
    assert!(
        reached <= POLL + REACHED_WITHIN,
        "both copies stop claiming within poll_interval + 1 s: took {reached:?}"
    );
}

/// Rows added while paused: three polls of each copy later, none is done and no
/// copy claimed; each shows the paused gauge.
async fn nothing_is_claimed_while_paused(db: &TestDb, copies: &[(Daemon, String)]) {
    let mut before = Vec::new();
    for (_, base) in copies {
        assert_eq!(paused_gauge(base, "outbox").await, Some(1.0));
        before.push(claims(base, "outbox").await);
    }
    add_jobs(db, 11, 41).await;
    tokio::time::sleep(3 * POLL).await;
    assert_eq!(done(db).await, 10, "nothing is done while paused");
    for ((_, base), before) in copies.iter().zip(&before) {
        assert_eq!(
            &claims(base, "outbox").await,
            before,
            "no claim while paused"
        );
    }
}

/// Two copies of a queue: `pause` stops both within `poll_interval` + 1 s, nothing
/// is claimed while paused, `resume` lets both go on and every row is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_stops_every_copy_and_resume_lets_them_go_on() {
    let (db, files) = jobs_and_files().await;
    let file = queue("outbox").write(&files);
    let copies = [
        start_with_metrics(&files, &db.url).await,
        start_with_metrics(&files, &db.url).await,
    ];
    add_jobs(&db, 1, 11).await;
    eventually(
        "both copies work the first rows",
        Duration::from_secs(60),
        || async { done(&db).await == 10 },
    )
    .await;
    let pause = ["pause", "--queue", "outbox", "--reason", "deploy"];
    operate_ok(&db.url, &file, &pause, Some("queue outbox paused on ")).await;
    every_copy_pauses(&copies, SystemTime::now()).await;
    nothing_is_claimed_while_paused(&db, &copies).await;
    let resume = ["resume", "--queue", "outbox"];
    operate_ok(&db.url, &file, &resume, Some("queue outbox resumed on ")).await;
    for (daemon, _) in &copies {
        daemon
            .wait_for_log(
                "the queue is resumed: it claims again",
                POLL + Duration::from_secs(30),
            )
            .await;
    }
    eventually(
        "every row is done after resume",
        Duration::from_secs(60),
        || async { done(&db).await == 40 },
    )
    .await;
    for (mut daemon, base) in copies {
        assert_eq!(paused_gauge(&base, "outbox").await, Some(0.0));
        daemon.terminate().await;
    }
    operate_ok(&db.url, &file, &resume, Some("queue outbox was not paused")).await;
}

/// `--for` runs out by itself; meanwhile the status page, `/status.json`, the
/// metrics and `/readyz` (ready, with a note) show the pause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_for_a_while_runs_out_and_is_shown_meanwhile() {
    let (db, files) = jobs_and_files().await;
    let file = queue("digest").write(&files);
    let (mut daemon, base) = start_with_metrics(&files, &db.url).await;
    daemon
        .wait_for_log("queue started", Duration::from_secs(30))
        .await;
    let pause = [
        "pause",
        "--queue",
        "digest",
        "--for",
        "10s",
        "--reason",
        "db <maintenance>",
    ];
    operate_ok(&db.url, &file, &pause, Some("for 10s (until ")).await;
    daemon
        .wait_for_log("the queue is paused", Duration::from_secs(30))
        .await;
    add_jobs(&db, 1, 6).await;

    let json: serde_json::Value =
        serde_json::from_str(&get(&format!("{base}/status.json")).await.1).unwrap();
    let pause = &json["queues"][0]["paused"];
    assert_eq!(pause["reason"], "db <maintenance>", "{json}");
    assert!(
        pause["by"].as_str().unwrap().starts_with("root@"),
        "{pause}"
    );
    assert!(
        pause["until_at"].as_u64() > pause["since_at"].as_u64(),
        "{pause}"
    );
    assert_eq!(json["summary"]["paused"], 1);
    let page = get(&format!("{base}/")).await.1;
    assert!(
        page.contains("data-field=\"paused\">paused (db &lt;maintenance&gt;) by root@"),
        "{page}"
    );
    let (status, ready) = get(&format!("{base}/readyz")).await;
    assert_eq!(status, 200, "a paused queue is ready: {ready}");
    assert!(ready.contains("queue digest: paused by root@"), "{ready}");
    assert_eq!(paused_gauge(&base, "digest").await, Some(1.0));
    assert_eq!(done(&db).await, 0, "nothing done while paused");

    daemon
        .wait_for_log(
            "the queue is resumed: it claims again",
            Duration::from_secs(30),
        )
        .await;
    eventually(
        "the rows are done once the pause ran out",
        Duration::from_secs(30),
        || async { done(&db).await == 5 },
    )
    .await;
    assert_eq!(paused_gauge(&base, "digest").await, Some(0.0));
    let json: serde_json::Value =
        serde_json::from_str(&get(&format!("{base}/status.json")).await.1).unwrap();
    assert!(json["queues"][0]["paused"].is_null(), "{json}");
    daemon.terminate().await;
}

/// The server's global counter `name`.
async fn global_status(conn: &mut mysql_async::Conn, name: &str) -> u64 {
    let row: Option<(String, u64)> = conn
        .query_first(format!("SHOW GLOBAL STATUS LIKE '{name}'"))
        .await
        .expect("SHOW GLOBAL STATUS");
    row.expect(name).1
}

/// Waits until the start-up's statements are over (its workers' sessions set up:
/// several SELECTs each, late on a loaded machine): two seconds with at most three
/// SELECTs.
async fn settled(conn: &mut mysql_async::Conn) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let before = global_status(conn, "Com_select").await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        if global_status(conn, "Com_select").await - before <= 3 {
            return;
        }
        assert!(Instant::now() < deadline, "the paused queue never settled");
    }
}

/// A paused queue of four workers reads the pause once per `poll_interval` and sends
/// nothing else: on a server of its own, `Com_select` grows by about one per poll
/// (and every statement the server got is that read or the ROLLBACK that ends it);
/// its rows stay unlocked. Resumed and empty, it sends the claim, its end and the
/// read of the pause in the claim's transaction: three statements per poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_queue_reads_once_per_poll_and_locks_nothing() {
    let (_server, db) = private_db(&[]).await;
    job_table(&db).await;
    add_jobs(&db, 1, 21).await;
    let files = QueueFiles::new();
    let file = queue("quiet")
        .workers(4)
        .poll_interval("1s")
        .set("stats_interval", "1h")
        .write(&files);
    operate_ok(&db.url, &file, &["pause", "--queue", "quiet"], None).await;
    let (mut daemon, base) = start_with_metrics_alone(&files, &db.url).await;
    daemon
        .wait_for_log("the queue is paused", Duration::from_secs(30))
        .await;
    // After the start-up (the first backlog count among it).
    eventually("the first count", Duration::from_secs(30), || async {
        let text = get(&format!("{base}/metrics")).await.1;
        sample(&text, r#"tableq_waiting{queue="quiet"}"#).is_some()
    })
    .await;

    let mut conn = db.conn().await;
    settled(&mut conn).await;
    let (selects, questions, polls) = statements_over(&mut conn).await;
    println!(
        "paused, 4 workers, poll_interval 1s: {selects} SELECTs and {questions} statements in {polls:.1} s"
    );
    assert!(
        (polls as u64 / 3..=polls as u64 + 1).contains(&selects),
        "at most one read per poll_interval, and reads: {selects} SELECTs in {polls:.1} s"
    );
    assert!(
        questions <= 2 * selects + 1,
        "nothing but the read and its ROLLBACK: {questions} statements, {selects} SELECTs"
    );
    let locked: Vec<u32> = conn
        .query("SELECT id FROM job FOR UPDATE NOWAIT")
        .await
        .expect("a paused queue locks no row");
    assert_eq!(locked.len(), 20);
    assert_eq!(done(&db).await, 0);

    // Not paused, and empty: the claim and the read of the pause in its transaction.
    db.exec("UPDATE job SET state = 'done'").await;
    operate_ok(&db.url, &file, &["resume", "--queue", "quiet"], None).await;
    daemon
        .wait_for_log("the queue is resumed", Duration::from_secs(30))
        .await;
    settled(&mut conn).await;
    let (selects, questions, polls) = statements_over(&mut conn).await;
    println!("empty, not paused: {selects} SELECTs and {questions} statements in {polls:.1} s");
    assert!(
        questions <= 3 * (polls as u64 + 1),
        "the pause read, the claim and its end per poll: {questions} statements in {polls:.1} s"
    );
    daemon.terminate().await;
}

/// The SELECTs and the statements of every kind the server got in 10 s (less this
/// test's own), and the seconds.
async fn statements_over(conn: &mut mysql_async::Conn) -> (u64, u64, f64) {
    let (selects, questions) = (
        global_status(conn, "Com_select").await,
        global_status(conn, "Questions").await,
    );
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let secs = started.elapsed().as_secs_f64();
    let selects = global_status(conn, "Com_select").await - selects;
    // Less the two SHOW STATUS of this test since the first reading of Questions.
    let questions = (global_status(conn, "Questions").await - questions).saturating_sub(2);
    (selects, questions, secs)
}

/// A user who may not create the table is told to grant CREATE (or to have it
/// created); once it exists, a user who may only read it is told which grant
/// writing needs. Each GRANT named is one the server runs, for the account as the
/// server names it (`'user'@'%'`), and after it the command works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_grant_is_named() {
    let db = TestDb::new().await;
    job_table(&db).await;
    let user = format!("p{}", &db.name[3..].replace('_', ""));
    let user = &user[..user.len().min(32)];
    db.exec(&format!(
        "CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'; \
         GRANT SELECT, INSERT, UPDATE, DELETE ON `{db}`.* TO '{user}'@'%'",
        db = db.name
    ))
    .await;
    let as_user = db.url.replacen("root@", &format!("{user}:pw@"), 1);
    let files = QueueFiles::new();
    let file: PathBuf = queue("grants").write(&files);

    let refused = operate(&as_user, &file, &["pause", "--queue", "grants"]).await;
    assert_eq!(refused.code(), Some(1), "{}", refused.stderr);
    let create = format!("GRANT CREATE ON `{}`.* TO '{user}'@'%'", db.name);
    for said in [
        &format!("queue grants: cannot pause: user '{user}'@'%' may not create tableq's table"),
        &create,
    ] {
        assert!(
            refused.stderr.contains(said),
            "{said:?} in {}",
            refused.stderr
        );
    }
    assert!(
        !refused.stderr.contains("pw@"),
        "no password: {}",
        refused.stderr
    );

    // The grant as said: the user's pause creates the table.
    db.exec(&create).await;
    operate_ok(&as_user, &file, &["pause", "--queue", "grants"], None).await;
    operate_ok(&as_user, &file, &["resume", "--queue", "grants"], None).await;

    // Read-only on the table: writing is refused, naming the grant.
    db.exec(&format!(
        "REVOKE INSERT, UPDATE, DELETE ON `{db}`.* FROM '{user}'@'%'",
        db = db.name
    ))
    .await;
    let grant = format!(
        "GRANT SELECT, INSERT, UPDATE, DELETE ON `{}`.`tableq_paused` TO '{user}'@'%'",
        db.name
    );
    for command in ["pause", "resume"] {
        let refused = operate(&as_user, &file, &[command, "--queue", "grants"]).await;
        assert_eq!(refused.code(), Some(1), "{}", refused.stderr);
        assert!(
            refused.stderr.contains(&grant),
            "{grant:?} in {}",
            refused.stderr
        );
    }
    // The grant as said: the user pauses again.
    db.exec(&grant).await;
    let pause = ["pause", "--queue", "grants", "--for", "1h"];
    operate_ok(&as_user, &file, &pause, None).await;
    db.exec(&format!("DROP USER '{user}'@'%'")).await;
}

/// `--queue` may be left out when the files hold one queue; where they hold more,
/// the command names them and asks for one.
#[tokio::test]
async fn queue_may_be_left_out_of_a_file_of_one_queue() {
    let (db, files) = jobs_and_files().await;
    let file = queue("solo").write(&files);
    let paused = operate_ok(&db.url, &file, &["pause", "--reason", "deploy"], None).await;
    assert!(
        paused.stdout.starts_with("queue solo paused"),
        "{}",
        paused.stdout
    );
    db.assert_count("SELECT COUNT(*) FROM tableq_paused WHERE queue = 'solo'", 1)
        .await;
    let resumed = operate_ok(&db.url, &file, &["resume"], None).await;
    assert!(
        resumed.stdout.starts_with("queue solo resumed"),
        "{}",
        resumed.stdout
    );

    queue("other").write(&files);
    let refused = operate(&db.url, &files.path(), &["pause"]).await;
    assert_eq!(refused.code(), Some(2), "{}", refused.stderr);
    assert_has(
        &refused.stderr,
        "these files hold 2 queues (other, solo): choose one with --queue NAME",
    );
}
