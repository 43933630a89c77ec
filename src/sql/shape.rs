//! What can be read from a statement's text alone, conservatively: the names of a
//! select's columns when its list is literal, the tables it reads, the columns an
//! index for its claim should have, and whether outcome SQL touches the row by its
//! key. Every reader answers `None` (or nothing) rather than guess: a caller that
//! gets no answer asks the database instead, or says less.

use super::lex::{
    clause, column_ref, find_top, ident, is_any_kw, is_kw, lex, qualified_column_ref, spans,
    split_top, Lex, AFTER_WHERE,
};
pub use super::tables::{
    from_tables, from_tables_aliased, statement_target, tables_read_by, FromTable, Reach,
    TableRead, TableRef,
};

/// The columns `select` names qualified by `called` (`order_id` of `i.order_id`,
/// for `i`), in order, each once.
pub fn columns_qualified_by(select: &str, called: &str) -> Vec<String> {
    let lexes = lex(select);
    let mut columns: Vec<String> = Vec::new();
    for window in lexes.windows(3) {
        let [table, Lex::Punct("."), column] = window else {
            continue;
        };
        let named = ident(table).is_some_and(|t| t.eq_ignore_ascii_case(called));
        match ident(column) {
            Some(c) if named && !columns.iter().any(|k| k.eq_ignore_ascii_case(&c)) => {
                columns.push(c)
            }
            _ => {}
        }
    }
    columns
}

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

/// `claim` (a select, with tableq's clause) returning `list` instead of its own
/// columns: the same rows, the same order, the same locks. `None` when that would
/// not be the same claim — a select that is not one plain `SELECT … FROM` (`WITH`,
/// `DISTINCT`, `GROUP BY`, `HAVING`, `UNION`, a window).
pub fn with_select_list(claim: &str, list: &str) -> Option<String> {
    let pieces = spans(claim);
    let lexes: Vec<Lex> = pieces.iter().map(|(l, _)| l.clone()).collect();
    if !lexes.first().is_some_and(|l| is_kw(l, "SELECT")) {
        return None;
    }
    let modifier = [
        "DISTINCT",
        "DISTINCTROW",
        "ALL",
        "HIGH_PRIORITY",
        "SQL_CALC_FOUND_ROWS",
    ];
    if lexes.get(1).is_some_and(|l| is_any_kw(l, &modifier)) {
        return None;
    }
    let from = find_top(&lexes, 1, &["FROM"])?;
    let grouped = ["GROUP", "HAVING", "UNION", "WINDOW", "INTERSECT", "EXCEPT"]
        .iter()
        .any(|kw| find_top(&lexes, from, &[kw]).is_some());
    if grouped {
        return None;
    }
    Some(format!("SELECT {list} {}", &claim[pieces[from].1.start..]))
}

/// A column as a statement writes it: `j.id` is column `id` of the table the
/// select calls `j`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnRef {
    /// The table name or alias it is qualified with, if any.
    pub table: Option<String>,
    pub name: String,
}

fn column(lexes: &[Lex]) -> Option<ColumnRef> {
    qualified_column_ref(lexes).map(|(table, name)| ColumnRef { table, name })
}

/// The columns a select's WHERE holds equal to a constant (`status = 'waiting'`,
/// `col IS NULL`, `queue = :queue`), each in a top-level `AND`. `None` when the
/// WHERE cannot be read that way (a top-level `OR`).
pub fn where_equality_columns(select: &str) -> Option<Vec<ColumnRef>> {
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
    let mut columns: Vec<ColumnRef> = Vec::new();
    for term in split_top(condition, |l| is_kw(l, "AND") || *l == Lex::Punct("&&")) {
        let found = match term.iter().position(|l| *l == Lex::Punct("=")) {
            Some(eq) if constant(&term[eq + 1..]) => column(&term[..eq]),
            Some(eq) if constant(&term[..eq]) => column(&term[eq + 1..]),
            Some(_) => None,
            None => match term {
                [col @ .., is, null] if is_kw(is, "IS") && is_kw(null, "NULL") => column(col),
                _ => None,
            },
        };
        if let Some(found) = found {
            if !columns.contains(&found) {
                columns.push(found);
            }
        }
    }
    Some(columns)
}

/// The columns of a select's top-level ORDER BY, when each item is a plain column
/// (with `ASC`/`DESC`); `Some(vec![])` without an ORDER BY, `None` otherwise.
pub fn order_by_columns(select: &str) -> Option<Vec<ColumnRef>> {
    let lexes = lex(select);
    let Some(order) = clause(&lexes, &["ORDER", "BY"], &["LIMIT", "FOR", "LOCK"]) else {
        return Some(Vec::new());
    };
    split_top(order, |l| *l == Lex::Punct(","))
        .into_iter()
        .map(|item| match item {
            [col @ .., dir] if is_any_kw(dir, &["ASC", "DESC"]) => column(col),
            _ => column(item),
        })
        .collect()
}

/// The columns an index on `main`, one of the select's tables, should have for the
/// claim: the WHERE's equality columns, then the ORDER BY columns. With several
/// tables, only columns qualified with `main`'s name or alias are known to be its
/// own: an equality on another table's column is left out, and the answer is `None`
/// when a column could be any table's (unqualified) or the order is another
/// table's. `None` too when the select cannot be read that surely.
pub fn claim_index_columns(select: &str, main: &FromTable) -> Option<Vec<String>> {
    let tables = from_tables_aliased(select);
    let named = |q: &str| tables.iter().filter(|t| t.is_called(q)).count();
    if named(main.called()) != 1 {
        return None;
    }
    // Some(true): main's column; Some(false): another table's; None: cannot tell.
    let owned = |c: &ColumnRef| match &c.table {
        None if tables.len() == 1 => Some(true),
        None => None,
        Some(q) if main.is_called(q) => Some(true),
        Some(q) if named(q) > 0 => Some(false),
        Some(_) => None,
    };
    let mut columns = Vec::new();
    for found in where_equality_columns(select)? {
        if owned(&found)? {
            push_new(&mut columns, found.name);
        }
    }
    for found in order_by_columns(select)? {
        if !owned(&found)? {
            return None;
        }
        push_new(&mut columns, found.name);
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

/// For an `INSERT … SELECT`: whether the SELECT's WHERE uses `:key` (the row it
/// copies is the leased one). `None` for other statements.
pub fn inserts_from_key(sql: &str, key: &str) -> Option<bool> {
    let lexes = lex(sql);
    if !lexes.first().is_some_and(|l| is_kw(l, "INSERT")) {
        return None;
    }
    let select = find_top(&lexes, 0, &["SELECT"])?;
    let Some(start) = find_top(&lexes, select, &["WHERE"]) else {
        return Some(false);
    };
    Some(
        lexes[start..]
            .iter()
            .any(|l| matches!(l, Lex::Param(p) if p.eq_ignore_ascii_case(key))),
    )
}

/// A select's rows whatever its WHERE: its text up to its WHERE (or its ORDER BY,
/// LIMIT, FOR UPDATE), with how many `?` that part holds — the rows of its tables,
/// joined as it joins them, whether they wait or not. `None` when that cut would
/// not mean it: a `WITH`, `UNION`, `GROUP BY`, `HAVING` or `WINDOW`.
pub fn rows_whatever_where(select: &str) -> Option<(String, usize)> {
    let pieces = spans(select);
    let lexes: Vec<Lex> = pieces.iter().map(|(lex, _)| lex.clone()).collect();
    if !lexes.first().is_some_and(|l| is_kw(l, "SELECT")) {
        return None;
    }
    let refused = ["UNION", "GROUP", "HAVING", "WINDOW", "INTERSECT", "EXCEPT"];
    if refused
        .iter()
        .any(|kw| find_top(&lexes, 0, &[kw]).is_some())
    {
        return None;
    }
    let end = ["WHERE", "ORDER", "LIMIT", "FOR", "LOCK"]
        .iter()
        .filter_map(|kw| find_top(&lexes, 0, &[kw]))
        .min()
        .unwrap_or(lexes.len());
    let cut = pieces
        .get(end)
        .map_or(select.len(), |(_, range)| range.start);
    let marks = lexes[..end]
        .iter()
        .filter(|l| **l == Lex::Punct("?"))
        .count();
    Some((select[..cut].trim_end().to_string(), marks))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMAIL: &str = "SELECT id, recipient, subject, body, attempts
        FROM email
        WHERE status = 'waiting' AND (retry_at IS NULL OR retry_at <= UNIX_TIMESTAMP())
        ORDER BY id";

    /// The key-first claim keeps everything after the select list, and refuses
    /// the selects whose rows its list would change.
    #[test]
    fn a_claim_returns_another_list_only_where_its_rows_stay_the_same() {
        let claim = format!("{EMAIL}\nLIMIT 10 FOR UPDATE SKIP LOCKED");
        let keys = with_select_list(&claim, "`email`.`id`").unwrap();
        assert!(
            keys.starts_with("SELECT `email`.`id` FROM email\n"),
            "{keys}"
        );
        assert!(
            keys.ends_with("ORDER BY id\nLIMIT 10 FOR UPDATE SKIP LOCKED"),
            "{keys}"
        );
        let sub = "SELECT id, (SELECT MAX(x) FROM t) AS m FROM e WHERE ? = 'q' LIMIT 1";
        assert_eq!(
            with_select_list(sub, "e.id").as_deref(),
            Some("SELECT e.id FROM e WHERE ? = 'q' LIMIT 1")
        );
        for refused in [
            "SELECT DISTINCT id FROM e",
            "SELECT id FROM e GROUP BY id",
            "WITH x AS (SELECT 1) SELECT id FROM x",
            "SELECT id FROM e UNION SELECT id FROM f",
            "SELECT 1",
        ] {
            assert_eq!(with_select_list(refused, "id"), None, "{refused}");
        }
    }

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

    fn only(select: &str) -> FromTable {
        from_tables_aliased(select).remove(0)
    }

    #[test]
    fn suggests_equality_columns_then_order_by_columns() {
        let plain = |name: &str| ColumnRef {
            table: None,
            name: name.to_string(),
        };
        assert_eq!(where_equality_columns(EMAIL), Some(vec![plain("status")]));
        assert_eq!(order_by_columns(EMAIL), Some(vec![plain("id")]));
        assert_eq!(
            claim_index_columns(EMAIL, &only(EMAIL)),
            names(&["status", "id"])
        );
        let job = "SELECT id FROM job t WHERE queue = :queue AND 'x' = t.kind AND done_at IS NULL ORDER BY priority DESC, id";
        assert_eq!(
            claim_index_columns(job, &only(job)),
            names(&["queue", "kind", "done_at", "priority", "id"])
        );
        for unreadable in [
            "SELECT id FROM t WHERE a = 1 OR b = 2 ORDER BY id",
            "SELECT id FROM t WHERE a = 1 ORDER BY a + b",
            "SELECT id FROM t WHERE a > 1",
        ] {
            assert_eq!(claim_index_columns(unreadable, &only(unreadable)), None);
        }
    }

    #[test]
    fn with_a_join_suggests_only_the_main_tables_own_columns() {
        let join = "SELECT j.id FROM job AS j JOIN detail d ON d.job_id = j.id \
                    WHERE j.state = 'waiting' AND d.ok = 1 ORDER BY j.id";
        let tables = from_tables_aliased(join);
        assert_eq!(
            claim_index_columns(join, &tables[0]),
            names(&["state", "id"])
        );
        // Ordered by another table's column: no index on `detail` serves the claim.
        assert_eq!(claim_index_columns(join, &tables[1]), None);
        // An unqualified column could be either table's.
        let unsure =
            "SELECT job.id FROM job JOIN cfg ON cfg.id = 1 WHERE state = 'w' ORDER BY job.id";
        assert_eq!(claim_index_columns(unsure, &only(unsure)), None);
        let qualified = unsure.replace("WHERE state", "WHERE cfg.enabled = 1 AND job.state");
        assert_eq!(
            claim_index_columns(&qualified, &only(&qualified)),
            names(&["state", "id"])
        );
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

    #[test]
    fn a_select_without_its_where_order_and_limit() {
        assert_eq!(
            rows_whatever_where(
                "SELECT j.id AS job FROM job j JOIN acct a ON a.id = j.acct AND a.q = ? \
                 WHERE j.state = ? AND (x) ORDER BY j.id LIMIT 5"
            ),
            Some((
                "SELECT j.id AS job FROM job j JOIN acct a ON a.id = j.acct AND a.q = ?".into(),
                1
            ))
        );
        assert_eq!(
            rows_whatever_where("SELECT id FROM t ORDER BY id"),
            Some(("SELECT id FROM t".into(), 0))
        );
        assert_eq!(
            rows_whatever_where("SELECT id FROM (SELECT id FROM t WHERE x = 1) d"),
            Some(("SELECT id FROM (SELECT id FROM t WHERE x = 1) d".into(), 0))
        );
        assert_eq!(rows_whatever_where("SELECT k FROM t GROUP BY k"), None);
        assert_eq!(
            rows_whatever_where("WITH c AS (SELECT 1) SELECT * FROM c"),
            None
        );
    }
}
