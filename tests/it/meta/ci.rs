//! The README's test command is what CI runs: `.ci/run`'s test step is that very
//! command, and no other step of it runs `cargo test` on its own.

use std::path::PathBuf;

fn read(path: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The one line of the README's `## Tests` code block.
fn readme_test_command() -> String {
    let readme = read("README.md");
    let section = readme
        .split("\n## Tests\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the README has ## Tests");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("## Tests shows the command in a sh block");
    let lines: Vec<&str> = block.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one command: {lines:?}");
    lines[0].trim().to_string()
}

/// The README names one command that sets up and runs the tests, and `.ci/run`'s
/// test step runs exactly it (CONTRIBUTING.md and the book's page name it too).
#[test]
fn the_readmes_test_command_is_what_ci_runs() {
    let command = readme_test_command();
    assert_eq!(command, "scripts/test.sh");
    let ci = read(".ci/run");
    let steps: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#') && !line.starts_with("echo "))
        .collect();
    assert!(
        steps.contains(&command.as_str()),
        ".ci/run does not run the README's `{command}`"
    );
    let cargo_tests: Vec<&&str> = steps.iter().filter(|l| l.contains("cargo test")).collect();
    assert!(
        cargo_tests.is_empty(),
        ".ci/run runs the tests other than by `{command}`: {cargo_tests:?}"
    );
    let script = read(&command);
    assert!(
        script
            .lines()
            .any(|line| line.trim() == "exec cargo test --locked \"$@\""),
        "{command} runs cargo test --locked"
    );
    for page in ["CONTRIBUTING.md", "docs/src/howto/tests.md"] {
        assert!(
            read(page).contains(&format!("```sh\n{command}\n```")),
            "{page} names `{command}`"
        );
    }
}
