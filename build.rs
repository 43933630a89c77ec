//! Tells `tableq --version` which commit it was built from, as `TABLEQ_BUILD_COMMIT`:
//! `$TABLEQ_COMMIT` when the build sets it (the container and release builds, which
//! have no `.git`), else what git says of this checkout, else "unknown commit" (a
//! source tarball).

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=TABLEQ_COMMIT");
    let from_env = std::env::var("TABLEQ_COMMIT")
        .ok()
        .map(|commit| commit.trim().to_string())
        .filter(|commit| !commit.is_empty());
    let commit = from_env.or_else(commit_of_this_checkout);
    let described = match commit {
        Some(commit) => format!("commit {}", short(&commit)),
        None => "unknown commit".to_string(),
    };
    println!("cargo:rustc-env=TABLEQ_BUILD_COMMIT={described}");
}

/// The commit git has checked out here, if this crate is the top of a git checkout
/// (not a tarball unpacked inside some other repository). Asks cargo to run this
/// again when HEAD moves.
fn commit_of_this_checkout() -> Option<String> {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    let top = git(&manifest_dir, &["rev-parse", "--show-toplevel"])?;
    let same = |a: &str, b: &str| match (Path::new(a).canonicalize(), Path::new(b).canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if !same(&top, &manifest_dir) {
        return None;
    }
    // HEAD (per worktree), the branch it points to, and packed refs (shared).
    for (ask, file) in [("--git-path", "HEAD"), ("--git-path", "packed-refs")] {
        watch(&manifest_dir, git(&manifest_dir, &["rev-parse", ask, file]));
    }
    // The branch's own ref file, when it is not packed. (Not the whole folder: other
    // worktrees' commits would rebuild this one.)
    if let Some(branch) = git(&manifest_dir, &["symbolic-ref", "-q", "HEAD"]) {
        watch(
            &manifest_dir,
            git(&manifest_dir, &["rev-parse", "--git-path", &branch]),
        );
    }
    git(&manifest_dir, &["rev-parse", "HEAD"])
}

/// Builds again when `path` (relative to `dir`) changes. Only a file that exists:
/// cargo would take a missing one as changed on every build.
fn watch(dir: &str, path: Option<String>) {
    let Some(path) = path else { return };
    let path = Path::new(dir).join(path);
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn git(dir: &str, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let text = text.trim();
    (output.status.success() && !text.is_empty()).then(|| text.to_string())
}

/// The first 12 characters of a commit id, as `git log --abbrev=12` shows it.
fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}
