//! The tables a statement names: a select's FROM (with the aliases it reads them
//! by), the table an `UPDATE`/`DELETE`/`INSERT` writes to, and every table a view's
//! definition reads — each answering less rather than guessing.

use super::lex::{clause, find_top, ident, is_any_kw, is_kw, lex, Lex, AFTER_WHERE};

/// A table named in a statement: `db.name` or `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRef {
    pub schema: Option<String>,
    pub name: String,
}

impl TableRef {
    /// Whether both name the same table, as far as the text tells: the same name
    /// (ignoring case), and the same schema when both have one.
    pub fn same_as(&self, other: &TableRef) -> bool {
        self.name.eq_ignore_ascii_case(&other.name)
            && match (&self.schema, &other.schema) {
                (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                _ => true,
            }
    }
}

/// A table of a select's FROM clause, and the alias the select reads it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FromTable {
    pub table: TableRef,
    pub alias: Option<String>,
}

impl FromTable {
    /// What the select calls it (`j` in `FROM job AS j`), as EXPLAIN and qualified
    /// columns do.
    pub fn called(&self) -> &str {
        self.alias.as_deref().unwrap_or(&self.table.name)
    }

    /// Whether `qualifier` (the `j` of `j.id`) names this table.
    pub fn is_called(&self, qualifier: &str) -> bool {
        self.called().eq_ignore_ascii_case(qualifier)
    }
}

/// A table name at the start of `lexes`, and how many lexes it took.
fn table_name(lexes: &[Lex]) -> Option<(TableRef, usize)> {
    match lexes {
        [d, Lex::Punct("."), t, ..] => Some((
            TableRef {
                schema: Some(ident(d)?),
                name: ident(t)?,
            },
            3,
        )),
        [t, ..] => Some((
            TableRef {
                schema: None,
                name: ident(t)?,
            },
            1,
        )),
        [] => None,
    }
}

/// Words that may follow a table in a FROM clause to join or hint, and are not its
/// alias (nor is a word of [`LIST_ENDS`]).
const JOINS_AND_HINTS: &[&str] = &[
    "AS",
    "JOIN",
    "INNER",
    "LEFT",
    "RIGHT",
    "CROSS",
    "NATURAL",
    "STRAIGHT_JOIN",
    "FULL",
    "OUTER",
    "ON",
    "USING",
    "FORCE",
    "USE",
    "IGNORE",
    "PARTITION",
];

/// The alias at the start of `lexes` (right after a table's name): `AS j` or `j`.
fn alias(lexes: &[Lex]) -> Option<String> {
    match lexes {
        [as_kw, name, ..] if is_kw(as_kw, "AS") => ident(name),
        [Lex::Name(name), ..] => Some(name.clone()),
        [word @ Lex::Word(_), ..]
            if !is_any_kw(word, JOINS_AND_HINTS) && !is_any_kw(word, LIST_ENDS) =>
        {
            ident(word)
        }
        _ => None,
    }
}

/// The tables a select's top-level FROM clause names (after FROM, commas and JOINs;
/// derived tables are skipped).
pub fn from_tables(select: &str) -> Vec<TableRef> {
    from_tables_aliased(select)
        .into_iter()
        .map(|t| t.table)
        .collect()
}

/// Like [`from_tables`], with each table's alias.
pub fn from_tables_aliased(select: &str) -> Vec<FromTable> {
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
                if let Some((table, len)) = table_name(&from[i..]) {
                    tables.push(FromTable {
                        table,
                        alias: alias(&from[i + len..]),
                    });
                }
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
    table_name(rest).map(|(table, _)| table)
}

/// How a select reaches a table it reads: the top level's FROM or a JOIN (a comma
/// too), or a subquery of some kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    From,
    Join,
    Exists,
    NotExists,
    In,
    NotIn,
    /// A derived table: `FROM (SELECT …) d`.
    Derived,
    /// Any other subquery (a scalar one, `= ANY (…)`).
    Subquery,
}

impl std::fmt::Display for Reach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reach::From => "FROM",
            Reach::Join => "JOIN",
            Reach::Exists => "EXISTS subquery",
            Reach::NotExists => "NOT EXISTS subquery",
            Reach::In => "IN subquery",
            Reach::NotIn => "NOT IN subquery",
            Reach::Derived => "derived table",
            Reach::Subquery => "subquery",
        })
    }
}

/// A table a select reads, what the select calls it, and how it reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRead {
    pub table: FromTable,
    pub reach: Reach,
}

/// Every table a select (a view's definition) reads: after FROM, JOIN or a comma of
/// a table list, at any depth — subqueries and parenthesized joins included.
/// `None` when it cannot be sure it has them all: a `WITH`, a table function
/// (`JSON_TABLE(…)`), `LATERAL`, or no table at all.
pub fn tables_read(select: &str) -> Option<Vec<TableRef>> {
    tables_read_by(select).map(|read| read.into_iter().map(|r| r.table.table).collect())
}

/// Like [`tables_read`], with each table's alias and how the select reaches it.
pub fn tables_read_by(select: &str) -> Option<Vec<TableRead>> {
    let lexes = lex(select);
    let mut scan = Scan {
        frames: vec![Frame {
            query: true,
            in_from: false,
            reach: None,
        }],
        expect_table: false,
        joined: false,
        tables: Vec::new(),
    };
    let mut i = 0;
    while i < lexes.len() {
        i = scan.step(&lexes, i)?;
    }
    (!scan.tables.is_empty()).then_some(scan.tables)
}

/// What a parenthesis opened, for [`tables_read`].
#[derive(Clone, Copy)]
struct Frame {
    /// A query (the statement, or a subquery): its FROM names tables. Not so inside
    /// an expression (`EXTRACT(YEAR FROM d)`).
    query: bool,
    /// Between FROM and the end of the table list.
    in_from: bool,
    /// How the tables read here are reached: `None` at the top level.
    reach: Option<Reach>,
}

/// Where [`tables_read`] is in a statement.
struct Scan {
    frames: Vec<Frame>,
    /// The next name is a table's.
    expect_table: bool,
    /// The table list went past its first table (a JOIN or a comma).
    joined: bool,
    tables: Vec<TableRead>,
}

/// Words that end a table list.
const LIST_ENDS: &[&str] = &[
    "WHERE",
    "GROUP",
    "HAVING",
    "WINDOW",
    "ORDER",
    "LIMIT",
    "FOR",
    "LOCK",
    "INTO",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "SELECT",
];

impl Scan {
    /// Reads the lex at `i`: where to go on from, or `None` to give up.
    fn step(&mut self, lexes: &[Lex], i: usize) -> Option<usize> {
        let lex = &lexes[i];
        let frame = *self.frames.last()?;
        match lex {
            _ if is_any_kw(lex, &["WITH", "LATERAL"]) => return None,
            Lex::Punct("(") => self.open(lexes, i),
            Lex::Punct(")") => {
                self.frames.pop();
                self.frames.last()?;
                self.expect_table = false;
            }
            _ if !frame.query => {}
            _ if is_kw(lex, "FROM") => self.table_list(true),
            _ if is_any_kw(lex, LIST_ENDS) => self.table_list(false),
            _ if !frame.in_from => {}
            _ if is_any_kw(lex, &["JOIN", "STRAIGHT_JOIN"]) => self.join(),
            Lex::Punct(",") => self.join(),
            _ if is_any_kw(lex, &["ON", "USING"]) => self.expect_table = false,
            _ if self.expect_table => return self.table(lexes, i),
            _ => {}
        }
        Some(i + 1)
    }

    /// A parenthesis (at `i`) opens a subquery, a join nested in a table list
    /// (`FROM (a JOIN b ON …)`), or an expression.
    fn open(&mut self, lexes: &[Lex], i: usize) {
        let next = lexes.get(i + 1);
        let subquery = next.is_some_and(|l| is_any_kw(l, &["SELECT", "VALUES"]));
        let nested_join = self.expect_table && !subquery;
        let outer = self.frames.last().and_then(|f| f.reach);
        let reach = match subquery {
            true if self.expect_table => Some(Reach::Derived),
            true => Some(subquery_reach(&lexes[..i])),
            false => outer,
        };
        self.frames.push(Frame {
            query: subquery || nested_join,
            in_from: nested_join,
            reach,
        });
        self.expect_table = nested_join;
    }

    fn table_list(&mut self, starts: bool) {
        if let Some(frame) = self.frames.last_mut() {
            frame.in_from = starts;
        }
        self.expect_table = starts;
        self.joined = false;
    }

    fn join(&mut self) {
        self.expect_table = true;
        self.joined = true;
    }

    /// The table named at `i`; `None` for what is not a plain table name.
    fn table(&mut self, lexes: &[Lex], i: usize) -> Option<usize> {
        let (table, len) = table_name(&lexes[i..])?;
        if lexes.get(i + len) == Some(&Lex::Punct("(")) {
            return None; // a table function
        }
        if !table.name.eq_ignore_ascii_case("DUAL") {
            let reach = match self.frames.last().and_then(|f| f.reach) {
                Some(reach) => reach,
                None if self.joined => Reach::Join,
                None => Reach::From,
            };
            let alias = alias(&lexes[i + len..]);
            self.tables.push(TableRead {
                table: FromTable { table, alias },
                reach,
            });
        }
        self.expect_table = false;
        Some(i + len)
    }
}

/// How a subquery whose parenthesis follows `before` is reached: `EXISTS (`,
/// `NOT EXISTS (`, `IN (`, `NOT IN (`, or otherwise.
fn subquery_reach(before: &[Lex]) -> Reach {
    let negated = |n: usize| {
        before
            .len()
            .checked_sub(n)
            .is_some_and(|at| is_kw(&before[at], "NOT"))
    };
    match before.last() {
        Some(l) if is_kw(l, "EXISTS") && negated(2) => Reach::NotExists,
        Some(l) if is_kw(l, "EXISTS") => Reach::Exists,
        Some(l) if is_kw(l, "IN") && negated(2) => Reach::NotIn,
        Some(l) if is_kw(l, "IN") => Reach::In,
        _ => Reach::Subquery,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(schema: Option<&str>, name: &str) -> TableRef {
        TableRef {
            schema: schema.map(str::to_string),
            name: name.to_string(),
        }
    }

    #[test]
    fn finds_the_tables_of_a_select_and_of_outcome_sql() {
        assert_eq!(
            from_tables("SELECT id FROM email WHERE status = 'waiting' ORDER BY id"),
            vec![t(None, "email")]
        );
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
        assert!(t(Some("Shop"), "Email").same_as(&t(None, "email")));
        assert!(!t(Some("shop"), "email").same_as(&t(Some("crm"), "email")));
    }

    #[test]
    fn reads_the_aliases_a_select_gives_its_tables() {
        let aliased = from_tables_aliased(
            "SELECT j.id FROM job AS j FORCE INDEX (s) JOIN cfg ON cfg.id = 1 \
             LEFT JOIN shop.detail `d` USING (id), other o WHERE j.state = 'w'",
        );
        let called: Vec<&str> = aliased.iter().map(FromTable::called).collect();
        assert_eq!(called, ["j", "cfg", "d", "o"]);
        assert_eq!(aliased[2].table, t(Some("shop"), "detail"));
        assert!(aliased[0].is_called("J") && !aliased[0].is_called("job"));
    }

    #[test]
    fn reads_every_table_of_a_view_definition_or_says_it_cannot() {
        // MariaDB's own rendering of a view with a join and a subquery.
        assert_eq!(
            tables_read(
                "select `x`.`t`.`id` AS `id`, extract(year from `x`.`t`.`d`) AS `y` from \
                 (`x`.`t` join `x`.`u` on(`x`.`t`.`id` = `x`.`u`.`id`)) where `x`.`t`.`s` = 'w' \
                 and exists(select 1 from `x`.`w`, `x`.`z` where 1)"
            ),
            Some(vec![
                t(Some("x"), "t"),
                t(Some("x"), "u"),
                t(Some("x"), "w"),
                t(Some("x"), "z")
            ])
        );
        assert_eq!(
            tables_read("select a from t1 union select b from (select b from t2) d"),
            Some(vec![t(None, "t1"), t(None, "t2")])
        );
        assert_eq!(tables_read("select 1 AS `one`"), None);
        assert_eq!(tables_read("select 1 from dual"), None);
        assert_eq!(tables_read("with q as (select 1) select * from q"), None);
        assert_eq!(
            tables_read("select * from json_table('[]', '$[*]' columns (a int path '$')) j"),
            None
        );
    }

    #[test]
    fn says_how_a_select_reaches_each_table() {
        let read = tables_read_by(
            "SELECT o.id FROM orders o JOIN customer c ON c.id = o.customer, region \
             WHERE o.state = 'open' AND NOT EXISTS (SELECT 1 FROM item i WHERE i.order_id = o.id) \
             AND o.id IN (SELECT order_id FROM paid) AND o.id NOT IN (SELECT order_id FROM hold) \
             AND EXISTS (SELECT 1 FROM (SELECT order_id FROM note) n JOIN tag USING (x)) \
             AND o.total > (SELECT MIN(v) FROM floor)",
        )
        .unwrap();
        let said: Vec<(String, String)> = read
            .iter()
            .map(|r| (r.table.called().to_string(), r.reach.to_string()))
            .collect();
        let said: Vec<(&str, &str)> = said.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        assert_eq!(
            said,
            [
                ("o", "FROM"),
                ("c", "JOIN"),
                ("region", "JOIN"),
                ("i", "NOT EXISTS subquery"),
                ("paid", "IN subquery"),
                ("hold", "NOT IN subquery"),
                ("note", "derived table"),
                ("tag", "EXISTS subquery"),
                ("floor", "subquery"),
            ]
        );
    }
}
