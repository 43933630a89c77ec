//! When a select's rows fall due by time alone, read from its text: its time
//! conditions (`send_after <= NOW()`, `lease_until < NOW(3)`, `retry_at <=
//! UNIX_TIMESTAMP()`), each reached from the WHERE through AND, OR and parentheses
//! only, and the one statement that asks the server how long until the first row
//! the rest of the select matches falls due: a plain read, driven by the same
//! index as the claim, locking nothing. A time function anywhere else that decides
//! which rows wait (under NOT, in a subquery, a JOIN's ON, BETWEEN, CASE) is left
//! unread, and said: such a queue polls.

use std::ops::Range;
use std::time::Duration;

use super::lex::{find_top, is_any_kw, is_kw, spans, Lex, AFTER_WHERE};

/// What a select says about rows that fall due by time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DueTimes {
    /// No time function decides which rows wait: a row becomes due by a change.
    Timeless,
    /// Its time conditions, read: the server can be asked when the next row is due.
    Read(NextDue),
    /// A time function decides which rows wait, where tableq cannot read when.
    Unread { why: String },
}

/// The statement that asks when the next row falls due, and the conditions it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextDue {
    /// `SELECT MICROSECOND(NOW(6)), (SELECT …), …`: the server clock's microsecond,
    /// then per condition the microseconds from now until the first row matching
    /// the rest of the select reaches it (NULL: none will). The select's `:queue`
    /// is left in.
    pub sql: String,
    pub conditions: Vec<DueCondition>,
}

/// One time condition of the select: `column <= NOW()` and its kin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueCondition {
    /// As written in the select.
    pub text: String,
    /// `<` (or `>` written the other way round): due only once the clock is past.
    pub strict: bool,
    /// The fractional digits the select reads the clock with: `NOW()` 0, `NOW(3)` 3.
    pub precision: u32,
}

impl DueCondition {
    /// How long from now until the condition holds for a row whose value the server
    /// put `until` microseconds ahead of its exact clock, whose microsecond was
    /// `micros`: the clock as the select reads it ticks in steps of its precision.
    pub fn wait(&self, micros: i64, until: i64) -> Duration {
        let step = 10i64.pow(6 - self.precision.min(6));
        let at = micros + until;
        let due = match self.strict {
            true => (at.div_euclid(step) + 1) * step,
            false => -((-at).div_euclid(step)) * step,
        };
        Duration::from_micros((due - micros).max(0) as u64)
    }
}

impl DueTimes {
    /// How rows due by time are found, in the words of `check` (and whether that is
    /// on time); `None` when no time function decides which rows wait.
    pub fn described(&self, poll_interval: Duration) -> Option<(bool, String)> {
        let every = humantime::format_duration(poll_interval);
        match self {
            DueTimes::Timeless => None,
            DueTimes::Read(next) => {
                let conditions: Vec<String> = next
                    .conditions
                    .iter()
                    .map(|c| format!("`{}`", c.text))
                    .collect();
                let said = format!(
                    "claims rows due by time ({}) when they fall due, asking the database \
                     when the next one is",
                    conditions.join(", ")
                );
                Some((true, said))
            }
            DueTimes::Unread { why } => Some((
                false,
                format!(
                    "rows due by time are found by polling every poll_interval ({every}), so up \
                     to {every} late, binary log or not: tableq cannot read when they fall due, \
                     as {why}; write the condition as `column <= NOW()` (or `< NOW(3)`, \
                     `<= UNIX_TIMESTAMP()`) joined by AND or OR"
                ),
            )),
        }
    }
}

/// Reads `select`'s time conditions.
pub fn due_times(select: &str) -> DueTimes {
    let pieces = spans(select);
    let src = Src {
        text: select,
        lexes: pieces.iter().map(|(lex, _)| lex.clone()).collect(),
        ranges: pieces.into_iter().map(|(_, range)| range).collect(),
    };
    let clocks = clock_calls(&src.lexes);
    if clocks.is_empty() {
        return DueTimes::Timeless;
    }
    match read(&src, &clocks) {
        Ok(Some(next)) => DueTimes::Read(next),
        Ok(None) => DueTimes::Timeless,
        Err(why) => DueTimes::Unread { why },
    }
}

/// The select: its text, and its pieces with the bytes each covers.
struct Src<'a> {
    text: &'a str,
    lexes: Vec<Lex>,
    ranges: Vec<Range<usize>>,
}

impl Src<'_> {
    /// The text the pieces `range` cover.
    fn text(&self, range: &Range<usize>) -> &str {
        match range.is_empty() {
            true => "",
            false => &self.text[self.ranges[range.start].start..self.ranges[range.end - 1].end],
        }
    }
}

/// The parts of the select the statement is made of.
struct Clauses {
    from: Range<usize>,
    condition: Range<usize>,
}

fn read(src: &Src<'_>, clocks: &[usize]) -> Result<Option<NextDue>, String> {
    let Some(clauses) = clauses(&src.lexes, clocks)? else {
        return Ok(None);
    };
    let mut found = Vec::new();
    conditions(src, clauses.condition.clone(), clocks, &mut found)?;
    if found.is_empty() {
        return Ok(None);
    }
    let text = |range: &Range<usize>| src.text(range);
    // Every time condition counts as met in each question: a row waits for the
    // one asked about, whatever the others say (they are asked about in turn).
    let mut condition = String::new();
    let mut copied = src.ranges[clauses.condition.start].start;
    for due in &found {
        condition.push_str(&src.text[copied..src.ranges[due.whole.start].start]);
        condition.push_str("TRUE");
        copied = src.ranges[due.whole.end - 1].end;
    }
    condition.push_str(&src.text[copied..src.ranges[clauses.condition.end - 1].end]);
    let from = without_index_hints(src, clauses.from.clone());
    let mut sql = "SELECT MICROSECOND(NOW(6))".to_string();
    for due in &found {
        let (row, clock, exact) = (text(&due.row), text(&due.clock), &due.exact_clock);
        let not_yet = match due.strict {
            true => ">=",
            false => ">",
        };
        let until = match (due.unix, due.per_row) {
            (false, false) => format!("TIMESTAMPDIFF(MICROSECOND, {exact}, MIN({row}))"),
            (false, true) => format!("MIN(TIMESTAMPDIFF(MICROSECOND, {exact}, {row}))"),
            (true, false) => format!("(MIN({row}) - ({exact})) * 1000000"),
            (true, true) => format!("MIN((({row}) - ({exact})) * 1000000)"),
        };
        sql.push_str(&format!(
            ",\n  (SELECT {until} FROM {from} WHERE ({condition}) AND ({row}) {not_yet} ({clock}))"
        ));
    }
    let conditions = found
        .iter()
        .map(|due| DueCondition {
            text: text(&due.whole).to_string(),
            strict: due.strict,
            precision: due.precision,
        })
        .collect();
    Ok(Some(NextDue { sql, conditions }))
}

/// The FROM clause `range` without its index hints (`FORCE INDEX (status_id)`):
/// the hint serves the claim's order; the question wants the index on the time
/// column, and the optimizer may pick it.
fn without_index_hints(src: &Src<'_>, range: Range<usize>) -> String {
    let lexes = &src.lexes;
    let mut out = String::new();
    let mut copied = src.ranges[range.start].start;
    let mut i = range.start;
    while i < range.end {
        let hint = is_any_kw(&lexes[i], &["FORCE", "USE", "IGNORE"])
            && lexes
                .get(i + 1)
                .is_some_and(|l| is_any_kw(l, &["INDEX", "KEY"]));
        let open = (i + 2..range.end).find(|&j| lexes[j] == Lex::Punct("("));
        match (hint, open) {
            (true, Some(open)) if closing(lexes, open) < range.end => {
                out.push_str(&src.text[copied..src.ranges[i].start]);
                i = closing(lexes, open) + 1;
                copied = src.ranges[i - 1].end;
            }
            _ => i += 1,
        }
    }
    out.push_str(&src.text[copied..src.ranges[range.end - 1].end]);
    out
}

/// Where the select's FROM and WHERE are; `None` when no time function is in
/// either (one in the column list or ORDER BY decides nothing about which rows
/// wait); why not, when one is where it cannot be read.
fn clauses(lexes: &[Lex], clocks: &[usize]) -> Result<Option<Clauses>, String> {
    if !lexes.first().is_some_and(|l| is_kw(l, "SELECT")) {
        return Err("the select is not a plain SELECT (a WITH query)".into());
    }
    let Some(from) = find_top(lexes, 1, &["FROM"]) else {
        return Ok(None);
    };
    // The WHERE first: an index hint's `FOR ORDER BY` comes before it.
    let where_at = find_top(lexes, from, &["WHERE"]);
    let end = AFTER_WHERE
        .iter()
        .filter_map(|kw| find_top(lexes, where_at.unwrap_or(from), &[kw]))
        .min()
        .unwrap_or(lexes.len());
    let grouped = ["GROUP", "HAVING", "WINDOW"]
        .iter()
        .any(|kw| find_top(lexes, where_at.unwrap_or(from), &[kw]).is_some());
    let after_from = |c: &&usize| **c > from;
    if grouped && clocks.iter().any(|c| after_from(&c)) {
        return Err("the select groups its rows (GROUP BY, HAVING)".into());
    }
    let from_end = where_at.unwrap_or(end);
    if clocks.iter().any(|c| *c > from && *c < from_end) {
        return Err("a time function is in its FROM clause (a JOIN's ON, a derived table)".into());
    }
    let Some(where_at) = where_at else {
        return Ok(None);
    };
    if !clocks.iter().any(|c| *c > where_at && *c < end) || where_at + 1 >= end {
        return Ok(None);
    }
    Ok(Some(Clauses {
        from: from + 1..where_at,
        condition: where_at + 1..end,
    }))
}

/// A time condition found, by piece indices.
struct Found {
    /// The whole comparison.
    whole: Range<usize>,
    /// The row's side: the value the clock has to reach.
    row: Range<usize>,
    /// The clock's side, as written.
    clock: Range<usize>,
    /// The clock's side with the clock read to the microsecond.
    exact_clock: String,
    strict: bool,
    precision: u32,
    /// Unix seconds, not a DATETIME.
    unix: bool,
    /// The clock's side names a column: its distance differs row by row.
    per_row: bool,
}

/// Finds the time conditions of the boolean expression `range`, through OR, AND
/// and parentheses.
fn conditions(
    src: &Src<'_>,
    range: Range<usize>,
    clocks: &[usize],
    found: &mut Vec<Found>,
) -> Result<(), String> {
    let lexes = &src.lexes;
    let or = |l: &Lex| is_kw(l, "OR") || *l == Lex::Punct("||");
    let and = |l: &Lex| is_kw(l, "AND") || *l == Lex::Punct("&&");
    for alternative in split(lexes, range, or) {
        for term in split(lexes, alternative, and) {
            if !clocks.iter().any(|c| term.contains(c)) {
                continue;
            }
            if lexes[term.start] == Lex::Punct("(") && closing(lexes, term.start) == term.end - 1 {
                conditions(src, term.start + 1..term.end - 1, clocks, found)?;
                continue;
            }
            match comparison(src, term.clone(), clocks) {
                Some(Some(due)) => found.push(due),
                // A row that the clock takes out of the select: no row waits for it.
                Some(None) => {}
                None => return Err(format!("`{}` is not `column <= NOW()`", src.text(&term))),
            }
        }
    }
    Ok(())
}

/// `term` read as a comparison of a row's value with the clock: `Some(Some)` when
/// rows fall due as the clock passes their value, `Some(None)` when they leave
/// (`expires_at > NOW()`), `None` when it cannot be read.
fn comparison(src: &Src<'_>, term: Range<usize>, clocks: &[usize]) -> Option<Option<Found>> {
    let lexes = &src.lexes;
    let mut depth = 0usize;
    let mut ops = Vec::new();
    for i in term.clone() {
        match &lexes[i] {
            Lex::Punct("(") => depth += 1,
            Lex::Punct(")") => depth = depth.saturating_sub(1),
            Lex::Punct(op @ ("<" | "<=" | ">" | ">=")) if depth == 0 => ops.push((i, *op)),
            Lex::Punct("=" | "<>" | "!=" | "<=>" | "!") if depth == 0 => return None,
            l if depth == 0 && is_any_kw(l, UNREAD_WORDS) => return None,
            _ => {}
        }
    }
    let [(at, op)] = ops[..] else {
        return None;
    };
    let (left, right) = (term.start..at, at + 1..term.end);
    let timed = |side: &Range<usize>| clocks.iter().any(|c| side.contains(c));
    let (row, clock, clock_is_larger) = match (timed(&left), timed(&right)) {
        (false, true) => (left, right, matches!(op, "<" | "<=")),
        (true, false) => (right, left, matches!(op, ">" | ">=")),
        _ => return None,
    };
    let read = clock_side(src, clock.clone())?;
    if row.is_empty() || !clock_is_larger {
        return Some(None);
    }
    Some(Some(Found {
        whole: term,
        row,
        clock,
        exact_clock: read.exact,
        strict: matches!(op, "<" | ">"),
        precision: read.precision,
        unix: read.unix,
        per_row: read.per_row,
    }))
}

/// Words that make a comparison's sides more than a value each.
const UNREAD_WORDS: &[&str] = &[
    "NOT", "IS", "IN", "LIKE", "BETWEEN", "REGEXP", "RLIKE", "CASE", "WHEN", "THEN", "ELSE", "END",
    "EXISTS", "XOR", "SOUNDS", "ESCAPE", "ANY", "ALL", "SOME",
];

/// The clock's side of a comparison, read.
struct ClockSide {
    exact: String,
    precision: u32,
    unix: bool,
    per_row: bool,
}

/// `NOW()`, `NOW(3)`, `UTC_TIMESTAMP()`, `CURRENT_TIMESTAMP`, `UNIX_TIMESTAMP()`
/// (or of one of the others), then optionally `+`/`-` and an offset with no time
/// function in it (`- INTERVAL 5 MINUTE`, `- 60`, `- INTERVAL delay SECOND`).
fn clock_side(src: &Src<'_>, side: Range<usize>) -> Option<ClockSide> {
    let lexes = &src.lexes;
    let (mut read, end) = match clock_at(src, side.start) {
        Some((name, precision, end)) => (
            ClockSide {
                exact: format!("{name}(6)"),
                precision,
                unix: false,
                per_row: false,
            },
            end,
        ),
        None if is_kw(lexes.get(side.start)?, "UNIX_TIMESTAMP")
            && lexes.get(side.start + 1) == Some(&Lex::Punct("(")) =>
        {
            let inner = side.start + 2;
            let (name, precision, end) = match lexes.get(inner)? {
                Lex::Punct(")") => ("NOW", 0, inner),
                _ => clock_at(src, inner)?,
            };
            (lexes.get(end)? == &Lex::Punct(")")).then_some(())?;
            let exact = format!("UNIX_TIMESTAMP({name}(6))");
            let (unix, per_row) = (true, false);
            (
                ClockSide {
                    exact,
                    precision,
                    unix,
                    per_row,
                },
                end + 1,
            )
        }
        None => return None,
    };
    if end > side.end {
        return None;
    }
    if end < side.end {
        if !matches!(lexes[end], Lex::Punct("+" | "-")) {
            return None;
        }
        let offset = &lexes[end..side.end];
        if !clock_calls(offset).is_empty() {
            return None;
        }
        read.per_row = offset.iter().any(|l| match l {
            Lex::Word(w) => !is_interval_word(w),
            Lex::Name(_) => true,
            _ => false,
        });
        read.exact.push(' ');
        read.exact.push_str(src.text(&(end..side.end)));
    }
    Some(read)
}

/// A DATETIME clock call at `at`: its name, the precision it reads, and the piece
/// after it.
fn clock_at(src: &Src<'_>, at: usize) -> Option<(&'static str, u32, usize)> {
    let lexes = &src.lexes;
    let name = DATETIME_CLOCKS
        .iter()
        .find(|name| is_kw(&lexes[at], name))?;
    match (lexes.get(at + 1), lexes.get(at + 2), lexes.get(at + 3)) {
        (Some(Lex::Punct("(")), Some(Lex::Punct(")")), _) => Some((name, 0, at + 3)),
        (Some(Lex::Punct("(")), Some(Lex::Literal), Some(Lex::Punct(")"))) => {
            let precision = src.text(&(at + 2..at + 3)).parse().ok()?;
            Some((name, precision, at + 4))
        }
        _ if !matches!(*name, "NOW" | "SYSDATE") => Some((name, 0, at + 1)),
        _ => None,
    }
}

const DATETIME_CLOCKS: &[&str] = &[
    "NOW",
    "CURRENT_TIMESTAMP",
    "LOCALTIMESTAMP",
    "LOCALTIME",
    "SYSDATE",
    "UTC_TIMESTAMP",
];

/// The other functions that read the clock (besides `UNIX_TIMESTAMP()`: with an
/// argument it converts a value).
const DATE_CLOCKS: &[&str] = &[
    "UTC_DATE",
    "UTC_TIME",
    "CURDATE",
    "CURRENT_DATE",
    "CURTIME",
    "CURRENT_TIME",
];

/// Where `lexes` read the clock.
fn clock_calls(lexes: &[Lex]) -> Vec<usize> {
    let called = |i: usize| lexes.get(i + 1) == Some(&Lex::Punct("("));
    (0..lexes.len())
        .filter(|&i| match &lexes[i] {
            l if is_any_kw(l, DATETIME_CLOCKS) || is_any_kw(l, DATE_CLOCKS) => {
                !(i > 0 && lexes[i - 1] == Lex::Punct("."))
            }
            l if is_kw(l, "UNIX_TIMESTAMP") => {
                called(i) && lexes.get(i + 2) == Some(&Lex::Punct(")"))
            }
            _ => false,
        })
        .collect()
}

fn is_interval_word(word: &str) -> bool {
    const UNITS: &[&str] = &[
        "INTERVAL",
        "MICROSECOND",
        "SECOND",
        "MINUTE",
        "HOUR",
        "DAY",
        "WEEK",
        "MONTH",
        "QUARTER",
        "YEAR",
    ];
    word.split('_')
        .all(|part| UNITS.iter().any(|u| u.eq_ignore_ascii_case(part)))
}

/// The pieces between top-level `is_sep`s of `range`.
fn split(lexes: &[Lex], range: Range<usize>, is_sep: impl Fn(&Lex) -> bool) -> Vec<Range<usize>> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = range.start;
    for i in range.clone() {
        match &lexes[i] {
            Lex::Punct("(") => depth += 1,
            Lex::Punct(")") => depth = depth.saturating_sub(1),
            l if depth == 0 && is_sep(l) => {
                parts.push(start..i);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(start..range.end);
    parts.retain(|part| !part.is_empty());
    parts
}

/// The `)` that closes the `(` at `open`.
fn closing(lexes: &[Lex], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, lex) in lexes.iter().enumerate().skip(open) {
        match lex {
            Lex::Punct("(") => depth += 1,
            Lex::Punct(")") => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    lexes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(select: &str) -> NextDue {
        match due_times(select) {
            DueTimes::Read(next) => next,
            other => panic!("{select}: {other:?}"),
        }
    }

    fn unread(select: &str) -> String {
        match due_times(select) {
            DueTimes::Unread { why } => why,
            other => panic!("{select}: {other:?}"),
        }
    }

    #[test]
    fn a_time_condition_in_a_top_level_and_is_read() {
        let next = read(
            "SELECT id, subject FROM email WHERE status = 'waiting' AND send_after <= NOW() \
             ORDER BY id",
        );
        assert_eq!(
            next.sql,
            "SELECT MICROSECOND(NOW(6)),\n  (SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), \
             MIN(send_after)) FROM email WHERE (status = 'waiting' AND TRUE) AND (send_after) \
             > (NOW()))"
        );
        let condition = &next.conditions[0];
        assert_eq!(condition.text, "send_after <= NOW()");
        assert!(!condition.strict);
        assert_eq!(condition.precision, 0);
    }

    #[test]
    fn the_articles_retry_and_a_lease_expiry_are_read_through_or_and_parentheses() {
        let next = read(
            "SELECT id FROM email WHERE status = 'waiting' \
             AND (retry_at IS NULL OR retry_at <= UNIX_TIMESTAMP()) ORDER BY id",
        );
        assert!(
            next.sql.contains(
                "(SELECT (MIN(retry_at) - (UNIX_TIMESTAMP(NOW(6)))) * 1000000 FROM email \
                 WHERE (status = 'waiting' \
             AND (retry_at IS NULL OR TRUE)) AND (retry_at) > (UNIX_TIMESTAMP()))"
            ),
            "{}",
            next.sql
        );
        let lease = read(
            "SELECT id FROM video WHERE state = 'waiting' OR (state = 'rendering' AND \
             lease_until < NOW(3)) ORDER BY id",
        );
        let condition = &lease.conditions[0];
        assert_eq!(condition.text, "lease_until < NOW(3)");
        assert!(condition.strict);
        assert_eq!(condition.precision, 3);
        assert!(
            lease.sql.contains("(lease_until) >= (NOW(3))"),
            "{}",
            lease.sql
        );
    }

    #[test]
    fn the_clock_on_the_left_an_offset_and_two_conditions_are_read() {
        let next = read(
            "SELECT j.id FROM job j WHERE NOW() - INTERVAL 5 MINUTE > j.created_at \
             AND UTC_TIMESTAMP(3) >= j.run_at",
        );
        assert_eq!(next.conditions.len(), 2);
        assert!(next.conditions[0].strict && !next.conditions[1].strict);
        assert!(
            next.sql.contains(
                "TIMESTAMPDIFF(MICROSECOND, NOW(6) - INTERVAL 5 MINUTE, MIN(j.created_at)) \
                 FROM job j WHERE (TRUE AND TRUE) AND (j.created_at) >= (NOW() - INTERVAL 5 MINUTE)"
            ),
            "{}",
            next.sql
        );
        let per_row = read("SELECT id FROM job WHERE sent_at <= NOW() - INTERVAL delay SECOND");
        assert!(
            per_row.sql.contains(
                "MIN(TIMESTAMPDIFF(MICROSECOND, NOW(6) - INTERVAL delay SECOND, sent_at))"
            ),
            "{}",
            per_row.sql
        );
    }

    #[test]
    fn the_question_leaves_the_claims_index_hint_to_the_optimizer() {
        let next = read(
            "SELECT id FROM email FORCE INDEX (status_id) WHERE status = 'waiting' \
             AND (retry_at IS NULL OR retry_at <= UNIX_TIMESTAMP()) ORDER BY id",
        );
        assert!(
            next.sql.contains("FROM email  WHERE (status"),
            "{}",
            next.sql
        );
        let join = read(
            "SELECT e.id FROM email e USE INDEX FOR ORDER BY (PRIMARY) JOIN t ON t.id = e.t \
             WHERE e.send_after <= NOW()",
        );
        assert!(
            join.sql
                .contains("FROM email e  JOIN t ON t.id = e.t WHERE"),
            "{}",
            join.sql
        );
    }

    #[test]
    fn a_select_whose_clock_decides_nothing_or_only_takes_rows_out_is_timeless() {
        for select in [
            "SELECT id FROM job WHERE state = 'new'",
            "SELECT id, NOW() AS seen FROM job WHERE state = 'new' ORDER BY id",
            "SELECT id FROM job WHERE state = 'new' AND expires_at > NOW()",
            "SELECT id FROM job WHERE UNIX_TIMESTAMP(created_at) > 5",
        ] {
            assert_eq!(due_times(select), DueTimes::Timeless, "{select}");
        }
    }

    #[test]
    fn a_clock_where_it_cannot_be_read_is_said() {
        let why = unread("SELECT id FROM job WHERE NOT (run_at <= NOW())");
        assert!(why.contains("NOT (run_at <= NOW())"), "{why}");
        for select in [
            "SELECT id FROM job WHERE run_at BETWEEN NOW() - INTERVAL 1 DAY AND NOW()",
            "SELECT id FROM job WHERE DATE(run_at) = CURDATE()",
            "SELECT id FROM job WHERE NOT EXISTS (SELECT 1 FROM hold WHERE hold.until > NOW())",
            "SELECT j.id FROM job j JOIN slot s ON s.at <= NOW() WHERE j.state = 'new'",
            "WITH w AS (SELECT id FROM job WHERE run_at <= NOW()) SELECT id FROM w",
            "SELECT id FROM job WHERE run_at <= NOW() GROUP BY id",
            "SELECT id FROM job WHERE CASE WHEN a THEN run_at <= NOW() ELSE 0 END",
        ] {
            unread(select);
        }
    }

    #[test]
    fn the_wait_follows_the_clock_as_the_select_reads_it() {
        let condition = |strict, precision| DueCondition {
            text: String::new(),
            strict,
            precision,
        };
        let ms = Duration::from_millis;
        // 300 ms into a second, a row due 1.2 s from now (at 1.5 s): `<= NOW()` sees
        // it at 2 s, `< NOW()` at 2 s too, `<= NOW(3)` at 1.5 s, `< NOW(3)` 1 ms later.
        assert_eq!(condition(false, 0).wait(300_000, 1_200_000), ms(1700));
        assert_eq!(condition(true, 0).wait(300_000, 1_200_000), ms(1700));
        assert_eq!(condition(false, 3).wait(300_000, 1_200_000), ms(1200));
        assert_eq!(condition(true, 3).wait(300_000, 1_200_000), ms(1201));
        // Due on a whole second: `<=` then, `<` a second later.
        assert_eq!(condition(false, 0).wait(300_000, 700_000), ms(700));
        assert_eq!(condition(true, 0).wait(300_000, 700_000), ms(1700));
        assert_eq!(condition(false, 0).wait(300_000, -200_000), ms(700));
    }
}

#[cfg(test)]
mod shipped {
    use super::*;

    /// Every shipped queue file whose select reads the clock has it read: their
    /// retries and leases are claimed on time.
    #[test]
    fn the_shipped_queue_files_selects_are_read() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut read = 0;
        for dir in ["config", "compose", "kubernetes/queues.d"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_none_or(|e| e != "toml") {
                    continue;
                }
                let file: toml::Value = toml::from_str(&std::fs::read_to_string(&path).unwrap())
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let Some(select) = file.get("select").and_then(|s| s.as_str()) else {
                    continue;
                };
                match due_times(select) {
                    DueTimes::Unread { why } => panic!("{}: {why}", path.display()),
                    DueTimes::Read(_) => read += 1,
                    DueTimes::Timeless => {}
                }
            }
        }
        assert!(read >= 5, "{read} selects read");
    }
}
