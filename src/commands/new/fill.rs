//! The names a user gives `tableq new`, made safe for SQL and TOML, and a template
//! filled with them.

use crate::commands::Failure;

/// `template` with each `{name}` replaced by its value, in one pass (a value is
/// never read as a template); other braces are kept.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut filled = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        filled.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let name = after.find('}').map(|close| &after[..close]);
        match name.and_then(|name| values.iter().find(|(n, _)| *n == name)) {
            Some((name, value)) => {
                filled.push_str(value);
                rest = &after[name.len() + 1..];
            }
            None => {
                filled.push('{');
                rest = after;
            }
        }
    }
    filled.push_str(rest);
    filled
}

/// `name` as it is, if it is a plain name (letters, digits, `_`, `-`, `.`).
pub fn plain(option: &str, name: &str) -> Result<String, Failure> {
    let fits = |c: char| c.is_ascii_alphanumeric() || "_-.".contains(c);
    if name.is_empty() || !name.chars().all(fits) {
        return Err(Failure::Usage(format!(
            "--{option} {name:?} is not a plain name: use letters, digits, _, - and ."
        )));
    }
    Ok(name.to_string())
}

/// `name` as a table name in SQL, if it is a plain one (letters, digits, `_`, `$`,
/// and one `.` for a schema).
pub fn table(option: &str, name: &str) -> Result<String, Failure> {
    let plain = |part: &str| {
        !part.is_empty()
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
    };
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() > 2 || !parts.iter().all(|p| plain(p)) {
        return Err(Failure::Usage(format!(
            "--{option} {name:?} is not a plain table name: use letters, digits and _ (a \
             schema as schema.table)"
        )));
    }
    Ok(parts
        .iter()
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join("."))
}

/// `text` as an SQL string literal, for a name given as `--option`: refused when
/// it holds a quote, a backslash or a control character (none would survive the
/// TOML string and the SQL literal it goes into unchanged).
pub fn literal(option: &str, text: &str) -> Result<String, Failure> {
    let odd = |c: char| c == '\'' || c == '"' || c == '\\' || c.is_control();
    if text.is_empty() || text.chars().any(odd) {
        return Err(Failure::Usage(format!(
            "--{option} {text:?} cannot be written into the queue file: leave out quotes, \
             backslashes and control characters"
        )));
    }
    Ok(format!("'{text}'"))
}

/// A command line, split at spaces, as a TOML array of strings.
pub fn argv(command: &str) -> Result<String, Failure> {
    let words: Vec<String> = command
        .split_whitespace()
        .map(|w| toml::Value::String(w.to_string()).to_string())
        .collect();
    if words.is_empty() {
        return Err(Failure::Usage(
            "--command is empty: give the bridge's command line".into(),
        ));
    }
    Ok(format!("[{}]", words.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_is_filled_by_name() {
        let filled = fill(
            "DELETE FROM {jobs} WHERE queue = {queue}",
            &[("jobs", "`jobs`"), ("queue", "'q'")],
        );
        assert_eq!(filled, "DELETE FROM `jobs` WHERE queue = 'q'");
        let kept = fill("{a} {b} {", &[("a", "{b}"), ("b", "x")]);
        assert_eq!(kept, "{b} x {");
        assert!(plain("transport", "async").is_ok());
        assert!(plain("transport", "a\nb").is_err());
    }

    #[test]
    fn names_are_quoted_or_refused() {
        assert_eq!(table("table", "jobs").unwrap(), "`jobs`");
        assert_eq!(table("table", "app.jobs").unwrap(), "`app`.`jobs`");
        for bad in ["", "jobs; DROP", "a.b.c", "my jobs", "`jobs`"] {
            let Err(Failure::Usage(why)) = table("table", bad) else {
                panic!("{bad:?} was taken");
            };
            assert!(why.contains("--table"), "{why}");
        }
        assert_eq!(literal("queue", "emails:high").unwrap(), "'emails:high'");
        for odd in ["it's", r"a\b", "a\"b", "a\nb", ""] {
            assert!(literal("queue", odd).is_err(), "{odd:?}");
        }
        assert_eq!(
            argv("php  /srv/app/artisan tableq:work").unwrap(),
            r#"["php", "/srv/app/artisan", "tableq:work"]"#
        );
        assert!(argv("  ").is_err());
    }
}
