//! `${NAME}` in the values a deployment supplies (database URLs, secrets) is replaced
//! from the environment when a queue file is loaded; `$$` is a literal `$`. Where a
//! secret goes — `database_url`, `action.signing_secret`, `action.headers` values —
//! `${file:/PATH}` is replaced by that file's text (less its trailing newlines): a
//! mounted Secret, a systemd credential.

use std::path::{Path, PathBuf};

use crate::config::value::secret_file::{read_secret, SecretFile, SecretFileError};

/// Why a value could not be interpolated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterpolateError {
    #[error("environment variable `{0}` is not set (write `$$` for a literal `$`)")]
    Missing(String),
    #[error("`${{` is not closed by `}}` (write `$$` for a literal `$`)")]
    Unclosed,
    #[error("`${{{0}}}` is not a variable name: use letters, digits and `_`")]
    BadName(String),
    #[error("`${{file:…}}`: {0}")]
    File(#[from] SecretFileError),
    #[error("`${{file:{0}}}` is not an absolute path: name the file from the root, e.g. `${{file:/run/secrets/database-url}}`")]
    RelativeFile(String),
    #[error(
        "`${{file:…}}` is read only where a secret goes (`database_url`, \
         `action.signing_secret`, `action.headers`); here use `${{NAME}}`"
    )]
    FileNotHere,
}

/// Whether a value may read `${file:…}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Files {
    Read,
    Refuse,
}

/// One piece of a value: text kept as it is, `${NAME}`, or `${file:PATH}`.
enum Piece<'a> {
    Text(&'a str),
    Variable(&'a str),
    File(&'a str),
}

/// Replaces every `${NAME}` in `text` with `lookup(NAME)`. A `$` followed by anything
/// other than `{` or `$` is kept as it is. `${file:…}` is refused here.
pub fn interpolate(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, InterpolateError> {
    expand(text, lookup, Files::Refuse)
}

/// Like [`interpolate`], and `${file:/PATH}` is replaced by the file's text.
pub fn interpolate_secret(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, InterpolateError> {
    expand(text, lookup, Files::Read)
}

/// Replaces `${NAME}`, and `${file:/PATH}` where `files` says so.
pub(crate) fn expand(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    files: Files,
) -> Result<String, InterpolateError> {
    let mut out = String::with_capacity(text.len());
    for piece in pieces(text)? {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Variable(name) => {
                let value =
                    lookup(name).ok_or_else(|| InterpolateError::Missing(name.to_string()))?;
                out.push_str(&value);
            }
            Piece::File(_) if files == Files::Refuse => return Err(InterpolateError::FileNotHere),
            Piece::File(path) if !Path::new(path).is_absolute() => {
                return Err(InterpolateError::RelativeFile(path.to_string()))
            }
            Piece::File(path) => out.push_str(&read_secret(Path::new(path))?),
        }
    }
    Ok(out)
}

fn pieces(text: &str) -> Result<Vec<Piece<'_>>, InterpolateError> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        pieces.push(Piece::Text(&rest[..pos]));
        let after = &rest[pos + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            pieces.push(Piece::Text("$"));
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body.find('}').ok_or(InterpolateError::Unclosed)?;
            let name = &body[..end];
            if let Some(path) = name.strip_prefix("file:") {
                pieces.push(Piece::File(path));
            } else if is_variable_name(name) {
                pieces.push(Piece::Variable(name));
            } else {
                return Err(InterpolateError::BadName(name.to_string()));
            }
            rest = &body[end + 1..];
        } else {
            pieces.push(Piece::Text("$"));
            rest = after;
        }
    }
    pieces.push(Piece::Text(rest));
    Ok(pieces)
}

/// True for a name an environment variable can have: a letter or `_`, then
/// letters, digits and `_`.
pub fn is_variable_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The names of the `${NAME}`s in `text`.
pub fn variables(text: &str) -> Vec<String> {
    let pieces = pieces(text).unwrap_or_default();
    let names = pieces.into_iter().filter_map(|piece| match piece {
        Piece::Variable(name) => Some(name.to_string()),
        _ => None,
    });
    names.collect()
}

/// The files of the `${file:PATH}`s in `text`.
pub fn files(text: &str) -> Vec<PathBuf> {
    let pieces = pieces(text).unwrap_or_default();
    let paths = pieces.into_iter().filter_map(|piece| match piece {
        Piece::File(path) => Some(PathBuf::from(path)),
        _ => None,
    });
    paths.collect()
}

/// The files `value`, the value of `key`, reads its secrets from (`${file:…}`).
pub fn read_by(key: &[&str], value: &str) -> Vec<SecretFile> {
    files(value)
        .into_iter()
        .map(|path| SecretFile {
            path,
            key: key.iter().map(|k| k.to_string()).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOST" => Some("db.internal".into()),
            "PASS" => Some("p$w".into()),
            _ => None,
        }
    }

    #[test]
    fn lists_the_variables_a_value_names() {
        assert_eq!(variables("mysql://${USER}:${PASS}@h/$$x"), ["USER", "PASS"]);
    }

    #[test]
    fn replaces_variables_and_keeps_escaped_dollars() {
        assert_eq!(
            interpolate("mysql://app:${PASS}@${HOST}/x?cost=$$5&a=$b", &env).unwrap(),
            "mysql://app:p$w@db.internal/x?cost=$5&a=$b"
        );
    }

    #[test]
    fn names_what_is_wrong() {
        assert_eq!(
            interpolate("${NOPE}", &env),
            Err(InterpolateError::Missing("NOPE".into()))
        );
        assert_eq!(interpolate("${HOST", &env), Err(InterpolateError::Unclosed));
        assert_eq!(
            interpolate("${1X}", &env),
            Err(InterpolateError::BadName("1X".into()))
        );
    }

    #[test]
    fn reads_a_file_only_where_a_secret_goes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        std::fs::write(&file, "p$w\n").unwrap();
        let url = format!("mysql://app:${{file:{}}}@${{HOST}}/x", file.display());
        assert_eq!(
            interpolate_secret(&url, &env).unwrap(),
            "mysql://app:p$w@db.internal/x"
        );
        assert_eq!(interpolate(&url, &env), Err(InterpolateError::FileNotHere));
        assert_eq!(files(&url), [file]);
        assert_eq!(variables(&url), ["HOST"]);
    }

    #[test]
    fn names_the_file_it_cannot_read() {
        let error = interpolate_secret("${file:/nonexistent/db-url}", &env)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("`${file:…}`: cannot read /nonexistent/db-url: No such file"),
            "{error}"
        );
        let relative = interpolate_secret("${file:db-url}", &env).unwrap_err();
        assert!(relative
            .to_string()
            .contains("`${file:db-url}` is not an absolute path"));
    }
}
