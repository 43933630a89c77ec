//! `tableq --version` says which build it is: the version and the commit.

use std::process::Command;

/// `--version` prints the crate's version and the commit this checkout is at (or,
/// outside a git checkout, "unknown commit").
#[test]
fn the_version_names_the_commit() {
    let output = Command::new(env!("CARGO_BIN_EXE_tableq"))
        .arg("--version")
        .output()
        .expect("tableq runs");
    assert!(output.status.success());
    let printed = String::from_utf8(output.stdout).expect("UTF-8");
    let head = Command::new("git")
        .args([
            "-C",
            env!("CARGO_MANIFEST_DIR"),
            "rev-parse",
            "--short=12",
            "HEAD",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let commit = match (std::env::var("TABLEQ_COMMIT"), head) {
        (Ok(set), _) if !set.trim().is_empty() => {
            format!("commit {}", &set.trim()[..12.min(set.trim().len())])
        }
        (_, Some(head)) => format!("commit {head}"),
        _ => "unknown commit".to_string(),
    };
    assert_eq!(
        printed,
        format!("tableq {} ({commit})\n", env!("CARGO_PKG_VERSION"))
    );
}
