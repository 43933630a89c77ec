//! `tableq check --format text|json|github`: the same findings and exit status,
//! printed for people, for programs, and as GitHub Actions annotations.

use std::path::Path;

use crate::support::check::check;
use crate::support::QueueFiles;

/// A queue with one error: the action names a column the select does not return.
const BROKEN: &str = r#"select = "SELECT id FROM job WHERE state = 'waiting' ORDER BY id"
[action]
type = "sql"
sql = "DO :idx"
[on_failure]
sql = "UPDATE job SET state = 'failed' WHERE id = :id"
"#;

/// A queue with one warning: no [on_failure].
const UNGUARDED: &str = r#"select = "SELECT id FROM job WHERE state = 'waiting' ORDER BY id"
[action]
type = "sql"
sql = "DO :id"
[on_success]
sql = "UPDATE job SET state = 'done' WHERE id = :id"
"#;

fn queues() -> (QueueFiles, Vec<std::path::PathBuf>) {
    let files = QueueFiles::new();
    let paths = vec![
        files.write("broken.toml", BROKEN),
        files.write("unguarded.toml", UNGUARDED),
    ];
    (files, paths)
}

fn refs(paths: &[std::path::PathBuf]) -> Vec<&Path> {
    paths.iter().map(|p| p.as_path()).collect()
}

/// `--format github` prints each finding as `::error` or `::warning` with the file,
/// the line and the queue, then the summary; the exit status is text's.
#[tokio::test]
async fn github_annotations_point_at_the_file_and_line() {
    let (_files, paths) = queues();
    let done = check(&["--offline", "--format", "github"], &refs(&paths), None).await;
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            format!(
                "::error file={},line=4,title=tableq check%3A queue broken::`action.sql` uses \
                 `:idx`, which is not a column the select returns (id) nor one of :queue",
                paths[0].display()
            )
            .as_str(),
            format!(
                "::warning file={},line=2,title=tableq check%3A queue unguarded::no \
                 [on_failure]: a failing item returns to the queue at once and is retried \
                 forever, at the front of the queue; record the failure on the row (attempts, \
                 retry_at, status) so it leaves the query",
                paths[1].display()
            )
            .as_str(),
            "checked 2 queues offline: 1 error, 1 warning",
        ],
        "{}",
        done.stdout
    );
    assert_eq!(done.code(), Some(1));
}

/// `--format json` is one document with every finding's fields and the counts.
#[tokio::test]
async fn json_holds_every_finding_and_the_counts() {
    let (_files, paths) = queues();
    let done = check(&["--offline", "--format", "json"], &refs(&paths), None).await;
    let report: serde_json::Value = serde_json::from_str(&done.stdout).expect("one JSON document");
    assert_eq!(report["queues"], 2);
    assert_eq!(report["offline"], true);
    assert_eq!(report["errors"], 1);
    assert_eq!(report["warnings"], 1);
    assert_eq!(
        report["summary"],
        "checked 2 queues offline: 1 error, 1 warning"
    );
    let first = &report["findings"][0];
    assert_eq!(first["file"], paths[0].display().to_string());
    assert_eq!(first["line"], 4);
    assert_eq!(first["queue"], "broken");
    assert_eq!(first["severity"], "error");
    assert!(first["message"].as_str().unwrap().contains("`:idx`"));
    assert_eq!(report["findings"][1]["severity"], "warning");
    assert_eq!(done.code(), Some(1));
}

/// `--format text` (the default) is the one line per finding people read.
#[tokio::test]
async fn text_is_the_default() {
    let (_files, paths) = queues();
    let plain = check(&["--offline"], &refs(&paths), None).await;
    let text = check(&["--offline", "--format", "text"], &refs(&paths), None).await;
    assert_eq!(plain.stdout, text.stdout);
    assert!(plain.stdout.starts_with(&format!(
        "{}:4: queue broken: error: `action.sql` uses `:idx`",
        paths[0].display()
    )));
}
