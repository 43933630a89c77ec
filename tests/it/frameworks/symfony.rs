//! Symfony Messenger's Doctrine transport run in place by tableq, with the bridge
//! (`bridges/symfony`, `bin/console tableq:consume async`) as its worker, on a real
//! Symfony 5.4 app (`support::symfony`): the bridge alone answers each row on stdout
//! and nothing else; messages sent with `$bus->dispatch(...)` are handled once each; `kill -9` of tableq or of a bridge process loses none; a
//! handler that throws goes through the transport's retry strategy (1 s, 2 s) to the
//! failure transport, where `tableq failed` and `tableq retry` see it; a DelayStamp is
//! waited for; `messenger:consume` side by side takes no message twice; a PHP fatal
//! error fails the item with PHP's message; `tableq check` proves the file.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use crate::support::daemon::{copy, run_binary_until_empty, run_to_end, tableq};
use crate::support::process::{children, is_gone};
use crate::support::symfony::{app, SymfonyApp};
use crate::support::{assert_has, eventually, QueueFiles, TestDb};

/// The rows of the `default` queue Symfony's consumer could still deliver (an ack of
/// `messenger:consume` on MySQL leaves its row, `delivered_at` 9999-12-31, to delete
/// later).
const UNDELIVERED: &str = "SELECT COUNT(*) FROM messenger_messages WHERE queue_name = 'default'
    AND (delivered_at IS NULL OR delivered_at <> '9999-12-31 23:59:59')";

/// The app on a fresh database with its tables, and a directory for queue files.
async fn fresh(app: &SymfonyApp) -> (TestDb, QueueFiles) {
    let db = TestDb::new().await;
    app.setup(&db).await;
    (db, QueueFiles::new())
}

/// Every `CountMe` of 1..=`messages` completed at least once.
async fn all_completed(db: &TestDb, messages: u64) {
    db.assert_count_because(
        "SELECT COUNT(*) FROM handled WHERE completions >= 1",
        messages,
        "every message completed",
    )
    .await;
}

/// The bridge on its own: fed the transport's rows on stdin, it answers each on
/// stdout — done, or failed with the handler's exception, or a line that is no row —
/// and nothing else: a handler's echo goes to stderr; the end of stdin ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_answers_each_row_on_stdout_and_nothing_else() {
    let Some(app) = app() else { return };
    let (db, _files) = fresh(app).await;
    app.dispatch(&db, "count", 1, 1, &[]).await;
    app.dispatch(&db, "explode", 2, 1, &[]).await;
    let rows: Vec<(String,)> = db
        .rows(
            "SELECT JSON_OBJECT('id', id, 'body', body, 'headers', headers, 'queue_name',
               queue_name, 'created_at', created_at, 'available_at', available_at,
               'delivered_at', delivered_at) FROM messenger_messages ORDER BY id",
        )
        .await;
    let mut input: String = rows.into_iter().map(|(row,)| row + "\n").collect();
    input.push_str("not a row\n");
    let mut cmd = tokio::process::Command::from(app.console(&db, &["tableq:consume", "async"]));
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut bridge = cmd.spawn().expect("start tableq:consume");
    let mut stdin = bridge.stdin.take().expect("a piped stdin");
    stdin
        .write_all(input.as_bytes())
        .await
        .expect("write the rows");
    drop(stdin);
    let done = tokio::time::timeout(Duration::from_secs(30), bridge.wait_with_output())
        .await
        .expect("the bridge ends with its input")
        .expect("run the bridge");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr),
    );
    assert!(done.status.success(), "{stderr}");
    assert_eq!(
        stdout,
        "{\"ok\":true}\n{\"ok\":false,\"error\":\"RuntimeException: boom 2\",\"kind\":\"RuntimeException\"}\n\
         {\"ok\":false,\"error\":\"JsonException: Syntax error\"}\n",
        "stderr: {stderr}"
    );
    assert_has(&stderr, "handled 1");
    db.assert_count("SELECT completions FROM handled WHERE number = 1", 1)
        .await;
    db.assert_count_because(
        "SELECT COUNT(*) FROM sent WHERE TIMESTAMPDIFF(SECOND, created_at, available_at) = 1",
        1,
        "Symfony's retry listener sent the failed one again, 1 s later",
    )
    .await;
}

/// 2,000 messages through four bridge processes: each handled exactly once, and
/// nothing left in the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_is_handled_once_and_nothing_is_left() {
    let Some(app) = app() else { return };
    let (db, files) = fresh(app).await;
    app.dispatch(&db, "count", 1, 2000, &[]).await;
    let file = app.queue_file(&db, &files, "sf_once", 3600).await;
    let run = run_binary_until_empty(&file, &db.url).await;
    all_completed(&db, 2000).await;
    db.assert_count_because("SELECT SUM(executions) FROM handled", 2000, "none twice")
        .await;
    db.assert_count_because(
        "SELECT COUNT(*) FROM handled WHERE via = 'sf_once'",
        2000,
        "all by tableq's workers",
    )
    .await;
    db.assert_count("SELECT COUNT(*) FROM messenger_messages", 0)
        .await;
    // A handler's echo reaches tableq's log, not the answers.
    assert_has(&run.stderr, "handled 2000");
}

/// `kill -9` of a bridge process, then of tableq, mid-run: every message still
/// completes, and only those in flight at a kill run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_a_bridge_and_of_tableq_loses_no_message() {
    let Some(app) = app() else { return };
    let (db, files) = fresh(app).await;
    app.dispatch(&db, "count", 1, 2000, &["--work-ms=3"]).await;
    // Rows a killed tableq had claimed come back after Messenger's redeliver timeout.
    let file = app.queue_file(&db, &files, "sf_kill", 5).await;
    let mut first = copy(&file, &db.url);
    db.until_count_at_least("SELECT COUNT(*) FROM handled", 300, 60)
        .await;
    let bridge = *children(first.pid()).first().expect("a bridge process");
    unsafe { libc::kill(bridge, libc::SIGKILL) };
    db.until_count_at_least("SELECT COUNT(*) FROM handled", 900, 60)
        .await;
    first.signal(libc::SIGKILL);
    first.wait(Duration::from_secs(10)).await;
    let mut second = copy(&file, &db.url);
    db.until_count(UNDELIVERED, 0, 90).await;
    second.terminate().await;
    all_completed(&db, 2000).await;
    let again = db
        .count("SELECT SUM(executions) - COUNT(*) FROM handled")
        .await;
    let unfinished = db
        .count("SELECT SUM(executions) - SUM(completions) FROM handled")
        .await;
    // In flight: the killed bridge's one message, tableq's four workers' at its kill.
    assert!(again <= 5, "{again} messages ran again");
    assert!(unfinished <= 5, "{unfinished} runs did not finish");
    assert!(is_gone(bridge));
}

/// A handler that throws: Symfony's retry strategy sends it again after 1 s and
/// 2 s (the new rows' available_at), then to the failure transport; `tableq failed`
/// lists it there and `tableq retry` puts it back, and it runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throwing_handler_is_retried_then_failed_and_tableq_retry_puts_it_back() {
    let Some(app) = app() else { return };
    let (db, files) = fresh(app).await;
    app.dispatch(&db, "explode", 7, 1, &[]).await;
    let file = app.queue_file(&db, &files, "sf_retry", 3600).await;
    let mut daemon = copy(&file, &db.url);
    let failed = "SELECT COUNT(*) FROM messenger_messages WHERE queue_name = 'failed'";
    db.until_count(failed, 1, 60).await;
    db.assert_count("SELECT COUNT(*) FROM attempts", 3).await;
    let delays: Vec<(String, i64)> = db
        .rows("SELECT queue_name, TIMESTAMPDIFF(SECOND, created_at, available_at) FROM sent ORDER BY id")
        .await;
    let expected = [
        ("default", 0),
        ("default", 1),
        ("default", 2),
        ("failed", 0),
    ];
    let expected: Vec<(String, i64)> = expected.iter().map(|(q, d)| (q.to_string(), *d)).collect();
    assert_eq!(
        delays, expected,
        "sent, retried after 1 s and 2 s, then failed"
    );
    daemon
        .wait_for_log("RuntimeException: boom 7", Duration::from_secs(10))
        .await;

    let listed = operate(&db, &file, &["failed"]).await;
    let id: u64 = db
        .scalar("SELECT id FROM messenger_messages WHERE queue_name = 'failed'")
        .await;
    assert_has(&listed, &id.to_string());
    operate(&db, &file, &["retry", "--queue", "sf_retry", "--all"]).await;
    db.until_count(failed, 0, 10).await;
    // It runs again, with its retries again, and lands in the failure transport again.
    db.until_count("SELECT COUNT(*) FROM attempts", 6, 60).await;
    db.until_count(failed, 1, 30).await;
    db.assert_count(UNDELIVERED, 0).await;
    daemon.terminate().await;
}

/// `tableq check` proves `tableq new symfony`'s file on the table Messenger set up,
/// and starts the bridge, which ends when its input does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_proves_the_generated_file_on_messengers_own_table() {
    let Some(app) = app() else { return };
    let (db, files) = fresh(app).await;
    app.dispatch(&db, "count", 1, 3, &[]).await;
    let file = app.queue_file(&db, &files, "sf_check", 3600).await;
    let mut cmd = tableq(&["check"]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
    let checked = run_to_end(cmd, Duration::from_secs(60)).await;
    let said = format!("{}{}", checked.stdout, checked.stderr);
    assert_eq!(checked.code(), Some(0), "{said}");
    assert_has(&said, "0 errors, 0 warnings");
    assert_has(
        &said,
        "tableq:consume async starts, and ends when its input does",
    );
    db.assert_count_because(UNDELIVERED, 3, "check changed no message")
        .await;
    db.assert_count("SELECT COUNT(*) FROM handled", 0).await;
}

/// `tableq ARGS… FILE` on `db`, expecting success; its stdout.
async fn operate(db: &TestDb, file: &Path, args: &[&str]) -> String {
    let mut cmd = tableq(args);
    cmd.arg(file).env("TABLEQ_DATABASE_URL", &db.url);
    let done = run_to_end(cmd, Duration::from_secs(60)).await;
    assert_eq!(done.code(), Some(0), "tableq {args:?}: {}", done.stderr);
    done.stdout
}

/// A message sent with a DelayStamp of 3 s is not handled before its available_at,
/// while one sent after it without a delay is handled at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_with_a_delay_stamp_waits() {
    let Some(app) = app() else { return };
    let (db, files) = fresh(app).await;
    app.dispatch(&db, "count", 1, 1, &["--delay-ms=3000"]).await;
    app.dispatch(&db, "count", 2, 1, &[]).await;
    let file = app.queue_file(&db, &files, "sf_delay", 3600).await;
    let mut daemon = copy(&file, &db.url);
    db.until_count("SELECT COUNT(*) FROM handled WHERE number = 2", 1, 30)
        .await;
    db.until_count("SELECT COUNT(*) FROM handled WHERE number = 1", 1, 30)
        .await;
    daemon.terminate().await;
    db.assert_count_because(
        "SELECT COUNT(*) FROM sent WHERE TIMESTAMPDIFF(SECOND, created_at, available_at) = 3",
        1,
        "the DelayStamp made available_at 3 s later",
    )
    .await;
    db.assert_count_because(
        "SELECT COUNT(*) FROM handled h JOIN sent s ON s.id = 1
         WHERE h.number = 1 AND h.first_at >= s.available_at",
        1,
        "not handled before its available_at",
    )
    .await;
}

/// Two `messenger:consume async` and tableq on the same table: every message is
/// handled exactly once, some by each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn side_by_side_with_messenger_consume_no_message_runs_twice() {
    let Some(app) = app() else { return };
    let (db, files) = fresh(app).await;
    app.dispatch(&db, "count", 1, 1000, &["--work-ms=2"]).await;
    let mut consumers: Vec<tokio::process::Child> = (0..2)
        .map(|_| {
            let mut cmd =
                tokio::process::Command::from(app.console(&db, &["messenger:consume", "async"]));
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
            cmd.kill_on_drop(true)
                .spawn()
                .expect("start messenger:consume")
        })
        .collect();
    db.until_count_at_least("SELECT COUNT(*) FROM handled", 20, 30)
        .await;
    let file = app.queue_file(&db, &files, "sf_side", 3600).await;
    let mut daemon = copy(&file, &db.url);
    db.until_count(UNDELIVERED, 0, 90).await;
    db.until_count(
        "SELECT COUNT(*) FROM handled WHERE completions = 1",
        1000,
        30,
    )
    .await;
    daemon.terminate().await;
    for consumer in &mut consumers {
        consumer.kill().await.expect("stop messenger:consume");
    }
    db.assert_count_because("SELECT SUM(executions) FROM handled", 1000, "none twice")
        .await;
    for via in ["sf_side", "messenger:consume"] {
        let by = db
            .count(&format!("SELECT COUNT(*) FROM handled WHERE via = '{via}'"))
            .await;
        assert!(by > 0, "{via} handled none");
    }
}

/// A handler that dies of a PHP fatal error (memory exhausted): the item fails with
/// PHP's message, and the message is not done (its row stays).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_php_fatal_error_fails_the_item_with_php_s_message() {
    let Some(app) = app() else { return };
    let (db, files) = fresh(app).await;
    app.dispatch(&db, "exhaust", 1, 1, &[]).await;
    let file = app.queue_file(&db, &files, "sf_fatal", 3600).await;
    let mut daemon = copy(&file, &db.url);
    let recorded = || async {
        daemon.stderr().lines().any(|line| {
            line.contains("item failed")
                && line.contains("PHP Fatal error: Allowed memory size of 67108864 bytes exhausted")
        })
    };
    eventually(
        "the item failed with PHP's message",
        Duration::from_secs(30),
        recorded,
    )
    .await;
    daemon.terminate().await;
    db.assert_count_because(
        "SELECT COUNT(*) FROM messenger_messages WHERE queue_name = 'default'",
        1,
        "not done: the row is not deleted",
    )
    .await;
    db.assert_count("SELECT COUNT(*) FROM handled", 0).await;
}
