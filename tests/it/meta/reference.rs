//! The book's reference pages made from the code — every queue-file key (from the
//! schema `tableq schema` prints), every command and flag (from the clap definition
//! `tableq man` reads too), every metric (from what `/metrics` exports) — are
//! committed, and each test fails when its page differs from what the code makes now.
//! `TABLEQ_UPDATE_REFERENCE=1 cargo test --test it -- meta::reference::` writes them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::CommandFactory;
use serde_json::Value;

use crate::support::daemon::{run_to_end, tableq};
use crate::support::endpoint::{exporting_every_family, get};
use crate::support::TestDb;

fn page_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/src/reference")
        .join(name)
}

/// The line under each generated page's title: how to make it again.
fn generated_note(from: &str) -> String {
    format!(
        "<!-- Generated from {from} by tests/it/meta/reference.rs: do not edit. Write it anew with\n     TABLEQ_UPDATE_REFERENCE=1 cargo test --test it -- meta::reference:: -->\n"
    )
}

/// Compares the committed page with `made`; writes it instead when
/// TABLEQ_UPDATE_REFERENCE is set.
fn assert_current(name: &str, made: &str) {
    let path = page_path(name);
    if std::env::var_os("TABLEQ_UPDATE_REFERENCE").is_some() {
        std::fs::write(&path, made).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != made {
        let first = committed
            .lines()
            .zip(made.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(committed.lines().count().min(made.lines().count()));
        panic!(
            "docs/src/reference/{name} is stale (first difference at line {}: {:?}); write it \
             anew with `TABLEQ_UPDATE_REFERENCE=1 cargo test --test it -- meta::reference::` \
             and commit it",
            first + 1,
            made.lines().nth(first).unwrap_or("(the end)")
        );
    }
}

/// A cell of a Markdown table: one line, with `|` escaped, and `<` and `>` outside
/// code spans too (`<queue>_<key>` is text, not HTML tags).
fn cell(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    escape_tags(&joined).replace('|', "\\|")
}

/// `<` and `>` as entities, except between backticks.
fn escape_tags(text: &str) -> String {
    text.split('`')
        .enumerate()
        .map(|(i, part)| match i % 2 {
            0 => part.replace('<', "&lt;").replace('>', "&gt;"),
            _ => part.to_string(),
        })
        .collect::<Vec<_>>()
        .join("`")
}

// ---- queue-file keys, from the schema ----

/// A property's type as a reader writes it: `integer (1–1000)`, `"a" | "b"`, a table.
fn type_of(schema: &Value, property: &Value) -> String {
    if let Some(values) = property["enum"].as_array() {
        let values: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
        return values.join(", ");
    }
    if let Some(value) = property.get("const") {
        return format!("`{value}`");
    }
    for combined in ["anyOf", "allOf", "oneOf"] {
        if let Some(parts) = property[combined].as_array() {
            let parts: Vec<String> = parts
                .iter()
                .filter(|part| part["type"] != "null")
                .map(|part| type_of(schema, part))
                .collect();
            return parts.join(" or ");
        }
    }
    if let Some(reference) = property["$ref"].as_str() {
        let name = reference.rsplit('/').next().unwrap_or(reference);
        let target = &schema["definitions"][name];
        return if target["oneOf"].is_array() || target["properties"].is_object() {
            "table".to_string()
        } else {
            type_of(schema, target)
        };
    }
    let kind = match &property["type"] {
        Value::String(kind) => kind.clone(),
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .filter(|kind| *kind != "null")
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".to_string(),
    };
    let mut kind = match kind.as_str() {
        "array" => format!("array of {}", type_of(schema, &property["items"])),
        "string" if property["pattern"].is_string() && property["examples"].is_array() => {
            "duration".to_string()
        }
        "object" if property["additionalProperties"].is_object() => "table of strings".to_string(),
        _ => kind,
    };
    if let (Some(min), Some(max)) = (property["minimum"].as_f64(), property["maximum"].as_f64()) {
        kind = format!("{kind} ({min}–{max})");
    }
    kind
}

/// The rows of one table of keys: `| key | type | default | meaning |`.
fn key_rows(schema: &Value, object: &Value, prefix: &str, out: &mut String) {
    out.push_str("| key | type | default | meaning |\n|---|---|---|---|\n");
    let required: BTreeSet<&str> = object["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    for (key, property) in object["properties"].as_object().expect("properties") {
        let default = match property.get("default") {
            _ if required.contains(key.as_str()) => "required".to_string(),
            Some(value) if !value.is_object() => format!("`{value}`"),
            _ => String::new(),
        };
        let meaning = property["description"].as_str().unwrap_or_default();
        out.push_str(&format!(
            "| `{prefix}{key}` | {} | {default} | {} |\n",
            cell(&type_of(schema, property)),
            cell(meaning)
        ));
    }
}

/// The definition a property refers to, if it is a table of its own.
fn table_of<'a>(schema: &'a Value, property: &Value) -> Option<&'a Value> {
    let reference = property["$ref"].as_str().or_else(|| {
        ["anyOf", "allOf"].iter().find_map(|combined| {
            property[combined]
                .as_array()?
                .iter()
                .find_map(|part| part["$ref"].as_str())
        })
    })?;
    let name = reference.rsplit('/').next()?;
    let target = &schema["definitions"][name];
    (target["properties"].is_object() || target["oneOf"].is_array()).then_some(target)
}

fn keys_page(schema: &Value) -> String {
    let mut out = String::from("# Every key\n\n");
    out.push_str(&generated_note("`tableq schema` (tableq.schema.json)"));
    out.push_str(
        "\nEvery key a queue file can hold, with its description as the loader's own types \
         give it. [The queue file](queue-file.md) explains how they fit together; \
         [`queues.example.toml`](../../../queues.example.toml) shows each in use. Durations \
         are written like `\"250ms\"`, `\"5s\"`, `\"2m\"`, `\"1h 30m\"`.\n\n## The queue\n\n",
    );
    key_rows(schema, schema, "", &mut out);
    for (key, property) in schema["properties"].as_object().expect("properties") {
        let Some(table) = table_of(schema, property) else {
            continue;
        };
        out.push_str(&format!("\n## `[{key}]`\n\n"));
        if let Some(description) = table["description"].as_str() {
            out.push_str(&format!("{}\n\n", cell(description)));
        }
        match table["oneOf"].as_array() {
            None => key_rows(schema, table, "", &mut out),
            Some(kinds) => {
                for kind in kinds {
                    let name = kind["properties"]["type"]["const"]
                        .as_str()
                        .expect("each kind names its type");
                    out.push_str(&format!("### `type = \"{name}\"`\n\n"));
                    if let Some(description) = kind["description"].as_str() {
                        out.push_str(&format!("{}\n\n", cell(description)));
                    }
                    key_rows(schema, kind, "", &mut out);
                    out.push('\n');
                }
            }
        }
    }
    out.trim_end().to_string() + "\n"
}

/// Every key of `object` and of the tables it holds, as `table.key`.
fn schema_keys(schema: &Value, object: &Value, prefix: &str, keys: &mut BTreeSet<String>) {
    for (key, property) in object["properties"].as_object().into_iter().flatten() {
        keys.insert(format!("{prefix}{key}"));
        if let Some(table) = table_of(schema, property) {
            let inner = format!("{prefix}{key}.");
            schema_keys(schema, table, &inner, keys);
            for kind in table["oneOf"].as_array().into_iter().flatten() {
                schema_keys(schema, kind, &inner, keys);
            }
        }
    }
}

/// The committed keys page is what the schema makes, and names every key.
#[tokio::test]
async fn the_keys_page_is_current() {
    let printed = run_to_end(tableq(&["schema"]), Duration::from_secs(30)).await;
    assert_eq!(printed.code(), Some(0), "{}", printed.stderr);
    let schema: Value = serde_json::from_str(&printed.stdout).expect("JSON");
    let page = keys_page(&schema);
    let mut keys = BTreeSet::new();
    schema_keys(&schema, &schema, "", &mut keys);
    assert!(keys.len() > 40, "{keys:?}");
    for key in &keys {
        let last = key.rsplit('.').next().unwrap_or(key);
        assert!(
            page.contains(&format!("| `{last}` |")),
            "the page leaves out {key}"
        );
    }
    assert_current("keys.md", &page);
}

// ---- the command line, from clap ----

/// How an argument is written: `--shutdown-timeout <DURATION>`, `<PATH>...`.
fn spelled(arg: &clap::Arg) -> String {
    let values = arg
        .get_value_names()
        .map(|names| {
            names
                .iter()
                .map(|name| format!("<{name}>"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| format!("<{}>", arg.get_id().as_str().to_uppercase()));
    let takes_value = arg.get_action().takes_values();
    let many = matches!(arg.get_num_args(), Some(range) if range.max_values() > 1);
    let mut text = match (arg.get_long(), arg.get_short()) {
        (Some(long), Some(short)) => format!("-{short}, --{long}"),
        (Some(long), None) => format!("--{long}"),
        (None, Some(short)) => format!("-{short}"),
        (None, None) => values.clone(),
    };
    if (arg.get_long().is_some() || arg.get_short().is_some()) && takes_value {
        text = format!("{text} {values}");
    }
    if many {
        text.push_str("...");
    }
    text
}

fn arg_rows(args: &[&clap::Arg], out: &mut String) {
    out.push_str("| argument | environment | default | meaning |\n|---|---|---|---|\n");
    for arg in args {
        let env = arg
            .get_env()
            .map(|env| format!("`{}`", env.to_string_lossy()))
            .unwrap_or_default();
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|value| format!("`{}`", value.to_string_lossy()))
            .collect();
        let mut meaning = arg
            .get_long_help()
            .or(arg.get_help())
            .map(ToString::to_string)
            .unwrap_or_default();
        let possible: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|value| !value.is_hide_set())
            .map(|value| format!("`{}`", value.get_name()))
            .collect();
        if !possible.is_empty() && arg.get_action().takes_values() {
            let stop = if meaning.ends_with('.') { "" } else { "." };
            meaning = format!("{meaning}{stop} One of {}.", possible.join(", "));
        }
        out.push_str(&format!(
            "| `{}` | {env} | {} | {} |\n",
            spelled(arg),
            defaults.join(", "),
            cell(&meaning)
        ));
    }
}

fn visible_args(command: &clap::Command, global: bool) -> Vec<&clap::Arg> {
    command
        .get_arguments()
        .filter(|arg| !arg.is_hide_set())
        .filter(|arg| arg.is_global_set() == global)
        .filter(|arg| !matches!(arg.get_id().as_str(), "help" | "version"))
        .collect()
}

fn cli_page() -> String {
    let mut command = tableq::commands::cli::Cli::command();
    command.build();
    let mut out = String::from("# Every command and flag\n\n");
    out.push_str(&generated_note(
        "the command line's definition (src/commands/cli.rs), which `tableq man` and `--help` read too",
    ));
    out.push_str(&format!(
        "\n{}\n\n```\n{}\n```\n\n[Running](running.md) says what each command does, \
         with its exit status and signals; `tableq help COMMAND` and `man tableq-COMMAND` \
         print the same as this page.\n\n## Every command\n\n",
        command
            .get_about()
            .map(ToString::to_string)
            .unwrap_or_default(),
        command.render_usage().to_string().trim()
    ));
    arg_rows(&visible_args(&command, true), &mut out);
    for sub in command.get_subcommands_mut() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let usage = sub.render_usage().to_string();
        out.push_str(&format!("\n## `tableq {}`\n\n", sub.get_name()));
        let about = sub
            .get_long_about()
            .or(sub.get_about())
            .map(ToString::to_string)
            .unwrap_or_default();
        out.push_str(&format!(
            "{}\n\n```\n{}\n```\n\n",
            escape_tags(about.trim()),
            usage.trim()
        ));
        let args = visible_args(sub, false);
        if !args.is_empty() {
            arg_rows(&args, &mut out);
        }
    }
    out.trim_end().to_string() + "\n"
}

/// The committed command-line page is what the clap definition makes, and names
/// every subcommand and every flag.
#[test]
fn the_cli_page_is_current() {
    let page = cli_page();
    let mut command = tableq::commands::cli::Cli::command();
    command.build();
    for sub in command.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        assert!(page.contains(&format!("## `tableq {}`", sub.get_name())));
        for arg in sub.get_arguments().filter(|arg| !arg.is_hide_set()) {
            if let Some(long) = arg.get_long() {
                assert!(page.contains(&format!("--{long}")), "--{long}");
            }
        }
    }
    assert_current("cli.md", &page);
}

// ---- metrics, from what /metrics exports ----

/// One metric family of a scrape: its type, help and label names.
#[derive(Default)]
struct Family {
    kind: String,
    help: String,
    labels: BTreeSet<String>,
}

/// The families an OpenMetrics scrape declares, with the labels its samples carry
/// (less `le`, which a histogram's buckets have).
fn families(scrape: &str) -> BTreeMap<String, Family> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for line in scrape.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            families.entry(name.to_string()).or_default().kind = kind.to_string();
        } else if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            families.entry(name.to_string()).or_default().help = help.replace("\\n", " ");
        } else if !line.starts_with('#') && !line.is_empty() {
            let name_end = line.find(['{', ' ']).unwrap_or(line.len());
            let sample = &line[..name_end];
            let family = families
                .keys()
                .filter(|family| sample.starts_with(family.as_str()))
                .max_by_key(|family| family.len())
                .cloned();
            let (Some(family), Some(labels)) = (family, line[name_end..].strip_prefix('{')) else {
                continue;
            };
            let labels = labels.split('}').next().unwrap_or_default();
            for pair in labels.split(',').filter(|pair| !pair.is_empty()) {
                let label = pair.split('=').next().unwrap_or_default();
                if label != "le" {
                    families
                        .get_mut(&family)
                        .expect("declared")
                        .labels
                        .insert(label.to_string());
                }
            }
        }
    }
    families
}

fn metrics_page(families: &BTreeMap<String, Family>) -> String {
    let mut out = String::from("# Metrics\n\n");
    out.push_str(&generated_note(
        "a scrape of a running tableq's /metrics (the registry in src/telemetry/metrics/)",
    ));
    out.push_str(
        "\nEvery metric family `/metrics` exports, as a query names it (a counter with \
         `_total`; a histogram's `_bucket`, `_sum` and `_count` come from the name shown), \
         with its labels and the help text the registry gives it. [Monitoring](../howto/monitoring.md) \
         explains them, with the dashboard and the alerts.\n\n\
         | metric | type | labels | help |\n|---|---|---|---|\n",
    );
    for (name, family) in families {
        // A 0.0.4 scrape names a counter's family with its `_total` already.
        let queried = if family.kind == "counter" && !name.ends_with("_total") {
            format!("{name}_total")
        } else {
            name.clone()
        };
        let labels: Vec<String> = family.labels.iter().map(|l| format!("`{l}`")).collect();
        out.push_str(&format!(
            "| `{queried}` | {} | {} | {} |\n",
            family.kind,
            labels.join(", "),
            cell(&family.help)
        ));
    }
    out
}

/// The committed metrics page lists every family a running tableq exports, with
/// its type, labels and help, and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_page_is_current() {
    let db = TestDb::new().await;
    let (mut daemon, url, _files) = exporting_every_family(&db, &[]).await;
    let scrape = get(&url).await.1;
    daemon.terminate().await;
    let families = families(&scrape);
    assert!(
        families.contains_key("tableq_queue_wait_seconds"),
        "{scrape}"
    );
    assert!(families.contains_key("process_open_fds"), "{scrape}");
    assert_current("metrics.md", &metrics_page(&families));
}
