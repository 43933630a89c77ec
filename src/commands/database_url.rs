//! The database URL of the queues whose files name none: `--database-url`
//! (`TABLEQ_DATABASE_URL`), else the file `--database-url-file`
//! (`TABLEQ_DATABASE_URL_FILE`) names, else the systemd credential `database-url`
//! (`LoadCredential=` puts it in `$CREDENTIALS_DIRECTORY`), else `DATABASE_URL`.

use std::path::{Path, PathBuf};

use crate::config::value::secret_file::{others_can_read, read_secret, readable_by_others};
use crate::diagnostic::Finding;

/// The systemd credential that holds the URL (systemd/tableq.service loads it).
pub const CREDENTIAL: &str = "database-url";

/// What tableq says when `--database-url` on its command line holds a password.
pub const PASSWORD_ON_ARGV: &str = "--database-url holds a password on the command line, \
    where every user of this machine sees it (ps, /proc) and so do the commands tableq runs; \
    pass the URL in the environment (TABLEQ_DATABASE_URL) or, better, in a file only tableq \
    can read (--database-url-file / TABLEQ_DATABASE_URL_FILE, or the systemd credential \
    database-url)";

/// Whether the command line `args` (the program first) gives `--database-url` a URL
/// with a password. Only the command line: the same URL from the environment is
/// not in `ps`.
pub fn password_on_command_line(args: &[std::ffi::OsString]) -> bool {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut urls = Vec::new();
    for (index, arg) in args.iter().enumerate().skip(1) {
        if arg == "--" {
            break;
        }
        if let Some(url) = arg.strip_prefix("--database-url=") {
            urls.push(url);
        } else if arg == "--database-url" {
            urls.extend(args.get(index + 1).map(String::as_str));
        }
    }
    urls.into_iter().any(has_password)
}

/// Whether `url` has a password: `scheme://user:PASSWORD@host…`.
fn has_password(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    match authority.rsplit_once('@') {
        Some((userinfo, _)) => userinfo
            .split_once(':')
            .is_some_and(|(_, password)| !password.is_empty()),
        None => false,
    }
}

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
    File(crate::config::value::secret_file::SecretFileError),
    #[error("{file} is empty: it should hold the database URL, mysql://USER:PASSWORD@HOST:3306/DATABASE")]
    Empty { file: PathBuf },
    #[error("--console-token-file (TABLEQ_CONSOLE_TOKEN_FILE): {0}")]
    ConsoleTokenFile(crate::config::value::secret_file::SecretFileError),
    #[error("{file} is empty: it should hold the console's token (say, 32 random characters: openssl rand -hex 32)")]
    EmptyToken { file: PathBuf },
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

/// The systemd credential that holds the console's token.
pub const CONSOLE_CREDENTIAL: &str = "console-token";
/// The systemd credential that holds the console's read token.
pub const CONSOLE_READ_CREDENTIAL: &str = "console-read-token";

/// The console's token: from the file `--console-token-file`
/// (`TABLEQ_CONSOLE_TOKEN_FILE`) names, else the systemd credential
/// `console-token`; `None`: the console only reads. Read and checked as the
/// database URL's file is (a warning when others can read it).
pub fn console_token(
    file: Option<PathBuf>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<DefaultUrl>, UrlError> {
    let what = "--console-token-file (TABLEQ_CONSOLE_TOKEN_FILE)";
    token_from(file, env, what, CONSOLE_CREDENTIAL)
}

/// The console's read token (`--console-read-token-file`, else the systemd
/// credential `console-read-token`); `None`: the history and copies are open.
pub fn console_read_token(
    file: Option<PathBuf>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<DefaultUrl>, UrlError> {
    let what = "--console-read-token-file (TABLEQ_CONSOLE_READ_TOKEN_FILE)";
    token_from(file, env, what, CONSOLE_READ_CREDENTIAL)
}

/// A token from `file` (named by `what`), else from the systemd `credential`.
fn token_from(
    file: Option<PathBuf>,
    env: &dyn Fn(&str) -> Option<String>,
    what: &str,
    credential: &str,
) -> Result<Option<DefaultUrl>, UrlError> {
    let path = match file.filter(|path| !path.as_os_str().is_empty()) {
        Some(path) => path,
        None => {
            let dir = env("CREDENTIALS_DIRECTORY").filter(|d| !d.is_empty());
            match dir.map(|dir| Path::new(&dir).join(credential)) {
                Some(path) if path.exists() => path,
                _ => return Ok(None),
            }
        }
    };
    let found = from_file(&path, what).map_err(UrlError::ConsoleTokenFile)?;
    found.map(Some).ok_or(UrlError::EmptyToken { file: path })
}

/// The URL in `path`, `None` if the file is empty; `what` names where it came from.
fn from_file(
    path: &Path,
    what: &str,
) -> Result<Option<DefaultUrl>, crate::config::value::secret_file::SecretFileError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<std::ffi::OsString> {
        args.iter().map(std::ffi::OsString::from).collect()
    }

    #[test]
    fn a_password_on_the_command_line_is_seen_in_both_spellings() {
        let url = "mysql://app:s3cret@db/shop";
        assert!(password_on_command_line(&argv(&[
            "tableq",
            "--database-url",
            url,
            "run",
            "q.toml"
        ])));
        let joined = format!("--database-url={url}");
        assert!(password_on_command_line(&argv(&[
            "tableq", "check", &joined, "q.toml"
        ])));
        let no_password = [
            "tableq",
            "--database-url",
            "mysql://app@db/shop",
            "run",
            "q",
        ];
        assert!(!password_on_command_line(&argv(&no_password)));
        assert!(!password_on_command_line(&argv(&[
            "tableq", "run", "q.toml"
        ])));
        assert!(!password_on_command_line(&argv(&[
            "tableq",
            "run",
            "--",
            "--database-url",
            url
        ])));
    }
}
