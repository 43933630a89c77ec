//! Programs a test drives that are not tableq's (a browser), found on `PATH`. CI
//! installs every one (`scripts/test.sh`, `.github/workflows/ci.yml`) and sets `CI`, so under
//! `CI` a missing one fails the test: a check that silently did not run is not a
//! pass. On a developer's machine without it, the test says loudly that it skipped.

use std::path::PathBuf;

/// The first of `names` that is a file in a directory of `PATH`.
pub fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// Whether `CI`'s value says this is a CI run: set, and neither empty, `0` nor
/// `false` (GitHub Actions sets `true`, `.ci/run` sets `1`).
pub fn says_ci(value: Option<&str>) -> bool {
    value.is_some_and(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "" | "0" | "false"))
}

/// The first of `names` on `PATH`. When none is there: under `CI`, a failure that
/// says how to install it; elsewhere a loud note that `unchecked` was not checked,
/// and `None` (the test skips).
pub fn required(names: &[&str], install: &str, unchecked: &str) -> Option<PathBuf> {
    if let Some(found) = on_path(names) {
        return Some(found);
    }
    let ci = std::env::var("CI").ok();
    assert!(
        !says_ci(ci.as_deref()),
        "none of {names:?} is on PATH, and CI is set ({ci:?}): CI must run this test, not \
         skip it — {install} (scripts/test.sh does)"
    );
    eprintln!(
        "\n!!!!! SKIPPED: none of {names:?} is installed ({install}): {unchecked} was NOT \
         checked !!!!!\n"
    );
    None
}

/// Which values of `CI` make a missing tool a failure.
#[test]
fn ci_is_said_by_any_value_but_empty_0_or_false() {
    for value in ["true", "1", "yes", "TRUE", "woodpecker"] {
        assert!(says_ci(Some(value)), "{value}");
    }
    for value in [
        None,
        Some(""),
        Some("0"),
        Some("false"),
        Some("False"),
        Some(" "),
    ] {
        assert!(!says_ci(value), "{value:?}");
    }
}

/// The Python of the virtual environment that holds Playwright (`scripts/test.sh` makes it
/// in `$TABLEQ_CI_CACHE/venv`, by default `~/.cache/tableq-ci/venv`): as
/// [`required`], a failure under `CI` when it is missing, else a loud skip.
pub fn playwright_python() -> Option<PathBuf> {
    let cache = std::env::var_os("TABLEQ_CI_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/tableq-ci"))
        })?;
    let python = cache.join("venv/bin/python");
    let has_playwright = std::process::Command::new(&python)
        .args(["-c", "import playwright.sync_api"])
        .output()
        .is_ok_and(|done| done.status.success());
    if has_playwright {
        return Some(python);
    }
    let ci = std::env::var("CI").ok();
    assert!(
        !says_ci(ci.as_deref()),
        "{} has no Playwright, and CI is set: python3 -m venv {0}/.. && pip install \
         playwright (scripts/test.sh does)",
        python.display()
    );
    eprintln!(
        "\n!!!!! SKIPPED: no Playwright in {} (scripts/test.sh installs it): the console in a \
         browser was NOT checked !!!!!\n",
        python.display()
    );
    None
}
