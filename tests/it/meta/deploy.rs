//! The deployment files agree with the code and the repository: the systemd unit,
//! the supervisor program, the Dockerfile and docker-compose.yml stop tableq with
//! SIGTERM and wait past its shutdown timeout, name files that exist, and use the
//! ports, addresses and subcommands the binary has. And `tableq health`, which the
//! container's HEALTHCHECK runs, answers from a running tableq.

use std::path::Path;
use std::time::Duration;

use tableq::commands::cli::{DEFAULT_METRICS_ADDR, DEFAULT_SHUTDOWN_TIMEOUT};
use tableq::config::DEFAULT_DATABASE_TIMEOUT;
use yaml_rust2::{Yaml, YamlLoader};

use crate::support;
use crate::support::daemon::{run_to_end, tableq, Daemon};
use crate::support::{assert_has, free_port, job_table, waiting_jobs, QueueFiles, TestDb};

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The values of `key` (`KEY=` or `KEY ` or `key=`) on lines of their own, in order.
fn values<'a>(text: &'a str, key: &str) -> Vec<&'a str> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix(key))
        .map(str::trim)
        .collect()
}

fn value<'a>(text: &'a str, key: &str) -> &'a str {
    match values(text, key).as_slice() {
        [one] => one,
        other => panic!("{key}: {other:?}"),
    }
}

fn seconds(duration: &str) -> u64 {
    humantime::parse_duration(duration)
        .unwrap_or_else(|e| panic!("{duration}: {e}"))
        .as_secs()
}

fn shutdown_timeout() -> u64 {
    seconds(DEFAULT_SHUTDOWN_TIMEOUT)
}

fn metrics_port() -> u16 {
    DEFAULT_METRICS_ADDR
        .parse::<std::net::SocketAddr>()
        .unwrap()
        .port()
}

/// systemd (252 and later) runs tableq as a notify service that reloads on SIGHUP,
/// with a watchdog that outlasts a reload, stops it with SIGTERM past its shutdown
/// timeout, does not retry exit 2, and keeps a writable state directory for commands.
#[test]
fn the_systemd_unit_agrees_with_the_code() {
    let unit = read("systemd/tableq.service");
    // Not notify-reload: systemd 252 (Debian 12, Ubuntu 22.04) does not know it.
    assert_eq!(value(&unit, "Type="), "notify");
    assert_eq!(value(&unit, "ExecReload="), "kill -HUP $MAINPID");
    assert_eq!(value(&unit, "KillSignal="), "SIGTERM");
    // No directory: systemd finds /usr/local/bin/tableq or the package's /usr/bin/tableq.
    assert_eq!(
        value(&unit, "ExecStart="),
        "tableq run /etc/tableq/queues.d"
    );
    let credential = value(&unit, "LoadCredential=");
    let (id, _source) = credential.split_once(':').expect("LoadCredential=ID:NAME");
    assert_eq!(id, tableq::commands::database_url::CREDENTIAL);
    let timeout = value(&unit, "Environment=TABLEQ_SHUTDOWN_TIMEOUT=");
    assert_eq!(seconds(timeout), shutdown_timeout());
    let stop_after: u64 = value(&unit, "TimeoutStopSec=").parse().unwrap();
    assert!(
        stop_after > seconds(timeout),
        "systemd would SIGKILL during the graceful stop"
    );
    assert_eq!(
        value(&unit, "RestartPreventExitStatus="),
        "2",
        "bad queue files are not retried"
    );
    // tableq feeds it every half period, and a reload feeds nothing while it
    // prepares the changed queues (database_timeout for each 16 of them on a
    // database that does not answer): half a period holds two such waits.
    let watchdog = value(&unit, "WatchdogSec=");
    assert!(
        seconds(&format!("{watchdog}s")) >= 4 * DEFAULT_DATABASE_TIMEOUT.as_secs(),
        "WatchdogSec={watchdog} would kill tableq during a slow reload"
    );
    let guide = read("systemd/README.md");
    assert!(
        guide.contains(&format!("`WatchdogSec={watchdog}`")),
        "systemd/README.md names another WatchdogSec="
    );
    assert!(value(&unit, "LimitNOFILE=").parse::<u64>().unwrap() >= 4096);
    assert_eq!(value(&unit, "StateDirectory="), "tableq");
    assert_eq!(value(&unit, "WorkingDirectory="), "/var/lib/tableq");
    assert!(
        guide.contains("Type=notify-reload\nExecReload=\n"),
        "systemd/README.md shows the drop-in for systemd 253 and later"
    );
}

/// supervisord stops tableq with SIGTERM, waits past its shutdown timeout, restarts
/// it only on an unexpected exit, and counts only 0 as expected.
#[test]
fn the_supervisor_program_agrees_with_the_code() {
    let conf = read("supervisor/tableq.conf");
    assert_eq!(value(&conf, "[program:"), "tableq]");
    assert_eq!(value(&conf, "stopsignal="), "TERM");
    let wait: u64 = value(&conf, "stopwaitsecs=").parse().unwrap();
    assert!(
        wait > shutdown_timeout(),
        "supervisord would SIGKILL mid-drain"
    );
    assert_eq!(value(&conf, "autorestart="), "unexpected");
    assert_eq!(value(&conf, "exitcodes="), "0");
    assert!(value(&conf, "command=").starts_with("/usr/local/bin/tableq run "));
    assert!(conf.contains("TABLEQ_SHUTDOWN_TIMEOUT=\"30s\""));
    assert!(conf.contains("\"fix the\n; files\""), "exit 2 is explained");
}

/// The image: built from files that exist, CA certificates for HTTPS, not root,
/// SIGTERM, a HEALTHCHECK through `tableq health`, and the metrics port exposed and
/// listened on.
#[test]
fn the_dockerfile_agrees_with_the_code_and_the_repository() {
    let dockerfile = read("Dockerfile");
    assert_eq!(value(&dockerfile, "STOPSIGNAL"), "SIGTERM");
    for copy in values(&dockerfile, "COPY ") {
        if copy.starts_with("--from") {
            continue;
        }
        let sources: Vec<&str> = copy.split_whitespace().collect();
        for source in &sources[..sources.len() - 1] {
            assert!(repo(source).exists(), "COPY {source}: no such file");
        }
    }
    let binary = "/usr/local/bin/tableq";
    assert!(values(&dockerfile, "COPY --from=build")
        .contains(&format!("/src/target/release/tableq {binary}").as_str()));
    assert_eq!(value(&dockerfile, "ENTRYPOINT"), format!("[\"{binary}\"]"));
    assert!(dockerfile.contains(&format!("CMD [\"{binary}\", \"health\"]")));
    assert!(dockerfile.contains("ca-certificates"));
    let user = value(&dockerfile, "USER");
    assert!(!user.starts_with('0') && user != "root", "USER {user}");
    let port = metrics_port().to_string();
    assert_eq!(value(&dockerfile, "EXPOSE"), port);
    assert_eq!(
        value(&dockerfile, "ENV TABLEQ_METRICS_ADDR="),
        format!("0.0.0.0:{port}")
    );
    assert_eq!(
        values(&dockerfile, "CMD").last(),
        Some(&"[\"run\", \"/etc/tableq/queues.d\"]")
    );
}

fn compose() -> Yaml {
    YamlLoader::load_from_str(&read("docker-compose.yml"))
        .expect("docker-compose.yml is YAML")
        .remove(0)
}

fn strings(yaml: &Yaml) -> Vec<&str> {
    yaml.as_vec()
        .map(|v| v.iter().filter_map(Yaml::as_str).collect())
        .unwrap_or_default()
}

/// docker-compose.yml mounts files that exist where the image reads them, builds the
/// image from this repository, publishes the metrics port, waits past the shutdown
/// timeout, and runs a MariaDB that tableq supports.
#[test]
fn docker_compose_agrees_with_the_repository() {
    let compose = compose();
    let services = &compose["services"];
    let tableq = &services["tableq"];
    assert_eq!(tableq["build"].as_str(), Some("."));
    assert_eq!(tableq["image"].as_str(), Some("tableq"));
    let port = metrics_port();
    assert_eq!(
        strings(&tableq["ports"]),
        [format!("127.0.0.1:{port}:{port}")]
    );
    let grace = seconds(tableq["stop_grace_period"].as_str().unwrap());
    assert!(grace > shutdown_timeout(), "docker would SIGKILL mid-drain");
    for service in ["mariadb", "receiver", "tableq"] {
        for volume in strings(&services[service]["volumes"]) {
            let host = volume.split(':').next().unwrap();
            assert!(repo(host).exists(), "{service}: {host} does not exist");
        }
    }
    let queues: Vec<&str> = strings(&tableq["volumes"])
        .into_iter()
        .map(|v| v.split(':').nth(1).unwrap())
        .collect();
    assert!(queues
        .iter()
        .all(|q| q.starts_with("/etc/tableq/queues.d/")));
    let image = services["mariadb"]["image"].as_str().unwrap();
    let version: f64 = image.strip_prefix("mariadb:").unwrap().parse().unwrap();
    assert!(version >= 10.6, "{image}");
    let url = tableq["environment"]["TABLEQ_DATABASE_URL"]
        .as_str()
        .unwrap();
    let mariadb = &services["mariadb"]["environment"];
    for part in ["MARIADB_USER", "MARIADB_PASSWORD", "MARIADB_DATABASE"] {
        assert!(
            url.contains(mariadb[part].as_str().unwrap()),
            "{url}: {part}"
        );
    }
}

/// `tableq health` says a running tableq is well (and ready), reaching a listener
/// on every interface through loopback, and exits 1 once nothing answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tableq_health_asks_a_running_tableq() {
    let db = TestDb::new().await;
    job_table(&db, &[]).await;
    let files = QueueFiles::new();
    let file = waiting_jobs("jobs").action_sql("DO 1").write(&files);
    let port = free_port();
    let mut cmd = tableq(&["run"]);
    cmd.arg(&file)
        .env("TABLEQ_DATABASE_URL", &db.url)
        .env("TABLEQ_METRICS_ADDR", format!("0.0.0.0:{port}"));
    let mut daemon = Daemon::spawn(cmd);
    daemon
        .wait_for_log("queue started", Duration::from_secs(30))
        .await;
    let health = |extra: &[&str]| {
        let mut cmd = tableq(&["health"]);
        cmd.args(extra)
            .env("TABLEQ_METRICS_ADDR", format!("0.0.0.0:{port}"));
        run_to_end(cmd, Duration::from_secs(30))
    };
    let well = health(&[]).await;
    assert_eq!(well.code(), Some(0), "{}", well.stderr);
    assert_eq!(well.stdout.trim(), "ok");
    support::eventually("ready", Duration::from_secs(30), || async {
        health(&["--ready"]).await.code() == Some(0)
    })
    .await;
    daemon.terminate().await;
    let gone = health(&[]).await;
    assert_eq!(gone.code(), Some(1));
    assert_has(&gone.stderr, &format!("127.0.0.1:{port}/healthz"));
}
