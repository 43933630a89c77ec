//! `${NAME}` in the values a deployment supplies (database URLs, secrets) is replaced
//! from the environment when a queue file is loaded; `$$` is a literal `$`.

/// Why a value could not be interpolated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterpolateError {
    #[error("environment variable `{0}` is not set (write `$$` for a literal `$`)")]
    Missing(String),
    #[error("`${{` is not closed by `}}` (write `$$` for a literal `$`)")]
    Unclosed,
    #[error("`${{{0}}}` is not a variable name: use letters, digits and `_`")]
    BadName(String),
}

/// Replaces every `${NAME}` in `text` with `lookup(NAME)`. A `$` followed by anything
/// other than `{` or `$` is kept as it is.
pub fn interpolate(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, InterpolateError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body.find('}').ok_or(InterpolateError::Unclosed)?;
            let name = &body[..end];
            if !is_variable_name(name) {
                return Err(InterpolateError::BadName(name.to_string()));
            }
            let value = lookup(name).ok_or_else(|| InterpolateError::Missing(name.to_string()))?;
            out.push_str(&value);
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
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
    let names = std::cell::RefCell::new(Vec::new());
    let _ = interpolate(text, &|name| {
        names.borrow_mut().push(name.to_string());
        Some(String::new())
    });
    names.into_inner()
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
}
