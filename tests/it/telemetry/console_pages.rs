//! Who sees the console's history pages, over plain HTTP: with a read token
//! (`--console-read-token-file`), a queue's page and the fleet show no history to a
//! client not signed in — they say to sign in — while the API answers the holder of
//! the read token; a row's attempts page is for a browser signed in, always.

use std::time::Duration;

use super::console_api::{get_text_with, start_console};
use crate::support::endpoint::get;
use crate::support::{eventually, QueueFile, QueueFiles, TestDb};

const READ_TOKEN: &str = "a-read-token-for-the-tests-9876543210";

/// With a read token: no chart and no copy for a client not signed in (the pages
/// say why), the history and the copies for the read token's holder; a row's
/// attempts page asks to sign in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_read_token_the_pages_show_no_history_to_a_stranger() {
    let db = TestDb::new().await;
    db.exec("CREATE TABLE job (id INT PRIMARY KEY, done INT NOT NULL DEFAULT 0); INSERT INTO job (id) VALUES (1), (2)")
        .await;
    let files = QueueFiles::new();
    QueueFile::new("mail")
        .select("SELECT id FROM job WHERE done = 0")
        .poll_interval("200ms")
        .action_sql("DO :id")
        .on_success("UPDATE job SET done = 1 WHERE id = :id")
        .write(&files);
    let read_token = files.write("read.token", &format!("{READ_TOKEN}\n"));
    std::fs::set_permissions(
        &read_token,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let env = [
        (
            "TABLEQ_CONSOLE_READ_TOKEN_FILE",
            read_token.to_str().unwrap(),
        ),
        ("TABLEQ_HISTORY_EVERY", "1s"),
    ];
    let (mut daemon, base) = start_console(&files, &db.url, &["mail.toml"], &env).await;
    let copies = format!("{base}/api/copies");
    eventually("the copy heartbeats", Duration::from_secs(30), || async {
        let (status, body) = get_text_with(&copies, READ_TOKEN).await;
        status == 200 && body.contains("\"pid\"")
    })
    .await;
    let (status, page) = get(&format!("{base}/queues/mail")).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("read token: sign in to see it"), "{page}");
    assert!(!page.contains("<figure class=\"chart\""), "{page}");
    let (status, page) = get(&format!("{base}/copies")).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("data-field=\"copies_error\""), "{page}");
    assert!(!page.contains("<tr class=\"copy"), "{page}");
    let (status, _) = get(&format!("{base}/api/copies")).await;
    assert_eq!(status, 401, "the API without the read token");
    let history = format!("{base}/api/queues/mail/history?since=1h");
    let (status, body) = get_text_with(&history, READ_TOKEN).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = get(&format!("{base}/queues/mail/attempts?key=1")).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("sign in first"), "{body}");
    daemon.terminate().await;
}
