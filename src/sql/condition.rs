//! A condition added to a select's own WHERE — the claim of a queue with
//! `[concurrency]` skips the rows whose key is at its limit there, where the
//! server tests it row by row as it reads — and the expression behind one of a
//! select's columns, which a WHERE must name instead of the column's alias.

use super::lex::{find_top, ident, is_kw, lex, spans, split_top, Lex, AFTER_WHERE};

/// Why a condition cannot be added to a select.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConditionError {
    #[error("it is not one plain SELECT (a WITH, UNION, INTERSECT or EXCEPT)")]
    NotPlain,
    #[error("it has no FROM")]
    NoFrom,
}

/// `select` with `condition` added to its top-level WHERE (`WHERE (…) AND
/// condition`), or a WHERE of its own where it has none.
pub fn with_condition(select: &str, condition: &str) -> Result<String, ConditionError> {
    let pieces = spans(select);
    let lexes: Vec<Lex> = pieces.iter().map(|(l, _)| l.clone()).collect();
    let plain = lexes.first().is_some_and(|l| is_kw(l, "SELECT"))
        && ["UNION", "INTERSECT", "EXCEPT"]
            .iter()
            .all(|kw| find_top(&lexes, 0, &[kw]).is_none());
    if !plain {
        return Err(ConditionError::NotPlain);
    }
    let from = find_top(&lexes, 1, &["FROM"]).ok_or(ConditionError::NoFrom)?;
    let byte = |at: Option<usize>| at.map_or(select.len(), |i| pieces[i].1.start);
    let end_of_where = AFTER_WHERE
        .iter()
        .filter_map(|kw| find_top(&lexes, from, &[kw]))
        .min();
    let end = byte(end_of_where);
    let (head, tail) = select.split_at(end);
    let head = head.trim_end();
    Ok(match find_top(&lexes, from, &["WHERE"]) {
        Some(at) => {
            let start = pieces[at].1.end;
            let existing = &select[start..head.len()];
            format!(
                "{} (\n{existing}\n) AND {condition}\n{tail}",
                &select[..start]
            )
        }
        None => format!("{head}\nWHERE {condition}\n{tail}"),
    })
}

/// The expression a select computes its column `column` with — `o.customer_id`
/// for `o.customer_id`, `LOWER(email)` for `LOWER(email) AS customer` — for a
/// WHERE, which cannot name an alias; the column's name, quoted, when the list
/// does not show it (`*`).
pub fn column_expression(select: &str, column: &str) -> String {
    let pieces = spans(select);
    let lexes = lex(select);
    let end = find_top(&lexes, 1, &["FROM"]).unwrap_or(lexes.len());
    let mut offset = 1;
    for item in split_top(&lexes[1..end.max(1)], |l| *l == Lex::Punct(",")) {
        let (start, len) = (offset, item.len());
        offset += len + 1;
        let named = match item {
            [expr @ .., as_kw, alias] if !expr.is_empty() && is_kw(as_kw, "AS") => {
                ident(alias).map(|a| (a, len - 2))
            }
            [.., last] => ident(last).map(|name| (name, len)),
            [] => None,
        };
        if let Some((name, expr_len)) = named {
            let plain = matches!(item, [_] | [_, Lex::Punct("."), _])
                || matches!(item, [_, Lex::Punct("."), _, Lex::Punct("."), _]);
            if name.eq_ignore_ascii_case(column) && (expr_len < len || plain) {
                let range = pieces[start].1.start..pieces[start + expr_len - 1].1.end;
                return select[range].to_string();
            }
        }
    }
    crate::sql::lex::quote_identifier(column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_joins_the_where_or_makes_one() {
        let with = with_condition(
            "SELECT id FROM job WHERE state = 'w' OR x = 1 ORDER BY id",
            "ok(id)",
        )
        .unwrap();
        assert_eq!(
            with,
            "SELECT id FROM job WHERE (\n state = 'w' OR x = 1\n) AND ok(id)\nORDER BY id"
        );
        let without = with_condition("SELECT id FROM job ORDER BY id", "ok(id)").unwrap();
        assert_eq!(without, "SELECT id FROM job\nWHERE ok(id)\nORDER BY id");
        let plain = with_condition("SELECT id FROM job", "ok(id)").unwrap();
        assert_eq!(plain, "SELECT id FROM job\nWHERE ok(id)\n");
        let sub = with_condition(
            "SELECT id FROM job WHERE id IN (SELECT id FROM x WHERE y ORDER BY z) LIMIT 3",
            "ok(id)",
        )
        .unwrap();
        assert!(
            sub.contains("y ORDER BY z)\n) AND ok(id)\nLIMIT 3"),
            "{sub}"
        );
        assert_eq!(
            with_condition("SELECT 1 FROM a UNION SELECT 2 FROM b", "c"),
            Err(ConditionError::NotPlain)
        );
    }

    #[test]
    fn a_column_is_found_behind_its_alias() {
        let select = "SELECT j.id, LOWER(c.email) AS customer, `tenant`, t.x y FROM j, c";
        assert_eq!(column_expression(select, "id"), "j.id");
        assert_eq!(column_expression(select, "customer"), "LOWER(c.email)");
        assert_eq!(column_expression(select, "tenant"), "`tenant`");
        assert_eq!(column_expression(select, "y"), "`y`");
        assert_eq!(column_expression("SELECT * FROM j", "id"), "`id`");
    }
}
