//! The shipped dashboard and alerts (`monitoring/`) and the book's Monitoring page
//! (docs/src/howto/monitoring.md) name only metrics tableq exports, and the page
//! names every one.

use std::collections::BTreeSet;
use std::path::Path;

use crate::support;
use crate::support::endpoint::{exporting_every_family, get};
use crate::support::TestDb;

/// The metric families a scrape declares (`# TYPE name kind`), as OpenMetrics names
/// them: a counter without the `_total` the text format's `# TYPE` gives it.
fn families(scrape: &str) -> BTreeSet<String> {
    scrape
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(
            |rest| match rest.split_whitespace().collect::<Vec<_>>()[..] {
                [name, "counter"] => Some(name.strip_suffix("_total").unwrap_or(name)),
                [name, ..] => Some(name),
                [] => None,
            },
        )
        .map(str::to_string)
        .collect()
}

/// The `tableq_…` names that are no metric: the external label the alerts read the
/// published book's address from, and the table the schedule metrics are read from.
const NOT_METRICS: [&str; 2] = ["tableq_book", "tableq_schedules"];

/// Every `tableq_…` and `process_…` name in `text`, as its family (without
/// `_total`, `_bucket`, `_sum`, `_count`).
fn named_in(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for prefix in ["tableq_", "process_"] {
        for (at, _) in text.match_indices(prefix) {
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            let name: String = text[at..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            let family = ["_total", "_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .unwrap_or(&name);
            let family = family.trim_end_matches('_');
            if !NOT_METRICS.contains(&family) {
                names.insert(family.to_string());
            }
        }
    }
    names
}

fn read(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The dashboard's queries, the alerts' expressions and the Monitoring page name
/// metrics a running tableq exports; the page names all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_alerts_and_monitoring_page_name_the_exported_metrics() {
    let db = TestDb::new().await;
    let (mut daemon, url, _files) = exporting_every_family(&db, &[]).await;
    let exported = families(&get(&url).await.1);
    daemon.terminate().await;
    assert!(
        exported.contains("tableq_queue_wait_seconds"),
        "{exported:?}"
    );

    let page = read("docs/src/howto/monitoring.md");
    for (file, text) in [
        (
            "monitoring/tableq-dashboard.json",
            read("monitoring/tableq-dashboard.json"),
        ),
        (
            "monitoring/tableq-alerts.yml",
            read("monitoring/tableq-alerts.yml"),
        ),
        ("docs/src/howto/monitoring.md", page.clone()),
    ] {
        let named = named_in(&text);
        assert!(!named.is_empty(), "{file} names no metric");
        let unknown: Vec<_> = named.difference(&exported).collect();
        assert!(
            unknown.is_empty(),
            "{file} names metrics tableq does not export: {unknown:?}"
        );
    }
    let listed = named_in(&page);
    let unlisted: Vec<_> = exported.difference(&listed).collect();
    assert!(
        unlisted.is_empty(),
        "docs/src/howto/monitoring.md leaves out {unlisted:?}"
    );
}

/// Wrong monitoring keys are findings naming the key, its line and what is right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_monitoring_keys_are_named() {
    let (done, shown) = support::check::check_offline(
        "select = \"SELECT id FROM job WHERE state = 'waiting' ORDER BY id\"\n\
         waiting_since = \"created_at\"\n\
         waiting_cap = 0\n\
         stats_interval = \"0s\"\n\
         [action]\ntype = \"sql\"\nsql = \"DO :id\"\n",
    )
    .await;
    support::check::assert_report(
        &done,
        &[
            format!("{shown}:4: queue jobs: error: `stats_interval` must be longer than zero, e.g. \"15s\""),
            format!("{shown}:3: queue jobs: error: `waiting_cap` = 0 is out of range: use 1 to 1000000"),
            format!("{shown}:2: queue jobs: error: `waiting_since` = \"created_at\" is not a column the select returns (id); add it to the select, or name one it returns"),
        ],
        "1 queue offline: 3 errors, 0 warnings",
        1,
    );
}

/// `check` reads the plan of the oldest-row read of a queue with `waiting_since`:
/// on the claim's own index, it has nothing to say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_finds_the_oldest_row_read_on_the_claims_index() {
    let db = support::check::job_db().await;
    db.exec("ALTER TABLE job ADD COLUMN created_at DATETIME NULL")
        .await;
    let queue = support::check::GOOD
        .replace(
            "SELECT id, attempts FROM job WHERE",
            "SELECT id, attempts, created_at FROM job FORCE INDEX (state_id) WHERE",
        )
        .replace("[action]", "waiting_since = \"created_at\"\n[action]");
    let (done, _) = support::check::check_online(&db, &queue).await;
    support::check::assert_report(&done, &[], ": 0 errors, 0 warnings", 0);
}

/// The dashboard never adds up `tableq_waiting` over copies (every copy counts the
/// same rows, so three copies would show three times the backlog): the backlog is
/// the largest count of any copy.
#[test]
fn the_dashboard_never_sums_the_backlog() {
    let dashboard: serde_json::Value =
        serde_json::from_str(&read("monitoring/tableq-dashboard.json")).expect("JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut backlog = Vec::new();
    for panel in panels {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("an expr");
            if expr.contains("tableq_waiting") || expr.contains("tableq_oldest_waiting") {
                assert!(!expr.contains("sum"), "{}: {expr}", panel["title"]);
                backlog.push(expr);
            }
        }
    }
    assert!(
        backlog
            .iter()
            .any(|expr| expr.starts_with("max by (queue) (tableq_waiting{")),
        "{backlog:?}"
    );
}
