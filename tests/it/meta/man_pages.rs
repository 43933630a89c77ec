//! `tableq man`: tableq(1) on stdout, or with a directory every page — tableq.1 and
//! one per subcommand — each with the sections a user looks for.

use std::time::Duration;

use crate::support::assert_has;
use crate::support::daemon::{run_to_end, tableq};
use clap::CommandFactory;
use tableq::commands::cli::Cli;

/// `tableq man DIR` writes tableq.1 and tableq-SUBCOMMAND.1 for every subcommand,
/// each with NAME, SYNOPSIS, OPTIONS, EXIT STATUS, ENVIRONMENT, SIGNALS and FILES.
#[tokio::test]
async fn man_writes_a_page_per_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    let done = run_to_end(
        tableq(&["man", out.to_str().unwrap()]),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    let mut expected: Vec<String> = Cli::command()
        .get_subcommands()
        .map(|s| format!("tableq-{}.1", s.get_name()))
        .collect();
    expected.push("tableq.1".into());
    expected.sort();
    let mut written: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(written, expected);
    for page in &written {
        let roff = std::fs::read_to_string(out.join(page)).unwrap();
        let title = page.trim_end_matches(".1");
        assert!(roff.contains(&format!(".TH {title} 1 ")), "{page}: {roff}");
        for section in [
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH OPTIONS",
            ".SH \"EXIT STATUS\"",
            ".SH ENVIRONMENT",
            ".SH SIGNALS",
            ".SH FILES",
            ".SH \"SEE ALSO\"",
        ] {
            assert!(roff.contains(section), "{page} has no {section}");
        }
    }
    let run = std::fs::read_to_string(out.join("tableq-run.1")).unwrap();
    for said in [
        "SIGHUP",
        "TABLEQ_DATABASE_URL_FILE",
        "TABLEQ_SHUTDOWN_TIMEOUT",
        "otlp\\-endpoint",
        "OTEL_SERVICE_NAME",
        "/etc/tableq/queues.d",
    ] {
        assert!(run.contains(said), "tableq-run(1) does not mention {said}");
    }
}

/// `tableq man` with no directory prints tableq(1), as `tableq man > tableq.1` expects.
#[tokio::test]
async fn man_alone_prints_the_main_page() {
    let done = run_to_end(tableq(&["man"]), Duration::from_secs(30)).await;
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    assert_has(&done.stdout, ".TH tableq 1 ");
    assert!(done.stdout.contains("tableq\\-run(1)") || done.stdout.contains("tableq-run(1)"));
    assert!(done.stdout.contains(".SH \"EXIT STATUS\""));
}
