//! The book (`docs/`, built by `mdbook build docs` in .ci/run) and the README hold
//! together: every relative link and `#anchor` lands on a file and a heading, every
//! page is in SUMMARY.md, every alert's `runbook_url` lands on its runbook's page and
//! anchor, the README's quickstart shows what `scripts/demo.sh` prints, and the
//! first-queue tutorial and the schedule how-to run as written.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the alerts' runbooks are when Prometheus sets no `tableq_book` external
/// label: the pages the Debian package and the container install.
const PACKAGED_RUNBOOKS: &str = "file:///usr/share/doc/tableq/runbooks/";

/// An alert's `runbook_url`: its page of the book published at the external label
/// `tableq_book` (docs/src/howto/publish-the-book.md), at its heading; else the page
/// the package installs.
fn runbook_url(alert: &str) -> String {
    let anchor = alert.to_lowercase();
    format!(
        "{{{{ with $externalLabels.tableq_book }}}}{{{{ . }}}}runbooks/{alert}.html#{anchor}\
         {{{{ else }}}}{PACKAGED_RUNBOOKS}{alert}.md{{{{ end }}}}"
    )
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every Markdown file under `dir`.
fn pages(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let path = entry.path();
        if path.is_dir() {
            found.extend(pages(&path));
        } else if path.extension().is_some_and(|ext| ext == "md") {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// The text outside fenced code blocks and HTML comments (SUMMARY.md's pages to
/// link at merge), line by line (numbered from 1).
fn prose(text: &str) -> Vec<(usize, &str)> {
    let (mut fenced, mut comment) = (false, false);
    let mut lines = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if comment || line.trim_start().starts_with("<!--") {
            comment = !line.contains("-->");
        } else if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((number + 1, line));
        }
    }
    lines
}

/// The id mdBook gives a heading: its text less markup, lower case, spaces as `-`,
/// only letters, digits, `-` and `_` kept; a repeated id gets `-1`, `-2`, ….
fn heading_ids(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut ids = BTreeSet::new();
    for (_, line) in prose(text) {
        let Some(heading) = line
            .strip_prefix('#')
            .map(|rest| rest.trim_start_matches('#'))
            .filter(|rest| rest.starts_with(' '))
        else {
            continue;
        };
        let id: String = heading
            .trim()
            .chars()
            .filter_map(|c| match c {
                c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c.to_ascii_lowercase()),
                c if c.is_whitespace() => Some('-'),
                _ => None,
            })
            .collect();
        let count = seen.entry(id.clone()).or_insert(0);
        ids.insert(if *count == 0 {
            id.clone()
        } else {
            format!("{id}-{count}")
        });
        *count += 1;
    }
    ids
}

/// The targets of the inline links and images of a line: `[text](target)`.
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    // Inline code is no link: drop what is between backticks.
    let plain: String = line
        .split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, part)| part)
        .collect::<Vec<_>>()
        .join(" ");
    let mut rest = plain.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        let target = after[..end].split_whitespace().next().unwrap_or_default();
        targets.push(target.to_string());
        rest = &after[end..];
    }
    targets
}

/// Every broken relative link of `page`: a file that is not there, or an anchor no
/// heading of its page has.
fn broken_links(page: &Path) -> Vec<String> {
    let text = read(page);
    let mut broken = Vec::new();
    let shown = page
        .strip_prefix(repo())
        .unwrap_or(page)
        .display()
        .to_string();
    for (number, line) in prose(&text) {
        for target in link_targets(line) {
            if target.contains("://") || target.starts_with("mailto:") || target.is_empty() {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let resolved = if file.is_empty() {
                page.to_path_buf()
            } else {
                page.parent().unwrap().join(file)
            };
            let normal = normalize(&resolved);
            if !normal.exists() {
                broken.push(format!("{shown}:{number}: {target}: no such file"));
                continue;
            }
            if anchor.is_empty() || normal.extension().is_none_or(|ext| ext != "md") {
                continue;
            }
            if !heading_ids(&read(&normal)).contains(anchor) {
                broken.push(format!("{shown}:{number}: {target}: no heading #{anchor}"));
            }
        }
    }
    broken
}

/// `a/b/../c` as `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every relative link and #anchor of the book's pages, the README and
/// CONTRIBUTING.md lands on a file that is there and a heading it has.
#[test]
fn every_link_in_the_book_and_the_readme_resolves() {
    let mut checked = pages(&repo().join("docs/src"));
    assert!(checked.len() > 30, "{checked:?}");
    checked.push(repo().join("README.md"));
    checked.push(repo().join("CONTRIBUTING.md"));
    let broken: Vec<String> = checked.iter().flat_map(|page| broken_links(page)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The link checker finds what it should: a missing file, a missing anchor.
#[test]
fn the_link_checker_finds_broken_links() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("page.md");
    std::fs::write(
        dir.path().join("other.md"),
        "# Other page\n\n## `type = \"sql\"`\n\n## Twice\n\n## Twice\n",
    )
    .unwrap();
    std::fs::write(
        &page,
        "# Page\n\n[good](other.md#type--sql) [twice](other.md#twice-1) [self](#page)\n\
         [gone](gone.md) [no anchor](other.md#nowhere) `[code](gone.md)`\n\
         ```\n[fenced](gone.md)\n```\n",
    )
    .unwrap();
    let broken = broken_links(&page);
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(broken[0].ends_with("gone.md: no such file"), "{broken:?}");
    assert!(broken[1].ends_with("no heading #nowhere"), "{broken:?}");
}

/// Every page under docs/src is in SUMMARY.md, so mdBook builds it and a reader
/// finds it; and
/// every page SUMMARY.md names is there (book.toml's create-missing = false makes
/// mdBook refuse the book otherwise).
#[test]
fn every_page_is_in_the_summary() {
    let src = repo().join("docs/src");
    let summary = read(&src.join("SUMMARY.md"));
    let named: BTreeSet<PathBuf> = summary
        .lines()
        .flat_map(link_targets)
        .map(|target| normalize(&src.join(target)))
        .collect();
    for page in pages(&src) {
        if page.ends_with("SUMMARY.md") {
            continue;
        }
        assert!(
            named.contains(&page),
            "{} is not in docs/src/SUMMARY.md",
            page.display()
        );
    }
    for target in summary.lines().flat_map(link_targets) {
        let path = src.join(&target);
        assert!(
            path.exists(),
            "SUMMARY.md names {target}, which is not there"
        );
    }
}

/// Every alert's `runbook_url` is its page of the published book, at its heading
/// (`<tableq_book>runbooks/<Alert>.html#<alert>`), or the page the package installs,
/// in the alerts file and in the PrometheusRule made from it; the page is there with
/// that heading; every runbook is an alert's.
#[test]
fn every_alert_links_its_runbook_page() {
    let alerts_file = repo().join("monitoring/tableq-alerts.yml");
    let alerts = &yaml_rust2::YamlLoader::load_from_str(&read(&alerts_file)).expect("YAML")[0];
    let runbooks = repo().join("docs/src/runbooks");
    let rule = read(&repo().join("kubernetes/components/prometheusrule/prometheusrule.yaml"));
    let mut named = BTreeSet::new();
    for rule_yaml in alerts["groups"][0]["rules"].as_vec().expect("rules") {
        let alert = rule_yaml["alert"].as_str().expect("an alert name");
        let url = rule_yaml["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_else(|| panic!("{alert} has no runbook_url"));
        let anchor = alert.to_lowercase();
        assert_eq!(url, runbook_url(alert), "{alert}");
        assert!(rule.contains(url), "the PrometheusRule has not {url}");
        let page = runbooks.join(format!("{alert}.md"));
        assert!(page.exists(), "no runbook page {}", page.display());
        assert!(
            heading_ids(&read(&page)).contains(&anchor),
            "{}: no heading #{anchor}",
            page.display()
        );
        named.insert(format!("{alert}.md"));
    }
    let pages: BTreeSet<String> = std::fs::read_dir(&runbooks)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name != "index.md")
        .collect();
    assert_eq!(
        pages, named,
        "runbook pages without an alert, or the reverse"
    );
}

/// With the external label `tableq_book` set, each alert's `runbook_url` is its page
/// of the book published there (promtool runs the alerts' tests with the label's
/// value written into the rules: Debian 12's promtool 2.42 takes no external labels
/// in a test file).
#[test]
fn a_tableq_book_label_leads_the_runbook_urls_to_the_published_book() {
    let Some(promtool) = crate::support::tools::required(
        &["promtool"],
        "apt-get install prometheus",
        "the runbook URLs under tableq_book",
    ) else {
        return;
    };
    let book = "https://docs.example/tableq/";
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("tests")).unwrap();
    let rules = read(&repo().join("monitoring/tableq-alerts.yml"))
        .replace("$externalLabels.tableq_book", &format!("`{book}`"));
    std::fs::write(dir.path().join("tableq-alerts.yml"), rules).unwrap();
    let mut tests = read(&repo().join("monitoring/tests/alerts.test.yml"));
    let packaged: BTreeSet<String> = tests
        .match_indices(PACKAGED_RUNBOOKS)
        .map(|(at, _)| tests[at..].split('"').next().unwrap().to_string())
        .collect();
    assert!(
        !packaged.is_empty(),
        "the alerts' tests expect runbook URLs"
    );
    for url in packaged {
        let alert = url[PACKAGED_RUNBOOKS.len()..].trim_end_matches(".md");
        let published = format!("{book}runbooks/{alert}.html#{}", alert.to_lowercase());
        tests = tests.replace(&url, &published);
    }
    std::fs::write(dir.path().join("tests/alerts.test.yml"), tests).unwrap();
    let done = std::process::Command::new(promtool)
        .args(["test", "rules", "tests/alerts.test.yml"])
        .current_dir(dir.path())
        .output()
        .expect("promtool runs");
    assert!(
        done.status.success(),
        "{}{}",
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr)
    );
}

/// The README's quickstart output (`ANCHOR: quickstart-output`), less what changes
/// from run to run (timestamps, times, ports, temporary folders, which worker took
/// an item), holds the lines a fresh `scripts/demo.sh` prints, in its order; `…`
/// stands for lines left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_quickstart_is_what_the_demo_prints() {
    let readme = read(&repo().join("README.md"));
    let shown = readme
        .split("<!-- ANCHOR: quickstart-output -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- ANCHOR_END: quickstart-output -->").next())
        .expect("the README marks its quickstart output");
    let shown: Vec<String> = shown
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with("```") && *line != "…")
        .map(steady)
        .collect();
    assert!(shown.len() > 20, "{shown:?}");

    // The demo's output as a terminal shows it: stdout and stderr in one stream.
    // It starts a private MariaDB of its own, as the README says.
    let script = format!("exec {} 2>&1", repo().join("scripts/demo.sh").display());
    let mut demo = tokio::process::Command::new("bash");
    demo.args(["-c", &script])
        .env("TABLEQ_BIN", env!("CARGO_BIN_EXE_tableq"))
        .env_remove("TABLEQ_DATABASE_URL")
        .env_remove("TABLEQ_LOG_FORMAT")
        .env_remove("TABLEQ_LOG")
        .env_remove("NO_COLOR")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(300), demo.output())
        .await
        .expect("the demo finished within 5 minutes")
        .expect("the demo ran");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{printed}");
    let printed: Vec<String> = printed.lines().map(steady).collect();

    // Section by section (each `==>` line starts one), in order; within one, the
    // log lines of concurrent tasks come in either order.
    let shown = sections(&shown);
    let printed = sections(&printed);
    let headers =
        |s: &[(String, Vec<String>)]| s.iter().map(|(h, _)| h.clone()).collect::<Vec<_>>();
    assert_eq!(headers(&shown), headers(&printed), "the demo's steps");
    for ((header, lines), (_, printed)) in shown.iter().zip(&printed) {
        for line in lines {
            assert!(
                printed.contains(line),
                "the README's quickstart shows, under {header}:\n  {line}\nwhich the demo did \
                 not print there; it printed:\n{}",
                printed.join("\n")
            );
        }
    }
}

/// Lines grouped under the `==>` line before them.
fn sections(lines: &[String]) -> Vec<(String, Vec<String>)> {
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    for line in lines {
        if line.starts_with("==>") {
            sections.push((line.clone(), Vec::new()));
        } else if let Some((_, under)) = sections.last_mut() {
            under.push(line.clone());
        }
    }
    sections
}

/// A line of the demo's output less what changes from run to run.
fn steady(line: &str) -> String {
    let mut words: Vec<String> = Vec::new();
    for (i, word) in line.split_whitespace().enumerate() {
        // The log's timestamp, as text logs start without a terminal.
        if i == 0 && word.len() > 20 && word.ends_with('Z') && word.contains('T') {
            continue;
        }
        let after_server = words.last().is_some_and(|w| w == "MariaDB" || w == "MySQL");
        let word = if after_server && word.starts_with(|c: char| c.is_ascii_digit()) {
            "VERSION".to_string()
        } else if word.starts_with("database=") {
            "database=…".to_string()
        } else if let Some(rest) = word.strip_prefix("worker{queue=") {
            let queue = rest.split(' ').next().unwrap_or_default();
            format!("worker{{queue={queue}")
        } else if word.starts_with("worker=") {
            "worker=N}:item{key".to_string() + word.split("}:item{key").nth(1).unwrap_or_default()
        } else if word.starts_with("/tmp/") {
            "/tmp/…".to_string()
        } else if word.contains("@127.0.0.1:") {
            word.split("@127.0.0.1:")
                .next()
                .unwrap_or_default()
                .to_string()
                + "@127.0.0.1:PORT"
        } else {
            word.to_string()
        };
        words.push(word);
    }
    let line = words.join(" ");
    // "5000 emails in 4.77 s: 1049 emails/s": the times are the machine's.
    if line.contains(" emails in ") && line.ends_with(" emails/s") {
        return line.split(" in ").next().unwrap_or_default().to_string() + " in … s";
    }
    line
}

/// The fenced code blocks of a Markdown text: each one's language and body.
fn fenced_blocks(text: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in text.lines() {
        match (line.strip_prefix("```"), open.take()) {
            (Some(_), Some(block)) => blocks.push(block),
            (Some(lang), None) => open = Some((lang.trim().to_string(), String::new())),
            (None, Some((lang, mut body))) => {
                body.push_str(line);
                body.push('\n');
                open = Some((lang, body));
            }
            (None, None) => {}
        }
    }
    blocks
}

/// A transcript's steps: each `$ command` line and the lines it printed.
fn steps(transcript: &str) -> Vec<(String, Vec<String>)> {
    let mut steps: Vec<(String, Vec<String>)> = Vec::new();
    for line in transcript.lines() {
        if let Some(command) = line.strip_prefix("$ ") {
            steps.push((command.to_string(), Vec::new()));
        } else if let Some((_, printed)) = steps.last_mut() {
            printed.push(line.to_string());
        }
    }
    steps
}

/// The README's "Your first queue" shows the tutorial's very table, queue file and
/// transcripts.
#[test]
fn the_readme_first_queue_is_the_tutorials() {
    let readme = read(&repo().join("README.md"));
    let section = readme
        .split("\n## Your first queue\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the README has ## Your first queue");
    let tutorial = read(&repo().join("docs/src/tutorials/first-queue.md"));
    assert_eq!(fenced_blocks(section), fenced_blocks(&tutorial));
}

/// The first-queue tutorial, run as written on a fresh database: its table, its
/// queue file, and each `tableq` command of its transcripts printing the lines it
/// shows (less what changes from run to run; `…` stands for lines left out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_queue_tutorial_runs_as_written() {
    let tutorial = read(&repo().join("docs/src/tutorials/first-queue.md"));
    let blocks = fenced_blocks(&tutorial);
    let block = |lang: &str| {
        blocks
            .iter()
            .find(|(l, _)| l == lang)
            .map(|(_, body)| body.clone())
            .unwrap_or_else(|| panic!("the tutorial has no {lang} block"))
    };
    let db = crate::support::TestDb::new().await;
    for statement in block("sql").split(";\n").filter(|s| !s.trim().is_empty()) {
        db.exec(statement).await;
    }
    let files = crate::support::QueueFiles::new();
    files.write("welcome.toml", &block("toml"));

    let transcripts: Vec<&String> = blocks
        .iter()
        .filter(|(lang, body)| lang.is_empty() && body.starts_with("$ "))
        .map(|(_, body)| body)
        .collect();
    assert_eq!(transcripts.len(), 2, "{blocks:?}");
    let mut ran = 0;
    for (command, shown) in transcripts.into_iter().flat_map(|t| steps(t)) {
        if command.starts_with("export ") {
            continue;
        }
        if command.starts_with("mysql ") {
            let sql = command.split('"').nth(1).expect("mysql -e \"SQL\"");
            db.exec(sql).await;
            continue;
        }
        let args: Vec<&str> = command
            .strip_prefix("tableq ")
            .unwrap_or_else(|| panic!("a step the test cannot take: {command}"))
            .split_whitespace()
            .collect();
        let mut tableq = crate::support::daemon::tableq(&args);
        tableq
            .current_dir(files.path())
            .env("TABLEQ_DATABASE_URL", &db.url);
        let done = crate::support::daemon::run_to_end(tableq, Duration::from_secs(60)).await;
        let printed: Vec<String> = format!("{}{}", done.stdout, done.stderr)
            .lines()
            .map(steady)
            .collect();
        for line in shown.iter().filter(|line| *line != "…") {
            assert!(
                printed.contains(&steady(line)),
                "`{command}` printed no line\n  {line}\nit printed:\n{}",
                printed.join("\n")
            );
        }
        ran += 1;
    }
    assert_eq!(ran, 5, "check, run, failed, retry, run");
}

/// The queue files the tutorials show are the shipped examples' (which the tests
/// in meta::examples run): every key a tutorial's TOML sets, the example sets to the
/// same value; the table the webhooks tutorial creates is the example's.
#[test]
fn the_tutorials_show_the_shipped_examples() {
    for (page, example) in [
        ("tutorials/webhooks.md", "config/webhook.toml"),
        ("tutorials/from-a-cron-script.md", "config/email.toml"),
    ] {
        let blocks = fenced_blocks(&read(&repo().join("docs/src").join(page)));
        let shown = blocks
            .iter()
            .find(|(lang, _)| lang == "toml")
            .map(|(_, body)| body.parse::<toml::Table>().expect("TOML"))
            .unwrap_or_else(|| panic!("{page} shows no queue file"));
        let shipped: toml::Table = read(&repo().join(example)).parse().expect("TOML");
        within(&shown, &shipped, &format!("{page} against {example}: "));
    }
    let tutorial = read(&repo().join("docs/src/tutorials/webhooks.md"));
    let create = fenced_blocks(&tutorial)
        .into_iter()
        .find(|(lang, body)| lang == "sql" && body.starts_with("CREATE TABLE"))
        .expect("the webhooks tutorial creates its table")
        .1;
    assert!(read(&repo().join("config/webhook.sql")).contains(&create));
}

/// Every key of `shown` is in `shipped`, with the same value.
fn within(shown: &toml::Table, shipped: &toml::Table, path: &str) {
    for (key, value) in shown {
        let there = shipped
            .get(key)
            .unwrap_or_else(|| panic!("{path}{key} is not in the example"));
        match (value, there) {
            (toml::Value::Table(inner), toml::Value::Table(example)) => {
                within(inner, example, &format!("{path}{key}."))
            }
            _ => assert_eq!(value, there, "{path}{key}"),
        }
    }
}

/// The README stays a front door — what tableq is, install, the quickstart, a first
/// queue, links into the book — of at most 300 lines; the rest goes in the book.
#[test]
fn the_readme_is_short() {
    let lines = read(&repo().join("README.md")).lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines: move the rest into docs/src/"
    );
}

/// Recurring work's schedule example, run as written on a fresh database (its period
/// shortened from a minute to a second): its tables, its queue file, and `tableq
/// schedules` on it — the minute's three orders rolled up, once per due time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedule_howto_runs_as_written() {
    let page = read(&repo().join("docs/src/howto/recurring.md"));
    let section = &page[page.find("\n## Schedules").expect("the Schedules section")..];
    let blocks = fenced_blocks(section);
    let block = |lang: &str| {
        blocks
            .iter()
            .find(|(l, _)| l == lang)
            .map(|(_, body)| body.clone())
            .unwrap_or_else(|| panic!("the section has no {lang} block"))
    };
    let db = crate::support::TestDb::new().await;
    for statement in block("sql").split(";\n").filter(|s| !s.trim().is_empty()) {
        db.exec(statement).await;
    }
    let toml = block("toml");
    assert!(toml.contains("schedule = \"every 1m\""), "{toml}");
    let files = crate::support::QueueFiles::new();
    let file = files.write("rollup.toml", &toml.replace("every 1m", "every 1s"));
    let mut daemon = crate::support::daemon::copy(&file, &db.url);
    crate::support::eventually("the orders rolled up", Duration::from_secs(30), || async {
        db.count("SELECT COALESCE(MAX(orders), 0) FROM orders_per_minute")
            .await
            == 3
    })
    .await;
    let mut schedules = crate::support::daemon::tableq(&["schedules"]);
    schedules.arg(&file).env("TABLEQ_DATABASE_URL", &db.url);
    let done = crate::support::daemon::run_to_end(schedules, Duration::from_secs(60)).await;
    daemon.terminate().await;
    assert_eq!(done.code(), Some(0), "{}", done.stderr);
    let shown = block("text");
    let header = |text: &str| -> String {
        let first = text.lines().next().unwrap_or_default();
        first.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    assert_eq!(header(&done.stdout), header(&shown), "{}", done.stdout);
    assert!(
        done.stdout.contains("rollup  every 1s  "),
        "{}",
        done.stdout
    );
}
