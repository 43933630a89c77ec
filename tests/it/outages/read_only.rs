//! A read-only spell (a failover) ends: every queue, of either scope and mode, and
//! however large its batch, claims again within seconds of writes returning.

use std::time::{Duration, Instant};

use crate::support::daemon::{tableq, Daemon};
use crate::support::{eventually, private_db, QueueFile, QueueFiles, TestDb};

/// The queues, each on a table of its own: item scope one row at a time, item
/// scope and batch scope 100 rows at a time, and lease mode.
const QUEUES: [&str; 4] = ["one", "items100", "batch100", "leased"];

/// The queue `name` on table `name`, with the defaults a user has (`poll_interval`
/// 5s, `error_backoff` 1s).
fn queue(name: &str, files: &QueueFiles) {
    let waiting = format!("SELECT id FROM {name} WHERE state = 'waiting' ORDER BY id");
    let file = QueueFile::new(name).select(&waiting);
    let file = match name {
        "one" => file
            .action_sql(format!("UPDATE {name} SET note = 'x' WHERE id = :id"))
            .on_success(format!("UPDATE {name} SET state = 'done' WHERE id = :id")),
        "items100" => file
            .batch(100)
            .action_command(&["true"])
            .on_success(format!("UPDATE {name} SET state = 'done' WHERE id = :id")),
        "batch100" => file
            .batch(100)
            .set("scope", "batch")
            .action_sql(format!(
                "UPDATE {name} JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id')) AS b \
             USING (id) SET note = 'x'"
            ))
            .on_success(format!(
                "UPDATE {name} JOIN JSON_TABLE(:batch, '$[*]' COLUMNS (id INT PATH '$.id')) AS b \
             USING (id) SET state = 'done'"
            )),
        _ => file
            .set("mode", "lease")
            .select(&format!(
                "SELECT id FROM {name} WHERE state = 'waiting' \
                 OR (state = 'leased' AND lease_until < NOW(3)) ORDER BY id"
            ))
            .lease_set(
                "sql",
                format!(
                    "UPDATE {name} SET state = 'leased', lease_id = :lease_id, \
                 lease_until = NOW(3) + INTERVAL 60 SECOND WHERE id = :id"
                ),
            )
            .action_command(&["true"])
            .on_success(format!(
                "UPDATE {name} SET state = 'done' WHERE id = :id AND lease_id = :lease_id"
            )),
    };
    file.write(files);
}

/// Rows `from..from + rows` waiting in each queue's table.
async fn add_rows(db: &TestDb, from: usize, rows: usize) {
    for name in QUEUES {
        db.exec(&format!(
            "INSERT INTO {name} (id) SELECT seq FROM seq_{from}_to_{}",
            from + rows - 1
        ))
        .await;
    }
}

/// A 20 s read-only spell with rows waiting in every queue: once writes return,
/// each queue — item scope, 100-row batches of either scope, lease mode — has done
/// every row within seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_queue_resumes_within_seconds_of_a_read_only_spell() {
    let (_server, db) = private_db(&[]).await;
    let files = QueueFiles::new();
    for name in QUEUES {
        db.exec(&format!(
            "CREATE TABLE {name} (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting',
               note VARCHAR(10) NULL, lease_id CHAR(32) NULL, lease_until DATETIME(3) NULL,
               KEY (state, id))"
        ))
        .await;
        queue(name, &files);
    }
    // An ordinary user: root writes through `read_only`.
    db.exec(&format!(
        "CREATE USER 'app'@'%' IDENTIFIED BY 'app';
         GRANT SELECT, INSERT, UPDATE, DELETE ON `{}`.* TO 'app'@'%'",
        db.name
    ))
    .await;
    add_rows(&db, 1, 150).await;
    let mut cmd = tableq(&["run"]);
    cmd.arg(files.path()).env(
        "TABLEQ_DATABASE_URL",
        db.url.replacen("root@", "app:app@", 1),
    );
    let mut daemon = Daemon::spawn(cmd);
    let done = |name: &'static str| {
        let db = &db;
        async move {
            db.count(&format!("SELECT COUNT(*) FROM {name} WHERE state = 'done'"))
                .await
        }
    };
    for name in QUEUES {
        eventually("the first rows done", Duration::from_secs(60), || async {
            done(name).await == 150
        })
        .await;
    }

    db.exec("SET GLOBAL read_only = 1").await;
    add_rows(&db, 151, 300).await;
    daemon
        .wait_for_log("the database refuses writes", Duration::from_secs(30))
        .await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    db.exec("SET GLOBAL read_only = 0").await;
    let writable = Instant::now();
    let mut resumed: Vec<(&str, Duration)> = Vec::new();
    while resumed.len() < QUEUES.len() {
        for name in QUEUES {
            if !resumed.iter().any(|(n, _)| *n == name) && done(name).await == 450 {
                resumed.push((name, writable.elapsed()));
            }
        }
        if writable.elapsed() > Duration::from_secs(90) {
            let mut counts = Vec::new();
            for name in QUEUES {
                counts.push((name, done(name).await));
            }
            panic!("not every row done: {counts:?}\n{}", daemon.stderr());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    daemon.terminate().await;
    eprintln!("after a 20 s read-only spell, every row done after: {resumed:?}");
    for (name, after) in resumed {
        assert!(
            after < Duration::from_secs(15),
            "queue {name} done after {after:?}:\n{}",
            daemon.stderr()
        );
    }
}
