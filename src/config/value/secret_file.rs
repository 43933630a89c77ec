//! Secrets kept in files rather than in the environment: `${file:/PATH}` in a queue
//! file, `TABLEQ_DATABASE_URL_FILE`, a systemd credential, a mounted Kubernetes
//! Secret. One way to read them, and one rule for a file that others can read.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Why a secret file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretFileError {
    #[error("cannot read {path}: {reason}")]
    Unreadable { path: PathBuf, reason: String },
}

/// The file's text without its trailing newlines (`echo secret > file` and most
/// secret stores end the value with one; a URL or a key never does).
pub fn read_secret(path: &Path) -> Result<String, SecretFileError> {
    let text = std::fs::read_to_string(path).map_err(|e| SecretFileError::Unreadable {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    Ok(text.trim_end_matches(['\n', '\r']).to_string())
}

/// The file's permission bits, when every user of the machine may read it: a
/// secret should be readable by its owner (and group) only.
pub fn readable_by_others(path: &Path) -> Option<u32> {
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o004 != 0).then_some(mode)
}

/// What to say of a secret file that others can read, after `what` (`database_url
/// reads /etc/x`, `TABLEQ_DATABASE_URL_FILE names /etc/x`).
pub fn others_can_read(what: &str, path: &Path, mode: u32) -> String {
    format!(
        "{what}, which every user of this machine can read (mode {mode:03o}): \
         `chmod o-r {}` so that only its owner (and group) can",
        path.display()
    )
}

/// A file a secret was read from (`${file:/PATH}`), and the key that read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretFile {
    pub path: PathBuf,
    /// Where in the queue file: `["action", "headers", "Authorization"]`.
    pub key: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_secret_without_its_trailing_newline() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret");
        std::fs::write(&file, "mysql://u:p@h/db\r\n\n").unwrap();
        assert_eq!(read_secret(&file).unwrap(), "mysql://u:p@h/db");
    }

    #[test]
    fn names_the_file_it_cannot_read() {
        let missing = Path::new("/nonexistent/tableq/secret");
        let error = read_secret(missing).unwrap_err().to_string();
        assert!(
            error.starts_with("cannot read /nonexistent/tableq/secret: No such file"),
            "{error}"
        );
    }

    #[test]
    fn tells_a_file_others_can_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(readable_by_others(&file), None);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(readable_by_others(&file), Some(0o644));
    }
}
