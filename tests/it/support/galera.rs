//! A real three-node MariaDB Galera cluster on loopback: `mariadbd --wsrep-on` with
//! galera-4's provider, each node with its own datadir (under the target directory),
//! ports and error log, started with `--no-defaults`, dying with the test process
//! (PR_SET_PDEATHSIG); leftovers of earlier runs are removed when the next one starts.
//!
//! Quick to start (5 to 10 s on a busy 2-core machine): one `mariadb-install-db` per
//! test process makes a template datadir, and each node starts from a copy of it. The
//! first node bootstraps the cluster; each other node is told in its `grastate.dat`
//! that it holds the cluster's state as of the cluster's last seqno — true, as its
//! data is the same install and nothing was written yet — so it joins with no state
//! transfer at all. A node restarted after `kill -9` recovers its position from
//! InnoDB first (`--wsrep-recover`, as systemd's `galera_recovery` does; without it a
//! crashed node forgets its position and takes a full copy) and catches up by IST
//! from a donor's gcache in a few seconds. Should a full state transfer be needed, it
//! is mariabackup's (rsync's fails as root); `--innodb-buffer-pool-size` is never
//! given, as mariabackup chokes on it. Galera's own failure detection keeps its
//! defaults, so a killed node is evicted after ~6 s, as in production.
//!
//! Two ways to have one:
//! - [`shared`]: one cluster per test process, started by the first test that asks,
//!   for the tests that leave every node running. It is `&'static`, and
//!   [`Cluster::kill`] takes `&mut self`: no test can kill a node of it.
//! - [`Cluster::start`]: a cluster of the test's own, for a test that kills and
//!   restarts nodes: the tests sharing a cluster would see their node vanish (and
//!   their writes stall while the cluster evicts it), and one failed restart would
//!   break every later test. Dropped (killed, datadirs removed) at the test's end.
//!
//! Both need galera-4, mariadb-backup and socat (which the state transfer script
//! uses): a test first asks [`can_run`], which skips it loudly where they are
//! missing, and fails it under CI (`CI` set), where `.ci/run` installs them.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};

use super::mariadb::{
    find, free_port, install, remove_leftovers, server_command, spawn_tied_to_process,
};
use super::server::with_database;
use super::{copy_tree, TestDb};

/// The cluster's size.
pub const NODES: usize = 3;

/// Where galera-4 puts its provider: Debian, then RPM-based distributions.
const PROVIDERS: [&str; 4] = [
    "/usr/lib/galera/libgalera_smm.so",
    "/usr/lib/galera-4/libgalera_smm.so",
    "/usr/lib64/galera-4/libgalera_smm.so",
    "/usr/lib64/galera/libgalera_smm.so",
];

/// How long a node may take to be synced: a full state transfer on a loaded machine.
const SYNC_TIMEOUT: Duration = Duration::from_secs(180);

fn provider() -> Option<PathBuf> {
    PROVIDERS.iter().map(PathBuf::from).find(|p| p.exists())
}

/// The packages this machine lacks to start a cluster (none when it has them all).
pub fn missing() -> Vec<&'static str> {
    let mut lacks = Vec::new();
    if provider().is_none() {
        lacks.push("galera-4");
    }
    for (program, package) in [
        ("mariadb-backup", "mariadb-backup"),
        ("wsrep_sst_mariabackup", "mariadb-server"),
        ("socat", "socat"),
    ] {
        if !find(program).exists() {
            lacks.push(package);
        }
    }
    lacks
}

/// Whether `test` can have a cluster. Where the machine lacks what one needs, says
/// loudly that `test` was skipped — or fails it under CI (`CI` set), where `.ci/run`
/// installs them.
pub fn can_run(test: &str) -> bool {
    let lacks = missing();
    if lacks.is_empty() {
        return true;
    }
    let install = format!("apt-get install {}", lacks.join(" "));
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} needs a Galera cluster and this machine lacks {}: .ci/run installs them ({install})",
        lacks.join(", ")
    );
    eprintln!("\n!!!!! SKIPPED: {test}: no Galera cluster here ({install}); NOT tested !!!!!\n");
    false
}

/// The cluster this test process's Galera tests share (those that kill no node),
/// started by the first that asks.
pub async fn shared() -> &'static Cluster {
    static SHARED: tokio::sync::OnceCell<Cluster> = tokio::sync::OnceCell::const_new();
    SHARED.get_or_init(Cluster::start).await
}

/// A running cluster of [`NODES`] nodes, numbered from 0.
pub struct Cluster {
    dir: PathBuf,
    nodes: Vec<Node>,
}

impl Cluster {
    /// A cluster of the caller's own, every node synced.
    pub async fn start() -> Cluster {
        let began = Instant::now();
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("galera");
        std::fs::create_dir_all(&root).expect("create the Galera test root");
        remove_leftovers(&root);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{}-", std::process::id()))
            .tempdir_in(&root)
            .expect("create the cluster's directory")
            .keep();
        let template = template(&root);
        let mut ports = distinct_ports(4 * NODES).into_iter();
        let mut port = || ports.next().unwrap();
        let nodes = (0..NODES)
            .map(|i| {
                Node::new(
                    dir.join(format!("node{i}")),
                    template,
                    [port(), port(), port(), port()],
                )
            })
            .collect();
        let cluster = Cluster { dir, nodes };
        cluster.spawn(0, "gcomm://", None);
        cluster.wait_synced(0, 1).await;
        for i in 1..NODES {
            let (uuid, seqno) = cluster.position(0).await;
            cluster.nodes[i].claim_state(&uuid, seqno);
            cluster.spawn(i, &cluster.address(), None);
            cluster.wait_synced(i, i + 1).await;
        }
        eprintln!("galera: {NODES} nodes synced in {:.1?}", began.elapsed());
        cluster
    }

    /// `mysql://root@127.0.0.1:PORT` of node `i` (no database).
    pub fn base_url(&self, i: usize) -> String {
        format!("mysql://root@127.0.0.1:{}", self.nodes[i].ports.sql)
    }

    /// `mysql://root@127.0.0.1:P0,127.0.0.1:P1,…/DATABASE`: every node, in order, in
    /// one multi-host URL.
    pub fn every_node_url(&self, database: &str) -> String {
        let hosts: Vec<String> = self.nodes.iter().map(|n| n.host()).collect();
        format!("mysql://root@{}/{database}", hosts.join(","))
    }

    /// `127.0.0.1:PORT` of node `i`'s SQL port.
    pub fn host(&self, i: usize) -> String {
        self.nodes[i].host()
    }

    /// Node `i`'s pid, while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.nodes[i].child.lock().unwrap().as_ref().map(Child::id)
    }

    /// A database of one test's own, created on the cluster (node 0) and dropped
    /// when the test ends.
    pub async fn database(&self) -> ClusterDb {
        let db = TestDb::on(&self.base_url(0)).await;
        let urls = (0..NODES)
            .map(|i| with_database(&self.base_url(i), &db.name))
            .collect();
        ClusterDb { db, urls }
    }

    /// Node `i`'s `wsrep_%` status and its `wsrep_on` variable.
    pub async fn wsrep(&self, i: usize) -> Result<Wsrep, mysql_async::Error> {
        let mut conn = Conn::new(Opts::from_url(&self.base_url(i))?).await?;
        let mut values: Vec<(String, String)> =
            conn.query("SHOW GLOBAL STATUS LIKE 'wsrep%'").await?;
        values.extend(
            conn.query::<(String, String), _>("SHOW GLOBAL VARIABLES LIKE 'wsrep_on'")
                .await?,
        );
        conn.disconnect().await.ok();
        Ok(Wsrep(
            values
                .into_iter()
                .map(|(name, value)| (name.to_lowercase(), value))
                .collect(),
        ))
    }

    /// Waits until node `i` is synced in a primary component of `size` nodes; panics
    /// with its error log if it exits or takes longer than a state transfer would.
    pub async fn wait_synced(&self, i: usize, size: usize) {
        let deadline = Instant::now() + SYNC_TIMEOUT;
        loop {
            let state = self.wsrep(i).await;
            if state.as_ref().is_ok_and(|w| w.is_synced(size)) {
                return;
            }
            if let Some(status) = self.nodes[i].exited() {
                panic!(
                    "galera node {i} exited with {status}: {}",
                    self.nodes[i].log_tail()
                );
            }
            assert!(
                Instant::now() < deadline,
                "galera node {i} is not synced in a cluster of {size} after {SYNC_TIMEOUT:?} \
                 ({state:?}): {}",
                self.nodes[i].log_tail()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills node `i` (SIGKILL), as a crash would, and waits for it to exit. Only on
    /// a cluster of the test's own: see the module's comment.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts killed node `i` again and waits until it has rejoined, synced, in a
    /// cluster of every running node: it recovers its position from its own data,
    /// then catches up from a donor (IST when the donor's gcache still holds the
    /// writes it missed).
    pub async fn restart(&mut self, i: usize) {
        let address = self.address();
        let position = self.nodes[i].recovered_position(&address);
        self.spawn(i, &address, position.as_deref());
        let running = self.nodes.iter().filter(|n| n.is_running()).count();
        self.wait_synced(i, running).await;
    }

    /// `gcomm://` with every node's replication address.
    fn address(&self) -> String {
        let peers: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.ports.gcomm))
            .collect();
        format!("gcomm://{}", peers.join(","))
    }

    fn spawn(&self, i: usize, address: &str, position: Option<&str>) {
        let node = &self.nodes[i];
        let mut cmd = node.command(address, &self.name());
        if let Some(position) = position {
            cmd.arg(format!("--wsrep-start-position={position}"));
        }
        let child = spawn_tied_to_process(cmd).expect("start mariadbd");
        *node.child.lock().unwrap() = Some(child);
    }

    /// The cluster's name: its own, so no node ever joins another test's cluster.
    fn name(&self) -> String {
        let dir = self.dir.file_name().unwrap_or_default();
        format!("tableq-{}", dir.to_string_lossy())
    }

    /// Node `i`'s view of the cluster's state: its uuid and last committed seqno.
    async fn position(&self, i: usize) -> (String, i64) {
        let wsrep = self.wsrep(i).await.expect("read the cluster's position");
        let seqno = wsrep.get("wsrep_last_committed").parse().unwrap_or(-1);
        (wsrep.get("wsrep_cluster_state_uuid").to_string(), seqno)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..NODES {
            self.kill(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Node `i`'s ports: SQL, group communication, IST and SST.
struct Ports {
    sql: u16,
    gcomm: u16,
    ist: u16,
    sst: u16,
}

struct Node {
    dir: PathBuf,
    ports: Ports,
    child: Mutex<Option<Child>>,
}

impl Node {
    /// A node whose datadir is a copy of `template`.
    fn new(dir: PathBuf, template: &Path, [sql, gcomm, ist, sst]: [u16; 4]) -> Node {
        std::fs::create_dir_all(dir.join("tmp")).expect("create the node's tmpdir");
        copy_tree(template, &dir.join("data"));
        Node {
            dir,
            ports: Ports {
                sql,
                gcomm,
                ist,
                sst,
            },
            child: Mutex::new(None),
        }
    }

    /// `127.0.0.1:PORT` of its SQL port.
    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.ports.sql)
    }

    /// `mariadbd` as a Galera node of the cluster `name` at `address`.
    fn command(&self, address: &str, name: &str) -> Command {
        let Ports {
            sql,
            gcomm,
            ist,
            sst,
        } = self.ports;
        let provider = provider().expect("galera-4 is installed (can_run)");
        let mut cmd = server_command(&self.dir, sql);
        cmd.arg("--innodb-log-file-size=16M")
            .arg("--character-set-server=utf8mb4")
            // What Galera requires of the server.
            .arg("--binlog-format=ROW")
            .arg("--innodb-autoinc-lock-mode=2")
            .arg("--default-storage-engine=InnoDB")
            .arg("--wsrep-on=ON")
            .arg(format!("--wsrep-provider={}", provider.display()))
            .arg(format!("--wsrep-cluster-name={name}"))
            .arg(format!("--wsrep-cluster-address={address}"))
            .arg(format!("--wsrep-node-address=127.0.0.1:{gcomm}"))
            .arg(format!("--wsrep-node-incoming-address=127.0.0.1:{sql}"))
            .arg(format!(
                "--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{gcomm};\
                 ist.recv_addr=127.0.0.1:{ist};gcache.size=64M"
            ))
            .arg("--wsrep-sst-method=mariabackup")
            .arg("--wsrep-sst-auth=root:")
            .arg(format!("--wsrep-sst-receive-address=127.0.0.1:{sst}"));
        cmd
    }

    /// Writes `grastate.dat`: this node holds the cluster `uuid`'s state as of
    /// `seqno`, so it joins with no transfer (or an IST of what came after).
    fn claim_state(&self, uuid: &str, seqno: i64) {
        std::fs::write(
            self.dir.join("data/grastate.dat"),
            format!(
                "# GALERA saved state\nversion: 2.1\nuuid:    {uuid}\nseqno:   {seqno}\n\
                 safe_to_bootstrap: 0\n"
            ),
        )
        .expect("write grastate.dat");
    }

    /// The position a crashed node's InnoDB holds (`--wsrep-recover`), `uuid:seqno`;
    /// none when it has none.
    fn recovered_position(&self, address: &str) -> Option<String> {
        let log = self.dir.join("recover.log");
        let _ = std::fs::remove_file(&log);
        let mut cmd = self.command(address, "recover");
        cmd.arg("--wsrep-recover")
            .arg(format!("--log-error={}", log.display()));
        let status = spawn_tied_to_process(cmd)
            .and_then(|mut child| child.wait())
            .expect("run mariadbd --wsrep-recover");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(status.success(), "mariadbd --wsrep-recover failed: {text}");
        text.lines()
            .filter_map(|line| line.split("WSREP: Recovered position: ").nth(1))
            .next_back()
            .map(|position| position.trim().to_string())
            .filter(|position| !position.ends_with(":-1"))
    }

    /// Started, and not killed since.
    fn is_running(&self) -> bool {
        self.child.lock().unwrap().is_some()
    }

    /// The exit status if the node's process has exited.
    fn exited(&self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.lock().unwrap();
        child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// The last lines of its error log.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

/// A node's `wsrep_%` status (and `wsrep_on`), names in lower case.
#[derive(Clone)]
pub struct Wsrep(BTreeMap<String, String>);

impl Wsrep {
    /// The value of `name` (`wsrep_ready`, …), empty when the server has none.
    pub fn get(&self, name: &str) -> &str {
        self.0.get(name).map_or("", String::as_str)
    }

    /// Synced, ready, in a primary component of `size` nodes.
    pub fn is_synced(&self, size: usize) -> bool {
        self.get("wsrep_local_state_comment") == "Synced"
            && self.get("wsrep_ready") == "ON"
            && self.get("wsrep_cluster_status") == "Primary"
            && self.get("wsrep_cluster_size") == size.to_string()
    }
}

impl fmt::Debug for Wsrep {
    /// What says the node's state.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            "wsrep_on",
            "wsrep_ready",
            "wsrep_local_state_comment",
            "wsrep_cluster_status",
            "wsrep_cluster_size",
        ];
        let mut map = f.debug_map();
        for name in names {
            map.entry(&name, &self.get(name));
        }
        map.finish()
    }
}

/// A database of one test's own on the cluster: a [`TestDb`] on node 0, and its
/// URL on every node.
pub struct ClusterDb {
    db: TestDb,
    urls: Vec<String>,
}

impl ClusterDb {
    /// The database's URL on node `i`.
    pub fn url(&self, i: usize) -> &str {
        &self.urls[i]
    }

    /// A session on node `i` whose reads first wait until the node has applied
    /// every write the cluster committed before them (`wsrep_sync_wait = 1`):
    /// without it a row another node just committed may not be seen yet.
    pub async fn causal_conn(&self, i: usize) -> Conn {
        let mut conn = super::connect(&self.urls[i]).await;
        conn.query_drop("SET SESSION wsrep_sync_wait = 1")
            .await
            .expect("ask for causal reads");
        conn
    }

    /// `sql`'s single number, read causally on node `i`.
    pub async fn count_on(&self, i: usize, sql: &str) -> u64 {
        let mut conn = self.causal_conn(i).await;
        let count: Option<u64> = conn
            .query_first(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql} on node {i}: {e}"));
        conn.disconnect().await.ok();
        count.unwrap_or_else(|| panic!("{sql} on node {i}: no row"))
    }
}

impl Deref for ClusterDb {
    type Target = TestDb;

    /// The database on node 0.
    fn deref(&self) -> &TestDb {
        &self.db
    }
}

/// The datadir every node of this process's clusters starts from: installed once.
fn template(root: &Path) -> &'static Path {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{}-template-", std::process::id()))
            .tempdir_in(root)
            .expect("create the template datadir")
            .keep();
        // A small redo log: three copies of it to write per cluster.
        install(
            &dir.join("data"),
            &dir.join("tmp"),
            &["--innodb-log-file-size=16M"],
        );
        dir.join("data")
    })
}

/// `count` loopback ports free just now, all different, below the ephemeral range
/// (see [`free_port`]).
fn distinct_ports(count: usize) -> Vec<u16> {
    let mut ports = Vec::new();
    while ports.len() < count {
        let port = free_port();
        if !ports.contains(&port) {
            ports.push(port);
        }
    }
    ports
}
