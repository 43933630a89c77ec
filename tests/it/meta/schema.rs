//! `tableq schema`: the JSON Schema of the queue file that editors read. The
//! committed tableq.schema.json is what the binary prints now, every shipped queue
//! file names it in its first line, and a real JSON Schema validator accepts every
//! shipped queue file and refuses a misspelt key.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::daemon::{run_to_end, tableq};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// The shipped queue files: the commented example, config/ and compose/.
fn shipped_queue_files() -> Vec<PathBuf> {
    let mut files = vec![repo("queues.example.toml"), repo("compose/webhook.toml")];
    let mut config: Vec<PathBuf> = std::fs::read_dir(repo("config"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    config.sort();
    files.append(&mut config);
    files
}

/// The committed tableq.schema.json is exactly what `tableq schema` prints.
#[tokio::test]
async fn the_committed_schema_is_not_stale() {
    let printed = run_to_end(tableq(&["schema"]), Duration::from_secs(30)).await;
    assert_eq!(printed.code(), Some(0), "{}", printed.stderr);
    let committed = std::fs::read_to_string(repo("tableq.schema.json")).unwrap();
    assert!(
        printed.stdout == committed,
        "tableq.schema.json is stale: run `cargo run -- schema > tableq.schema.json`"
    );
    let schema: serde_json::Value = serde_json::from_str(&printed.stdout).unwrap();
    assert_eq!(schema["additionalProperties"], false);
    assert!(schema["properties"]["select"]["description"]
        .as_str()
        .is_some_and(|d| d.contains("FOR UPDATE SKIP LOCKED")));
}

/// Every shipped queue file starts with taplo's `#:schema` directive, a relative
/// path that leads to the committed schema.
#[test]
fn every_shipped_queue_file_names_the_schema() {
    let schema = std::fs::canonicalize(repo("tableq.schema.json")).unwrap();
    for file in shipped_queue_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let first = text.lines().next().unwrap_or_default();
        let target = first
            .strip_prefix("#:schema ")
            .unwrap_or_else(|| panic!("{}: the first line is not #:schema", file.display()));
        assert!(target.starts_with('.'), "{}: {target}", file.display());
        let resolved = std::fs::canonicalize(file.parent().unwrap().join(target.trim()));
        assert_eq!(
            resolved.ok().as_ref(),
            Some(&schema),
            "{}: {target}",
            file.display()
        );
    }
}

/// check-jsonschema, a real validator, accepts every shipped queue file (and the
/// commented-out blocks of queues.example.toml) against the schema, and refuses
/// queues.example.toml with a key misspelt at the top level and in [action].
#[test]
fn a_json_schema_validator_accepts_the_examples_and_refuses_a_typo() {
    let output = std::process::Command::new("bash")
        .arg(repo(".ci/validate-schema"))
        .current_dir(repo(""))
        .output()
        .expect("bash runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{said}");
    assert!(said.contains("'wrokers' was unexpected"), "{said}");
    assert!(said.contains("'timout' was unexpected"), "{said}");
    assert!(said.contains("misspelt keys fail the schema"), "{said}");
}

/// Every property of every table has a description (from its doc comment).
#[test]
fn every_key_is_documented() {
    let schema: serde_json::Value = serde_json::from_str(&tableq::queue_file_schema()).unwrap();
    let mut undocumented = Vec::new();
    walk(&schema, "", &mut undocumented);
    assert!(undocumented.is_empty(), "no description: {undocumented:?}");
}

fn walk(schema: &serde_json::Value, at: &str, undocumented: &mut Vec<String>) {
    match schema {
        serde_json::Value::Object(object) => {
            if let Some(serde_json::Value::Object(properties)) = object.get("properties") {
                for (name, property) in properties {
                    // The tag of [action] is described by the variant it picks.
                    let tagged = name == "type" && property.get("const").is_some();
                    if property.get("description").is_none() && !tagged {
                        undocumented.push(format!("{at}.{name}"));
                    }
                }
            }
            for (key, value) in object {
                walk(value, &format!("{at}/{key}"), undocumented);
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                walk(item, at, undocumented);
            }
        }
        _ => {}
    }
}
