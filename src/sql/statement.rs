//! One statement of the user's: read with [`super::lex`], its `:name` parameters
//! found and rewritten to `?`, and the few questions about it that a clause check
//! asks (its first word, its top-level words, what a `SET` assigns).

use super::lex::{has_code, lex, spans, Lex};

/// A statement with its `:name` parameters rewritten to `?`, ready to prepare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedStatement {
    /// The statement as the user wrote it (trimmed, without a trailing `;`).
    pub text: String,
    /// The same statement with every `:name` replaced by `?`.
    pub positional: String,
    /// The parameter names in the order of the `?`s; a name may repeat.
    pub params: Vec<String>,
}

/// Why a piece of SQL cannot be used as one tableq statement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatementError {
    #[error("the statement is empty")]
    Empty,
    #[error("it holds more than one statement; give each its own entry in an array")]
    Several,
    #[error("it uses `?` placeholders; name the value instead, as `:column`")]
    Positional,
}

/// Reads one statement: strips whitespace and one trailing `;`, finds its parameters.
pub fn parse_statement(sql: &str) -> Result<ParsedStatement, StatementError> {
    let text = strip_trailing_semicolon(sql.trim());
    let pieces = spans(text);
    if pieces.is_empty() {
        return Err(StatementError::Empty);
    }
    if pieces.iter().any(|(lex, _)| *lex == Lex::Punct(";")) {
        return Err(StatementError::Several);
    }
    if pieces.iter().any(|(lex, _)| *lex == Lex::Punct("?")) {
        return Err(StatementError::Positional);
    }
    let mut positional = String::with_capacity(text.len());
    let mut params = Vec::new();
    let mut copied = 0;
    for (lex, range) in pieces {
        if let Lex::Param(name) = lex {
            positional.push_str(&text[copied..range.start]);
            positional.push('?');
            params.push(name);
            copied = range.end;
        }
    }
    positional.push_str(&text[copied..]);
    Ok(ParsedStatement {
        text: text.to_string(),
        positional,
        params,
    })
}

fn strip_trailing_semicolon(text: &str) -> &str {
    // Only a `;` that the lexer sees as code counts (not one inside a comment), and
    // only if nothing but space and comments follow it.
    match spans(text).last() {
        Some((Lex::Punct(";"), range)) if !has_code(&text[range.end..]) => {
            text[..range.start].trim_end()
        }
        _ => text,
    }
}

/// The bare words outside any parentheses, upper-cased, in order: what a clause
/// check (`LIMIT`, `FOR UPDATE`) needs, blind to subqueries.
pub fn top_level_words(sql: &str) -> Vec<String> {
    let mut depth = 0usize;
    let mut words = Vec::new();
    for piece in lex(sql) {
        match piece {
            Lex::Punct("(") => depth += 1,
            Lex::Punct(")") => depth = depth.saturating_sub(1),
            Lex::Word(w) if depth == 0 => words.push(w.to_ascii_uppercase()),
            _ => {}
        }
    }
    words
}

/// For a `SET` statement: true if every assignment is to a user variable (`@x`), so
/// the statement cannot change the session tableq depends on.
pub fn sets_only_user_variables(sql: &str) -> bool {
    let mut depth = 0usize;
    let mut expect_target = true;
    for piece in lex(sql).iter().skip(1) {
        match piece {
            Lex::Punct("(") => depth += 1,
            Lex::Punct(")") => depth = depth.saturating_sub(1),
            Lex::Punct(",") if depth == 0 => expect_target = true,
            Lex::Word(w) if expect_target => {
                if !w.starts_with('@') || w.starts_with("@@") {
                    return false;
                }
                expect_target = false;
            }
            // A quoted name is a system variable: SET `autocommit` = 1.
            Lex::Name(_) if expect_target => return false,
            _ => expect_target = false,
        }
    }
    true
}

/// `text` with every `:name` parameter written in as `literal(name)`: for a client
/// that cannot bind parameters (KEDA's MySQL scaler, via `tableq count --print-sql`).
/// tableq itself never runs such a statement; it binds.
pub fn with_parameters_written_in(text: &str, literal: &dyn Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for (lex, range) in spans(text) {
        if let Lex::Param(name) = lex {
            out.push_str(&text[copied..range.start]);
            out.push_str(&literal(&name));
            copied = range.end;
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// A string literal of `value` for MySQL and MariaDB, in either SQL mode
/// (`NO_BACKSLASH_ESCAPES` or not): no backslash, quote doubled.
pub fn string_literal(value: &str) -> Option<String> {
    (!value.contains('\\')).then(|| format!("'{}'", value.replace('\'', "''")))
}

/// Whether a statement can never commit, not even implicitly: a read or a change of
/// rows (`SELECT`, `INSERT`, `UPDATE`, `DELETE`, `REPLACE`, `DO`, `WITH`, `VALUES`,
/// `TABLE`) — neither a trigger nor a stored function may commit — or a `SET` of
/// user variables. Anything else (DDL, `LOCK TABLES`, `COMMIT`, `BEGIN`, `CALL` of
/// a procedure that may commit, `SET autocommit`) may.
pub fn never_commits(sql: &str) -> bool {
    match first_word(sql).as_deref() {
        Some("SELECT" | "INSERT" | "UPDATE" | "DELETE" | "REPLACE" | "DO" | "WITH" | "VALUES")
        | Some("TABLE") => true,
        Some("SET") => sets_only_user_variables(sql),
        _ => false,
    }
}

/// The first word of a statement, upper-cased (`SELECT`, `UPDATE`, …).
pub fn first_word(sql: &str) -> Option<String> {
    lex(sql).into_iter().find_map(|piece| match piece {
        Lex::Word(w) => Some(w.to_ascii_uppercase()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knows_which_statements_never_commit() {
        for never in [
            "UPDATE job SET state = 'done' WHERE id = :id",
            "insert into log select 1",
            "/* c */ DELETE FROM job",
            "WITH x AS (SELECT 1) UPDATE job SET a = 1",
            "SET @n = 1",
            "DO SLEEP(0)",
        ] {
            assert!(never_commits(never), "{never}");
        }
        for may in [
            "COMMIT",
            "CREATE TABLE t (a INT)",
            "CALL send(:id)",
            "SET autocommit = 1",
            "TRUNCATE job",
            "LOCK TABLES job WRITE",
            "BEGIN",
        ] {
            assert!(!never_commits(may), "{may}");
        }
    }

    #[test]
    fn rewrites_named_parameters_in_order() {
        let s = parse_statement("UPDATE t SET a = :a, b = :userId WHERE id = :id;").unwrap();
        assert_eq!(s.positional, "UPDATE t SET a = ?, b = ? WHERE id = ?");
        assert_eq!(s.params, ["a", "userId", "id"]);
        assert_eq!(s.text, "UPDATE t SET a = :a, b = :userId WHERE id = :id");
    }

    #[test]
    fn ignores_colons_in_strings_comments_and_identifiers() {
        let sql = "SELECT ':no', \"x:no\", `c:no` -- :no\n, TIME '10:30' # :no\n /* :no */ FROM t WHERE a = :yes";
        let s = parse_statement(sql).unwrap();
        assert_eq!(s.params, ["yes"]);
        assert!(s.positional.contains("':no'"));
    }

    #[test]
    fn handles_escapes_and_doubled_quotes() {
        let s = parse_statement(r"SELECT 'it''s :no', 'a\':no' FROM t WHERE b = :b").unwrap();
        assert_eq!(s.params, ["b"]);
    }

    #[test]
    fn writes_parameters_in_but_not_lookalikes() {
        let sql = "SELECT id FROM jobs WHERE queue = :queue AND note <> ':queue' -- :queue\n";
        let written = with_parameters_written_in(sql, &|name| format!("'{name}!'"));
        assert_eq!(
            written,
            "SELECT id FROM jobs WHERE queue = 'queue!' AND note <> ':queue' -- :queue\n"
        );
        assert_eq!(string_literal("it's").as_deref(), Some("'it''s'"));
        assert_eq!(string_literal("a\\b"), None);
    }

    #[test]
    fn assignment_and_casts_are_not_parameters() {
        let s = parse_statement("SET @x := 1").unwrap();
        assert!(s.params.is_empty());
    }

    #[test]
    fn rejects_several_statements_and_positional_placeholders() {
        assert_eq!(
            parse_statement("DELETE FROM a; DELETE FROM b"),
            Err(StatementError::Several)
        );
        assert_eq!(
            parse_statement("DELETE FROM a WHERE id = ?"),
            Err(StatementError::Positional)
        );
        assert_eq!(parse_statement("  ;  "), Err(StatementError::Empty));
        assert_eq!(
            parse_statement("-- only a comment"),
            Err(StatementError::Empty)
        );
        assert_eq!(parse_statement("   "), Err(StatementError::Empty));
        assert!(parse_statement("SELECT ';' -- ;\n").is_ok());
        assert_eq!(
            parse_statement("SELECT 1; -- done 2").unwrap().text,
            "SELECT 1"
        );
        assert_eq!(
            parse_statement("SELECT 1; 'x'"),
            Err(StatementError::Several)
        );
    }

    #[test]
    fn tells_user_variables_from_session_settings() {
        assert!(sets_only_user_variables("SET @a = 1, @b = (SELECT 1, 2)"));
        assert!(!sets_only_user_variables(
            "SET @a = 1, tx_isolation = 'REPEATABLE-READ'"
        ));
        assert!(!sets_only_user_variables(
            "SET SESSION completion_type = 'RELEASE'"
        ));
        assert!(!sets_only_user_variables(
            "SET @@session.transaction_isolation = 'SERIALIZABLE'"
        ));
        assert!(!sets_only_user_variables("SET NAMES latin1"));
        assert!(!sets_only_user_variables("SET `autocommit` = 1"));
    }

    #[test]
    fn top_level_words_skip_subqueries() {
        let w =
            top_level_words("SELECT id FROM t WHERE id IN (SELECT id FROM u LIMIT 1) ORDER BY id");
        assert!(!w.contains(&"LIMIT".to_string()));
        assert!(w.contains(&"ORDER".to_string()));
        assert_eq!(first_word("  select 1"), Some("SELECT".into()));
    }
}
