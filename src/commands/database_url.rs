//! The database URL of the queues whose files name none: `--database-url`
//! (`TABLEQ_DATABASE_URL`), else the file `--database-url-file`
//! (`TABLEQ_DATABASE_URL_FILE`) names, else the systemd credential `database-url`
//! (`LoadCredential=` puts it in `$CREDENTIALS_DIRECTORY`), else `DATABASE_URL`.

use std::path::{Path, PathBuf};

use crate::config::secret_file::{others_can_read, read_secret, readable_by_others};
use crate::diagnostic::Finding;

/// The systemd credential that holds the URL (systemd/tableq.service loads it).
pub const CREDENTIAL: &str = "database-url";

/// The URL, and a warning when it came from a file others can read.
#[derive(Debug, Default)]
pub struct DefaultUrl {
    pub url: Option<String>,
    pub warning: Option<Finding>,
}

/// Why there is no URL to use.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    #[error(
        "both --database-url (TABLEQ_DATABASE_URL) and --database-url-file \
         (TABLEQ_DATABASE_URL_FILE) are set: give the URL one way"
    )]
    Both,
    #[error("--database-url-file (TABLEQ_DATABASE_URL_FILE): {0}")]
    File(crate::config::secret_file::SecretFileError),
    #[error("{file} is empty: it should hold the database URL, mysql://USER:PASSWORD@HOST:3306/DATABASE")]
    Empty { file: PathBuf },
}

/// Finds the URL the way the module says, `env` answering for the environment.
pub fn default_url(
    flag: Option<String>,
    file: Option<PathBuf>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<DefaultUrl, UrlError> {
    let flag = flag.filter(|url| !url.is_empty());
    let file = file.filter(|path| !path.as_os_str().is_empty());
    match (flag, file) {
        (Some(_), Some(_)) => Err(UrlError::Both),
        (Some(url), None) => Ok(DefaultUrl {
            url: Some(url),
            warning: None,
        }),
        (None, Some(path)) => from_file(&path, "--database-url-file (TABLEQ_DATABASE_URL_FILE)")
            .map_err(UrlError::File)?
            .ok_or(UrlError::Empty { file: path }),
        (None, None) => from_credential_or_env(env),
    }
}

fn from_credential_or_env(env: &dyn Fn(&str) -> Option<String>) -> Result<DefaultUrl, UrlError> {
    if let Some(dir) = env("CREDENTIALS_DIRECTORY").filter(|d| !d.is_empty()) {
        let path = Path::new(&dir).join(CREDENTIAL);
        // A missing credential is one systemd had no file for: not an error.
        if path.exists() {
            let credential = format!("the systemd credential `{CREDENTIAL}`");
            let found = from_file(&path, &credential).map_err(UrlError::File)?;
            return found.ok_or(UrlError::Empty { file: path });
        }
    }
    Ok(DefaultUrl {
        url: env("DATABASE_URL").filter(|url| !url.is_empty()),
        warning: None,
    })
}

/// The URL in `path`, `None` if the file is empty; `what` names where it came from.
fn from_file(
    path: &Path,
    what: &str,
) -> Result<Option<DefaultUrl>, crate::config::secret_file::SecretFileError> {
    let url = read_secret(path)?;
    let warning = readable_by_others(path).map(|mode| {
        let message = others_can_read(&format!("{what} names this file"), path, mode);
        Finding::warning(path, message)
    });
    Ok((!url.trim().is_empty()).then_some(DefaultUrl {
        url: Some(url.trim().to_string()),
        warning,
    }))
}
