//! Finds the line of a key in a queue file, so a finding made after parsing (a bad
//! value, a statement the server rejects) can still point at the line to fix.

use toml::de::{DeTable, DeValue};

/// The 1-based line of the value at `path` (`["on_success", "sql", "1"]`; numbers
/// index arrays), or `None` if the document does not parse or has no such key.
pub fn line_of(source: &str, path: &[&str]) -> Option<usize> {
    let root = DeValue::Table(DeTable::parse(source).ok()?.into_inner());
    let mut current = &root;
    let mut offset = None;
    for segment in path {
        let next = match segment.parse::<usize>() {
            Ok(index) => current.get(index)?,
            Err(_) => current.get(*segment)?,
        };
        offset = Some(next.span().start);
        current = next.get_ref();
    }
    offset.map(|at| line_at(source, at))
}

/// The dotted path of the innermost key whose value spans byte `offset` of `source`
/// (`action.timeout`), so an error the parser found there can name its key.
pub fn key_at(source: &str, offset: usize) -> Option<String> {
    let root = DeTable::parse(source).ok()?.into_inner();
    let path = path_to(&root, offset)?;
    (!path.is_empty()).then(|| path.join("."))
}

/// The dotted key assigned on the line holding byte `offset` (`action.timeout` for
/// `timeout = …` under `[action]`), read from the text: for a line the parser
/// refused, where [`key_at`] finds no document to walk.
pub fn key_assigned_at(source: &str, offset: usize) -> Option<String> {
    let line_start = source[..offset.min(source.len())]
        .rfind('\n')
        .map_or(0, |i| i + 1);
    let line = source[line_start..].lines().next()?;
    let (key, _) = line.split_once('=')?;
    let key = key.trim();
    let bare = |k: &str| {
        !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    };
    if !bare(key) {
        return None;
    }
    let table = source[..line_start].lines().rev().find_map(|l| {
        let l = l.trim();
        let name = l.strip_prefix('[')?.strip_suffix(']')?;
        (!name.starts_with('[')).then(|| name.trim().to_string())
    });
    Some(match table {
        Some(table) if bare(&table) => format!("{table}.{key}"),
        _ => key.to_string(),
    })
}

/// The keys leading to `offset` within `table`: `Some(vec![])` when `offset` is on
/// one of this table's own keys, `None` when it is not in this table at all.
fn path_to(table: &DeTable, offset: usize) -> Option<Vec<String>> {
    for (key, value) in table.iter() {
        if key.span().contains(&offset) {
            return Some(Vec::new());
        }
        let inner = match value.get_ref() {
            DeValue::Table(inner) => path_to(inner, offset),
            _ => None,
        };
        if inner.is_some() || value.span().contains(&offset) {
            let mut path = vec![key.get_ref().to_string()];
            path.extend(inner.unwrap_or_default());
            return Some(path);
        }
    }
    None
}

/// The 1-based line holding byte `offset` of `source`.
pub fn line_at(source: &str, offset: usize) -> usize {
    let end = offset.min(source.len());
    source.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The key path of statement `index` of `count` under `path`: `on_success.sql`, or
/// `on_success.sql.1` inside an array (for its line).
pub fn statement_path(path: &[&str], index: usize, count: usize) -> Vec<String> {
    let mut at: Vec<String> = path.iter().map(|s| s.to_string()).collect();
    if count > 1 {
        at.push(index.to_string());
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_keys_and_array_elements() {
        let src = "name = \"a\"\n\n[on_success]\nsql = [\n  \"one\",\n  \"two\",\n]\n";
        assert_eq!(line_of(src, &["name"]), Some(1));
        assert_eq!(line_of(src, &["on_success"]), Some(3));
        assert_eq!(line_of(src, &["on_success", "sql", "1"]), Some(6));
        assert_eq!(line_of(src, &["missing"]), None);
    }

    #[test]
    fn names_the_key_under_an_offset() {
        let src = "workers = \"four\"\n[action]\ntimeout = 5\n";
        assert_eq!(
            key_at(src, src.find("four").unwrap()),
            Some("workers".into())
        );
        assert_eq!(
            key_at(src, src.find('5').unwrap()),
            Some("action.timeout".into())
        );
        assert_eq!(key_at(src, 0), None);
    }
}
