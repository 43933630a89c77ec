//! A real three-node MariaDB Galera cluster (`support::galera`): it forms, replicates,
//! survives `kill -9` of a node; and what tableq does on it: refuses a queue that
//! would deliver twice from copies on several nodes, says the conflicts when told
//! every copy uses one node, runs lease mode across nodes, and `check` agrees (and
//! refuses `[concurrency]`, whose named locks are a node's own). Skipped loudly
//! where galera-4 or mariadb-backup is missing (failed under CI).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use crate::support::daemon::{run_to_end, tableq, Daemon};
use crate::support::endpoint::{get, metrics_address};
use crate::support::galera::{self, Cluster, NODES};
use crate::support::web::{Reply, WebServer};
use crate::support::{assert_has, eventually, waiting_jobs, QueueFile, QueueFiles};

/// Three nodes say they are Galera, ready and synced, in one primary component of three.
#[tokio::test]
async fn the_cluster_forms_with_three_synced_nodes() {
    if !galera::can_run("galera::the_cluster_forms_with_three_synced_nodes") {
        return;
    }
    let cluster = galera::shared().await;
    for i in 0..NODES {
        let wsrep = cluster.wsrep(i).await.expect("read the node's status");
        assert_eq!(wsrep.get("wsrep_on"), "ON", "node {i}: {wsrep:?}");
        assert_eq!(wsrep.get("wsrep_provider_name"), "Galera", "node {i}");
        assert!(wsrep.is_synced(NODES), "node {i}: {wsrep:?}");
    }
}

/// A row committed on one node is read on the two others.
#[tokio::test]
async fn a_row_written_on_one_node_is_read_on_another() {
    if !galera::can_run("galera::a_row_written_on_one_node_is_read_on_another") {
        return;
    }
    let db = galera::shared().await.database().await;
    db.exec("CREATE TABLE note (id INT PRIMARY KEY, body VARCHAR(100) NOT NULL)")
        .await;
    let mut writer = crate::support::connect(db.url(1)).await;
    writer
        .query_drop("INSERT INTO note VALUES (1, 'written on node 1')")
        .await
        .expect("write on node 1");
    writer.disconnect().await.ok();
    for i in [0, 2] {
        let mut reader = db.causal_conn(i).await;
        let body: Option<String> = reader
            .query_first("SELECT body FROM note WHERE id = 1")
            .await
            .expect("read");
        assert_eq!(body.as_deref(), Some("written on node 1"), "node {i}");
        reader.disconnect().await.ok();
    }
}

/// `kill -9` of one node of three: the two others evict it, keep quorum and take
/// writes; restarted, it rejoins and has the rows written while it was down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_leaves_two_with_quorum_and_rejoins() {
    if !galera::can_run("galera::a_killed_node_leaves_two_with_quorum_and_rejoins") {
        return;
    }
    // A cluster of its own: it kills a node.
    let mut cluster = Cluster::start().await;
    let db = cluster.database().await;
    db.exec("CREATE TABLE note (id INT PRIMARY KEY); INSERT INTO note VALUES (1)")
        .await;
    let killed = Instant::now();
    cluster.kill(2);
    // A write on a survivor waits until the dead node is evicted.
    let mut survivor = crate::support::connect(db.url(0)).await;
    survivor
        .query_drop("INSERT INTO note VALUES (2)")
        .await
        .expect("a survivor takes writes once the dead node is evicted");
    let write_stalled = killed.elapsed();
    for i in [0, 1] {
        cluster.wait_synced(i, 2).await;
    }
    let evicted = killed.elapsed();
    let mut other = crate::support::connect(db.url(1)).await;
    other
        .query_drop("INSERT INTO note VALUES (3)")
        .await
        .expect("the other survivor takes writes");
    let restarted = Instant::now();
    cluster.restart(2).await;
    let rejoined = restarted.elapsed();
    assert_eq!(db.count_on(2, "SELECT COUNT(*) FROM note").await, 3);
    eprintln!(
        "galera: after kill -9, a survivor's write waited {write_stalled:.1?}, the node was \
         evicted after {evicted:.1?}; restarted, it was synced again after {rejoined:.1?}"
    );
    survivor.disconnect().await.ok();
    other.disconnect().await.ok();
}

const DUPLICATED_ROWS: usize = 300;

/// A webhook queue in transaction mode on a Galera node is refused at start (exit
/// 2), saying why — copies on several nodes deliver rows twice — and both fixes:
/// one node for every copy (and the opt-out that says so), or lease mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_queue_in_transaction_mode_is_refused_on_galera() {
    if !galera::can_run("galera::a_webhook_queue_in_transaction_mode_is_refused_on_galera") {
        return;
    }
    let db = galera::shared().await.database().await;
    db.exec("CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting')")
        .await;
    db.fill("job", "id", 3, |i| i.to_string()).await;
    let web = WebServer::start(|_| Reply::status(200)).await;
    let files = QueueFiles::new();
    let file = waiting_jobs("galera_refused")
        .action_http(&web.url("/hook"))
        .write(&files);
    let mut cmd = tableq(&["run", "--stop-when-empty"]);
    cmd.arg(&file).env("TABLEQ_DATABASE_URL", db.url(1));
    let done = run_to_end(cmd, Duration::from_secs(60)).await;
    assert_eq!(done.code(), Some(2), "{}", done.stderr);
    for said in [
        "queue galera_refused",
        "the server is a Galera node (wsrep_on = ON)",
        "(type = \"http\")",
        "delivered twice",
        "point every copy of tableq at one node",
        "--allow-multi-primary",
        "mode = \"lease\"",
    ] {
        assert!(
            done.stderr.contains(said),
            "no {said:?} in:\n{}",
            done.stderr
        );
    }
    assert!(web.requests().is_empty(), "nothing was delivered");
}

/// What three copies of one webhook queue, started with `node(i)`'s URL and
/// `args`, delivered: (rows, deliveries, rows delivered twice or more), with each
/// copy's log. Every row is done.
async fn three_copies(
    db: &galera::ClusterDb,
    queue: QueueFile,
    args: &[&str],
    node: impl Fn(usize) -> usize,
) -> ((usize, usize, usize), Vec<String>) {
    let web = WebServer::start(|_| Reply::status(200).after(Duration::from_millis(10))).await;
    let files = QueueFiles::new();
    let file = queue.action_http(&web.url("/hook")).write(&files);
    let mut copies: Vec<Daemon> = (0..NODES)
        .map(|i| {
            let mut cmd = tableq(&["run", "--stop-when-empty"]);
            cmd.args(args)
                .arg(&file)
                .env("TABLEQ_DATABASE_URL", db.url(node(i)));
            Daemon::spawn(cmd)
        })
        .collect();
    for copy in &mut copies {
        let status = copy.wait(Duration::from_secs(120)).await;
        assert!(status.success(), "{}", copy.stderr());
    }
    let done = db
        .count_on(0, "SELECT COUNT(*) FROM job WHERE state = 'done'")
        .await;
    assert_eq!(done, DUPLICATED_ROWS as u64, "every row is done");
    let mut deliveries: BTreeMap<u64, usize> = BTreeMap::new();
    for request in web.requests() {
        let id = request.json()["id"].as_u64().expect("the row's id");
        *deliveries.entry(id).or_default() += 1;
    }
    assert_eq!(deliveries.len(), DUPLICATED_ROWS, "every row was delivered");
    let total: usize = deliveries.values().sum();
    let again = deliveries.values().filter(|&&n| n >= 2).count();
    let logs = copies.iter().map(Daemon::stderr).collect();
    ((deliveries.len(), total, again), logs)
}

/// A cluster database with the job table and its rows waiting.
async fn job_table() -> galera::ClusterDb {
    let db = galera::shared().await.database().await;
    db.exec("CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting', lease_id VARCHAR(40) NULL, lease_until BIGINT NULL)")
        .await;
    db.fill("job", "id", DUPLICATED_ROWS, |i| i.to_string())
        .await;
    db
}

/// With `--allow-multi-primary` and its promise broken — three copies, each on its
/// own node — rows are still delivered twice (no copy sees another's row locks), but
/// not silently: the stop lines count the items rolled back, and a conflict found at
/// COMMIT is warned of as a certification conflict (at most once a minute, with the
/// count). With the
/// promise kept — every copy on one node — each row is delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_opt_out_conflicts_are_said_and_one_node_delivers_once() {
    if !galera::can_run("galera::with_the_opt_out_conflicts_are_said_and_one_node_delivers_once") {
        return;
    }
    let queue = || {
        waiting_jobs("galera_copies")
            .workers(4)
            .poll_interval("100ms")
    };
    let allow = ["--allow-multi-primary"];
    let db = job_table().await;
    let (spread, logs) = three_copies(&db, queue(), &allow, |i| i).await;
    let warned: Vec<&String> = logs
        .iter()
        .filter(|log| log.contains("(a certification conflict)"))
        .collect();
    let rolled_back: u64 = logs.iter().map(|log| stop_field(log, "rolled_back")).sum();
    eprintln!(
        "galera: {DUPLICATED_ROWS} rows, copies on three nodes with --allow-multi-primary: \
         {} deliveries, {} rows delivered 2+ times; {rolled_back} items rolled back, {} of 3 \
         copies warned",
        spread.1,
        spread.2,
        warned.len()
    );
    assert!(spread.2 > 0, "no row was delivered twice: {spread:?}");
    // Every conflict is counted in the stop lines. Only those that surface at
    // COMMIT are said as certification conflicts: a replicated write that aborts a
    // claim mid-statement (a brute-force abort) answers as a plain deadlock, and
    // whether any conflict lands at COMMIT depends on the copies' timing.
    assert!(rolled_back > 0, "{logs:#?}");
    for log in warned {
        let lines = log.matches("(a certification conflict)").count();
        assert_eq!(lines, 1, "said at most once a minute:\n{log}");
    }

    let db = job_table().await;
    let (one_node, _) = three_copies(&db, queue(), &allow, |_| 1).await;
    eprintln!(
        "galera: {DUPLICATED_ROWS} rows, every copy on node 1: {} deliveries, {} rows \
         delivered 2+ times",
        one_node.1, one_node.2
    );
    assert_eq!(one_node, (DUPLICATED_ROWS, DUPLICATED_ROWS, 0));
}

/// A webhook queue in lease mode runs across three nodes with no opt-out — its
/// claim is certified before the action runs — and delivers each row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_mode_runs_across_nodes_and_delivers_once() {
    if !galera::can_run("galera::lease_mode_runs_across_nodes_and_delivers_once") {
        return;
    }
    let db = job_table().await;
    let queue = QueueFile::new("galera_lease")
        .workers(4)
        .poll_interval("100ms")
        .set("mode", "lease")
        .select(
            "SELECT id FROM job WHERE state = 'waiting' \
             OR (state = 'leased' AND lease_until < UNIX_TIMESTAMP()) ORDER BY id",
        )
        .lease_set(
            "sql",
            "UPDATE job SET state = 'leased', lease_id = :lease_id, \
             lease_until = UNIX_TIMESTAMP() + 60 WHERE id = :id",
        )
        .on_success("UPDATE job SET state = 'done' WHERE id = :id AND lease_id = :lease_id");
    let (spread, _) = three_copies(&db, queue, &[], |i| i).await;
    eprintln!(
        "galera: {DUPLICATED_ROWS} rows, lease mode, copies on three nodes: {} deliveries, {} \
         rows delivered 2+ times",
        spread.1, spread.2
    );
    assert_eq!(spread, (DUPLICATED_ROWS, DUPLICATED_ROWS, 0));
}

/// `check` agrees with `run` on a Galera node: the webhook queue in transaction mode
/// is an error in the same words, the lease-mode one is not; and a correct SQL queue
/// is proven without XA (which Galera refuses) — a plain transaction rolled back —
/// so `check --strict` passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_agrees_and_strict_passes_on_galera() {
    if !galera::can_run("galera::check_agrees_and_strict_passes_on_galera") {
        return;
    }
    let db = galera::shared().await.database().await;
    db.exec(crate::support::check::JOBS).await;
    let (_files, path, _) = crate::support::check::jobs_file(crate::support::check::GOOD);
    let done = crate::support::check::check(&["--strict"], &[&path], Some(db.url(2))).await;
    assert_eq!(done.code(), Some(0), "{}\n{}", done.stdout, done.stderr);
    assert_has(&done.stdout, ": 0 errors, 0 warnings");
    assert!(!done.stdout.contains("not proven"), "{}", done.stdout);
    assert_eq!(
        db.count_on(
            2,
            "SELECT COUNT(*) FROM job WHERE state = 'waiting' AND attempts = 0"
        )
        .await,
        3,
        "the proof changed nothing"
    );

    let web = WebServer::start(|_| Reply::status(200)).await;
    let files = QueueFiles::new();
    let webhook = waiting_jobs("galera_check")
        .action_http(&web.url("/hook"))
        .write(&files);
    let done = crate::support::check::check(&[], &[&webhook], Some(db.url(0))).await;
    assert_eq!(done.code(), Some(1), "{}", done.stdout);
    assert!(
        done.stdout
            .contains("the server is a Galera node (wsrep_on = ON)")
            && done.stdout.contains("mode = \"lease\""),
        "{}",
        done.stdout
    );
    let allowed =
        crate::support::check::check(&["--allow-multi-primary"], &[&webhook], Some(db.url(0)))
            .await;
    assert!(
        !allowed.stdout.contains("Galera node"),
        "{}",
        allowed.stdout
    );
}

/// `check` refuses `[concurrency]` on a Galera node, naming the key and the way out:
/// its named locks are the node's own, not the cluster's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_refuses_concurrency_on_galera() {
    if !galera::can_run("galera::check_refuses_concurrency_on_galera") {
        return;
    }
    let db = galera::shared().await.database().await;
    db.exec(crate::support::check::JOBS).await;
    let limited = format!(
        "{}[concurrency]\nkey = \"id\"\nlimit = 1\n",
        crate::support::check::GOOD
    );
    let (_files, path, shown) = crate::support::check::jobs_file(&limited);
    let done = crate::support::check::check(&[], &[&path], Some(db.url(1))).await;
    assert_eq!(done.code(), Some(1), "{}\n{}", done.stdout, done.stderr);
    let refusal = done
        .stdout
        .lines()
        .find(|l| l.contains("whose named locks (GET_LOCK) are not shared"))
        .unwrap_or_else(|| panic!("{}", done.stdout));
    assert!(refusal.starts_with(&shown), "{refusal}");
    assert!(refusal.contains("queue jobs: error"), "{refusal}");
    assert!(refusal.contains("remove [concurrency]"), "{refusal}");
}

const FAILOVER_ROWS: usize = 600;

/// A daemon running the webhook queue `galera_failover` on `db` with every node of
/// `cluster` in its URL; the daemon and its listener's base URL.
async fn failover_daemon(
    cluster: &Cluster,
    db_name: &str,
    files: &QueueFiles,
    web: &WebServer,
) -> (Daemon, String) {
    waiting_jobs("galera_failover")
        .workers(4)
        .poll_interval("100ms")
        .error_backoff("200ms")
        .set("stats_interval", "2s")
        .action_http(&web.url("/hook"))
        .write(files);
    let mut cmd = tableq(&[
        "run",
        "--metrics-addr",
        "127.0.0.1:0",
        "--allow-multi-primary",
    ]);
    cmd.arg(files.path())
        .env("TABLEQ_DATABASE_URL", cluster.every_node_url(db_name))
        .env("TABLEQ_LOG_FORMAT", "json");
    let daemon = Daemon::spawn(cmd);
    let base = format!("http://{}", metrics_address(&daemon).await);
    (daemon, base)
}

/// True when `/readyz` at `base` names `host` as the database host in use.
async fn in_use(base: &str, host: &str) -> bool {
    get(&format!("{base}/readyz"))
        .await
        .1
        .contains(&format!("database host {host}"))
}

/// What the webhook saw: how many rows were delivered more than once, and the
/// longest pause of deliveries between `killed` and `restarting` (with the first
/// delivery's delay after the kill); every row is delivered.
fn deliveries_across_the_kill(
    requests: &[crate::support::web::Recorded],
    killed: Instant,
    restarting: Instant,
) -> (usize, Duration, Duration) {
    let mut deliveries: BTreeMap<u64, usize> = BTreeMap::new();
    for request in requests {
        let id = request.json()["id"].as_u64().expect("the row's id");
        *deliveries.entry(id).or_default() += 1;
    }
    assert_eq!(
        deliveries.len(),
        FAILOVER_ROWS + 100,
        "every row was delivered"
    );
    let again = deliveries.values().filter(|&&n| n >= 2).count();
    // The deliveries between the kill and the node's return.
    let after: Vec<Instant> = requests
        .iter()
        .map(|r| r.at)
        .filter(|at| *at >= killed && *at < restarting)
        .collect();
    let resumed = after.first().map_or(Duration::MAX, |at| *at - killed);
    let longest_gap = after
        .windows(2)
        .map(|pair| pair[1] - pair[0])
        .max()
        .unwrap_or_default()
        .max(resumed);
    (again, longest_gap, resumed)
}

/// With every node in one URL, a webhook queue uses the first node (and says so on
/// `/readyz` and `/metrics`); `kill -9` of that node moves it to the next within
/// seconds: deliveries pause at most 15 s (Galera evicts a dead node in ~6 s),
/// every row is delivered, and only what was in flight is delivered again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_host_url_survives_kill_9_of_the_node_in_use() {
    if !galera::can_run("galera::a_multi_host_url_survives_kill_9_of_the_node_in_use") {
        return;
    }
    // A cluster of its own: it kills a node.
    let mut cluster = Cluster::start().await;
    let db = cluster.database().await;
    db.exec("CREATE TABLE job (id INT PRIMARY KEY, state VARCHAR(10) NOT NULL DEFAULT 'waiting')")
        .await;
    db.fill("job", "id", FAILOVER_ROWS, |i| i.to_string()).await;
    let web = WebServer::start(|_| Reply::status(200).after(Duration::from_millis(20))).await;
    let files = QueueFiles::new();
    let (mut daemon, base) = failover_daemon(&cluster, &db.name, &files, &web).await;
    let done = || db.count_on(1, "SELECT COUNT(*) FROM job WHERE state = 'done'");
    eventually(
        "a hundred rows are done",
        Duration::from_secs(60),
        || async { done().await >= 100 },
    )
    .await;
    let first = cluster.host(0);
    assert!(in_use(&base, &first).await);
    let killed = Instant::now();
    cluster.kill(0);
    eventually("every row is done", Duration::from_secs(120), || async {
        done().await == FAILOVER_ROWS as u64
    })
    .await;
    let second = cluster.host(1);
    let (_, readyz) = get(&format!("{base}/readyz")).await;
    assert!(
        readyz.contains(&format!("database host {second}")),
        "{readyz}"
    );
    let (_, metrics) = get(&format!("{base}/metrics")).await;
    let series = format!(r#"tableq_database_host{{queue="galera_failover",host="{second}"}} 1"#);
    assert!(metrics.contains(&series), "no {series} in:\n{metrics}");

    // The node comes back: once it is synced, the queue moves back to it (found by
    // the next background count, every stats_interval), and works new rows there.
    let restarting = Instant::now();
    cluster.restart(0).await;
    let synced = Instant::now();
    eventually(
        "the queue is back on the first node",
        Duration::from_secs(60),
        || in_use(&base, &first),
    )
    .await;
    let back = synced.elapsed();
    db.exec(&format!(
        "INSERT INTO job (id) SELECT seq FROM seq_{}_to_{}",
        FAILOVER_ROWS + 1,
        FAILOVER_ROWS + 100
    ))
    .await;
    eventually("the new rows are done", Duration::from_secs(60), || async {
        done().await == FAILOVER_ROWS as u64 + 100
    })
    .await;
    daemon.terminate().await;

    let (again, longest_gap, resumed) =
        deliveries_across_the_kill(&web.requests(), killed, restarting);
    eprintln!(
        "galera: kill -9 of the node in use (multi-host URL): deliveries paused {longest_gap:.1?} \
         (first after the kill: {resumed:.1?}); {again} of {FAILOVER_ROWS} rows delivered \
         again; restarted, the node was in use again {back:.1?} after it was synced"
    );
    assert!(
        longest_gap <= Duration::from_secs(15),
        "paused {longest_gap:?}:\n{}",
        daemon.stderr()
    );
    assert!(
        again <= 4,
        "only the 4 workers' items in flight may be delivered again: {again}"
    );
}

/// The number `field=N` on a log's "queue stopped" line (0 without one).
fn stop_field(log: &str, field: &str) -> u64 {
    log.lines()
        .filter(|line| line.contains("queue stopped"))
        .filter_map(|line| line.split(&format!("{field}=")).nth(1))
        .filter_map(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}
