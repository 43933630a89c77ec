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

/// The 1-based line holding byte `offset` of `source`.
pub fn line_at(source: &str, offset: usize) -> usize {
    let end = offset.min(source.len());
    source.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
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
}
