//! The reference pages written by hand name what the code has: running.md's synopsis
//! every flag of every command (clap's definition), and queue-file.md's `[action]`
//! row every action kind (the schema's), each linked to its section. And a command
//! the book gives runs: performance.md's PHP-FPM without a php.ini loads PDO MySQL.

use std::path::PathBuf;

use clap::CommandFactory;

fn read(path: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn page(name: &str) -> String {
    read(&format!("docs/src/reference/{name}"))
}

/// running.md's synopsis (its first code block) names every flag of every command.
#[test]
fn the_running_synopsis_names_every_flag() {
    let running = page("running.md");
    let synopsis = running
        .split("```")
        .nth(1)
        .expect("running.md opens with its synopsis");
    let mut command = tableq::commands::cli::Cli::command();
    command.build();
    let mut missing = Vec::new();
    for sub in command.get_subcommands() {
        let flags = sub
            .get_arguments()
            .filter(|arg| !arg.is_hide_set())
            .filter_map(|arg| arg.get_long())
            .filter(|long| !matches!(*long, "help" | "version"));
        for long in flags {
            if !synopsis.contains(&format!("--{long}")) {
                missing.push(format!("tableq {} --{long}", sub.get_name()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "running.md's synopsis lacks {missing:?}"
    );
}

/// queue-file.md's `[action]` row links every kind the schema has to its section of
/// actions.md.
#[test]
fn the_action_row_names_every_kind() {
    let schema: serde_json::Value = serde_json::from_str(&tableq::queue_file_schema()).unwrap();
    let kinds: Vec<String> = schema["definitions"]["RawAction"]["oneOf"]
        .as_array()
        .expect("RawAction is one of the kinds")
        .iter()
        .map(|kind| {
            kind["properties"]["type"]["const"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(kinds.len() >= 7, "{kinds:?}");
    let queue_file = page("queue-file.md");
    let row = queue_file
        .lines()
        .find(|line| line.starts_with("| `[action]` |"))
        .expect("queue-file.md has the [action] row");
    // The text of each link to a section of actions.md.
    let linked: Vec<&str> = row
        .match_indices("](actions.md#")
        .filter_map(|(at, _)| row[..at].rfind('[').map(|open| &row[open + 1..at]))
        .collect();
    for kind in &kinds {
        assert!(
            linked
                .iter()
                .any(|text| text.contains(&format!("`\"{kind}\"`"))),
            "the [action] row does not link `{kind}` to its section: {row}"
        );
    }
}

/// performance.md's PHP-FPM command without a php.ini (`-n`) loads PDO MySQL, so a
/// handler that writes to the database runs in it; the handler benchmark starts its
/// pool with the same extensions.
#[test]
fn the_php_fpm_command_without_a_php_ini_loads_pdo_mysql() {
    let performance = read("docs/src/explanation/performance.md");
    let words: Vec<&str> = performance.split_whitespace().collect();
    let text = words.join(" ");
    let command = text
        .split("`php-fpm8.2 -n ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .expect("performance.md shows `php-fpm8.2 -n …`");
    let bench = read("scripts/bench-handlers.sh");
    assert!(
        bench.contains(&format!("FPM_EXTENSIONS=({command})")),
        "scripts/bench-handlers.sh starts its pool with {command}"
    );
    let fpm = crate::support::mariadb::find("php-fpm8.2");
    if !fpm.exists() {
        let unchecked = "performance.md's PHP-FPM command";
        crate::support::tools::required(&["php-fpm8.2"], "apt-get install php8.2-fpm", unchecked);
        return;
    }
    let modules = std::process::Command::new(&fpm)
        .arg("-n")
        .args(command.split(' '))
        .arg("-m")
        .output()
        .expect("php-fpm runs");
    let said = String::from_utf8_lossy(&modules.stdout).to_string()
        + &String::from_utf8_lossy(&modules.stderr);
    assert!(said.lines().any(|m| m == "pdo_mysql"), "{said}");
    assert!(!said.contains("Unable to load"), "{said}");
}
