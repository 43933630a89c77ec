//! What can be read from a statement's text alone, conservatively: the names of a
//! select's columns when its list is literal, the tables it reads, the columns an
//! index for its claim should have, and whether outcome SQL touches the row by its
//! key. Every reader answers `None` (or nothing) rather than guess: a caller that
//! gets no answer asks the database instead, or says less.

mod lex;

use lex::{clause, column_ref, find_top, ident, is_any_kw, is_kw, lex, split_top, Lex};

const AFTER_WHERE: &[&str] = &["GROUP", "HAVING", "WINDOW", "ORDER", "LIMIT", "FOR", "LOCK"];

/// The names of a select's columns, when every item of its list is a plain column
/// (`id`, `e.id`, `` `id` ``) or has an alias (`expr AS name`); `None` otherwise
/// (`*`, an expression without an alias, `DISTINCT`, a `WITH` query).
pub fn literal_columns(select: &str) -> Option<Vec<String>> {
    let lexes = lex(select);
    if !lexes.first().is_some_and(|l| is_kw(l, "SELECT")) {
        return None;
    }
    let end = find_top(&lexes, 1, &["FROM"]).unwrap_or(lexes.len());
    let list = &lexes[1..end];
    if list.is_empty() {
        return None;
    }
    split_top(list, |l| *l == Lex::Punct(","))
        .into_iter()
        .map(|item| match item {
            [expr @ .., as_kw, alias] if !expr.is_empty() && is_kw(as_kw, "AS") => ident(alias),
            _ => column_ref(item),
        })
        .collect()
}

/// A table named in a statement: `db.name` or `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRef {
    pub schema: Option<String>,
    pub name: String,
}

fn table_ref(lexes: &[Lex]) -> Option<TableRef> {
    match lexes {
        [d, Lex::Punct("."), t, ..] => Some(TableRef {
            schema: Some(ident(d)?),
            name: ident(t)?,
        }),
        [t, ..] => Some(TableRef {
            schema: None,
            name: ident(t)?,
        }),
        [] => None,
    }
}

/// The tables a select's top-level FROM clause names (after FROM, commas and JOINs;
/// derived tables are skipped).
pub fn from_tables(select: &str) -> Vec<TableRef> {
    let lexes = lex(select);
    let mut ends = vec!["WHERE"];
    ends.extend_from_slice(AFTER_WHERE);
    let Some(from) = clause(&lexes, &["FROM"], &ends) else {
        return Vec::new();
    };
    let mut tables = Vec::new();
    let mut depth = 0usize;
    let mut expect_table = true;
    for (i, lex) in from.iter().enumerate() {
        match lex {
            Lex::Punct("(") => {
                // A derived table (or a parenthesized join): not a table name.
                depth += 1;
                expect_table = false;
            }
            Lex::Punct(")") => depth = depth.saturating_sub(1),
            _ if depth > 0 => {}
            Lex::Punct(",") => expect_table = true,
            _ if is_kw(lex, "JOIN") || is_kw(lex, "STRAIGHT_JOIN") => expect_table = true,
            _ if expect_table => {
                tables.extend(table_ref(&from[i..]));
                expect_table = false;
            }
            _ => {}
        }
    }
    tables
}

/// The table an `UPDATE`, `DELETE`, `INSERT` or `REPLACE` writes to (the first, for
/// a multi-table statement).
pub fn statement_target(sql: &str) -> Option<TableRef> {
    const MODIFIERS: &[&str] = &[
        "LOW_PRIORITY",
        "HIGH_PRIORITY",
        "DELAYED",
        "QUICK",
        "IGNORE",
        "INTO",
    ];
    let lexes = lex(sql);
    let first = lexes.first()?;
    let mut rest = &lexes[1..];
    if is_kw(first, "DELETE") {
        let from = find_top(rest, 0, &["FROM"])?;
        rest = &rest[from + 1..];
    } else if !is_any_kw(first, &["UPDATE", "INSERT", "REPLACE"]) {
        return None;
    }
    while rest.first().is_some_and(|l| is_any_kw(l, MODIFIERS)) {
        rest = &rest[1..];
    }
    table_ref(rest)
}

/// The columns a select's WHERE holds equal to a constant (`status = 'waiting'`,
/// `col IS NULL`, `queue = :queue`), each in a top-level `AND`. `None` when the
/// WHERE cannot be read that way (a top-level `OR`).
pub fn where_equality_columns(select: &str) -> Option<Vec<String>> {
    let lexes = lex(select);
    let Some(condition) = clause(&lexes, &["WHERE"], AFTER_WHERE) else {
        return Some(Vec::new());
    };
    let ors = split_top(condition, |l| {
        is_any_kw(l, &["OR", "XOR"]) || *l == Lex::Punct("||")
    });
    if ors.len() > 1 {
        return None;
    }
    let constant = |side: &[Lex]| matches!(side, [Lex::Literal] | [Lex::Param(_)]);
    let mut columns: Vec<String> = Vec::new();
    for term in split_top(condition, |l| is_kw(l, "AND") || *l == Lex::Punct("&&")) {
        let found = match term.iter().position(|l| *l == Lex::Punct("=")) {
            Some(eq) if constant(&term[eq + 1..]) => column_ref(&term[..eq]),
            Some(eq) if constant(&term[..eq]) => column_ref(&term[eq + 1..]),
            Some(_) => None,
            None => match term {
                [col @ .., is, null] if is_kw(is, "IS") && is_kw(null, "NULL") => column_ref(col),
                _ => None,
            },
        };
        if let Some(column) = found {
            push_new(&mut columns, column);
        }
    }
    Some(columns)
}

/// The columns of a select's top-level ORDER BY, when each item is a plain column
/// (with `ASC`/`DESC`); `Some(vec![])` without an ORDER BY, `None` otherwise.
pub fn order_by_columns(select: &str) -> Option<Vec<String>> {
    let lexes = lex(select);
    let Some(order) = clause(&lexes, &["ORDER", "BY"], &["LIMIT", "FOR", "LOCK"]) else {
        return Some(Vec::new());
    };
    split_top(order, |l| *l == Lex::Punct(","))
        .into_iter()
        .map(|item| match item {
            [col @ .., dir] if is_any_kw(dir, &["ASC", "DESC"]) => column_ref(col),
            _ => column_ref(item),
        })
        .collect()
}

/// The columns an index for the claim should have: the WHERE's equality columns,
/// then the ORDER BY columns. `None` when the select cannot be read that surely.
pub fn claim_index_columns(select: &str) -> Option<Vec<String>> {
    let mut columns = where_equality_columns(select)?;
    for column in order_by_columns(select)? {
        push_new(&mut columns, column);
    }
    (!columns.is_empty()).then_some(columns)
}

fn push_new(columns: &mut Vec<String>, column: String) {
    if !columns.iter().any(|c| c.eq_ignore_ascii_case(&column)) {
        columns.push(column);
    }
}

/// For an `UPDATE` or `DELETE`: whether its WHERE uses `:key`. `None` for other
/// statements (an `INSERT` into another table touches no queued row).
pub fn restricts_to_key(sql: &str, key: &str) -> Option<bool> {
    let lexes = lex(sql);
    if !lexes
        .first()
        .is_some_and(|l| is_any_kw(l, &["UPDATE", "DELETE"]))
    {
        return None;
    }
    let Some(start) = find_top(&lexes, 0, &["WHERE"]) else {
        return Some(false);
    };
    Some(
        lexes[start..]
            .iter()
            .any(|l| matches!(l, Lex::Param(p) if p.eq_ignore_ascii_case(key))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMAIL: &str = "SELECT id, recipient, subject, body, attempts
        FROM email
        WHERE status = 'waiting' AND (retry_at IS NULL OR retry_at <= UNIX_TIMESTAMP())
        ORDER BY id";

    fn names(list: &[&str]) -> Option<Vec<String>> {
        Some(list.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn reads_literal_column_lists_and_gives_up_on_anything_else() {
        assert_eq!(
            literal_columns(EMAIL),
            names(&["id", "recipient", "subject", "body", "attempts"])
        );
        assert_eq!(
            literal_columns("select e.id, `the key`, COUNT(*) AS n, x.y.z FROM e"),
            names(&["id", "the key", "n", "z"])
        );
        assert_eq!(literal_columns("SELECT * FROM t"), None);
        assert_eq!(literal_columns("SELECT t.* FROM t"), None);
        assert_eq!(literal_columns("SELECT id, a + 1 FROM t"), None);
        assert_eq!(literal_columns("SELECT id, a b FROM t"), None);
        assert_eq!(literal_columns("SELECT DISTINCT id FROM t"), None);
        assert_eq!(
            literal_columns("WITH q AS (SELECT 1) SELECT id FROM q"),
            None
        );
        assert_eq!(
            literal_columns("SELECT CONCAT(a, ',', b) AS ab, (SELECT 1 FROM u) AS one FROM t"),
            names(&["ab", "one"])
        );
    }

    #[test]
    fn finds_the_tables_of_a_select_and_of_outcome_sql() {
        let t = |schema: Option<&str>, name: &str| TableRef {
            schema: schema.map(str::to_string),
            name: name.to_string(),
        };
        assert_eq!(from_tables(EMAIL), vec![t(None, "email")]);
        assert_eq!(
            from_tables("SELECT a.id FROM shop.a FORCE INDEX (x) JOIN `b` ON a.id = b.id, (SELECT 1) d WHERE 1"),
            vec![t(Some("shop"), "a"), t(None, "b")]
        );
        assert_eq!(
            statement_target("UPDATE LOW_PRIORITY email SET a = 1 WHERE id = :id"),
            Some(t(None, "email"))
        );
        assert_eq!(
            statement_target("DELETE FROM shop.email WHERE id = :id"),
            Some(t(Some("shop"), "email"))
        );
        assert_eq!(
            statement_target("INSERT IGNORE INTO outbox (a) VALUES (:a)"),
            Some(t(None, "outbox"))
        );
        assert_eq!(statement_target("DO 1"), None);
    }

    #[test]
    fn suggests_equality_columns_then_order_by_columns() {
        assert_eq!(where_equality_columns(EMAIL), names(&["status"]));
        assert_eq!(order_by_columns(EMAIL), names(&["id"]));
        assert_eq!(claim_index_columns(EMAIL), names(&["status", "id"]));
        assert_eq!(
            claim_index_columns(
                "SELECT id FROM job WHERE queue = :queue AND 'x' = t.kind AND done_at IS NULL ORDER BY priority DESC, id"
            ),
            names(&["queue", "kind", "done_at", "priority", "id"])
        );
        assert_eq!(
            claim_index_columns("SELECT id FROM t WHERE a = 1 OR b = 2 ORDER BY id"),
            None
        );
        assert_eq!(
            claim_index_columns("SELECT id FROM t WHERE a = 1 ORDER BY a + b"),
            None
        );
        assert_eq!(claim_index_columns("SELECT id FROM t WHERE a > 1"), None);
    }

    #[test]
    fn tells_outcome_sql_that_touches_the_row_by_its_key() {
        assert_eq!(
            restricts_to_key("UPDATE email SET status = 'sent' WHERE id = :id", "id"),
            Some(true)
        );
        assert_eq!(
            restricts_to_key(
                "UPDATE email SET status = 'sent', last = :id WHERE recipient = :recipient",
                "id"
            ),
            Some(false)
        );
        assert_eq!(
            restricts_to_key("DELETE FROM email WHERE ID IN (:Id)", "id"),
            Some(true)
        );
        assert_eq!(restricts_to_key("UPDATE t SET a = :id", "id"), Some(false));
        assert_eq!(restricts_to_key("INSERT INTO t VALUES (:id)", "id"), None);
    }
}
