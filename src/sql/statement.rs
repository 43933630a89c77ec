//! Just enough of MySQL's lexical structure to read a user's SQL safely: named
//! `:parameters`, top-level keywords and statement ends, without ever looking inside
//! string literals, quoted identifiers or comments.
//!
//! tableq never splices a value into SQL. It rewrites `:name` to `?` and binds the
//! values positionally, so it has to know exactly where the parameters are.

/// One lexical piece of a statement that matters to tableq.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token<'a> {
    /// A bare word (keyword or identifier), as written; user and system variables
    /// (`@x`, `@@session.x`) keep their `@`s.
    Word(&'a str),
    Comma,
    /// `:name`; the name without the colon. `start..end` covers the colon too.
    Param {
        name: &'a str,
        start: usize,
        end: usize,
    },
    /// A `?` placeholder.
    Question,
    Open,
    Close,
    /// `;`, with the byte offset just after it.
    Semicolon(usize),
}

/// Splits `sql` into the tokens tableq cares about; strings, quoted identifiers and
/// comments are skipped whole. Anything else (numbers, operators) is dropped.
pub fn tokens(sql: &str) -> Vec<Token<'_>> {
    let bytes = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'\'' | b'"' | b'`' => i = skip_quoted(bytes, i),
            b'#' => i = skip_line(bytes, i),
            b'-' if bytes.get(i + 1) == Some(&b'-')
                && bytes.get(i + 2).is_none_or(|b| b.is_ascii_whitespace()) =>
            {
                i = skip_line(bytes, i)
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => i = skip_block_comment(bytes, i),
            b':' if bytes.get(i + 1).is_some_and(|b| is_word_start(*b)) => {
                let end = word_end(bytes, i + 1);
                out.push(Token::Param {
                    name: &sql[i + 1..end],
                    start: i,
                    end,
                });
                i = end;
            }
            b'?' => {
                out.push(Token::Question);
                i += 1;
            }
            b',' => {
                out.push(Token::Comma);
                i += 1;
            }
            b'@' => {
                let mut start_of_name = i;
                while bytes.get(start_of_name) == Some(&b'@') {
                    start_of_name += 1;
                }
                let end = word_end(bytes, start_of_name);
                out.push(Token::Word(&sql[i..end]));
                i = end.max(i + 1);
            }
            b'(' => {
                out.push(Token::Open);
                i += 1;
            }
            b')' => {
                out.push(Token::Close);
                i += 1;
            }
            b';' => {
                out.push(Token::Semicolon(i + 1));
                i += 1;
            }
            _ if is_word_start(c) => {
                let end = word_end(bytes, i);
                out.push(Token::Word(&sql[i..end]));
                i = end;
            }
            b'0'..=b'9' | b'$' => i = word_end(bytes, i),
            _ => i += 1,
        }
    }
    out
}

/// True if `sql` holds anything besides whitespace and comments.
fn has_code(sql: &str) -> bool {
    let bytes = sql.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'#' => i = skip_line(bytes, i),
            b'-' if bytes.get(i + 1) == Some(&b'-')
                && bytes.get(i + 2).is_none_or(|b| b.is_ascii_whitespace()) =>
            {
                i = skip_line(bytes, i)
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => i = skip_block_comment(bytes, i),
            b if b.is_ascii_whitespace() => i += 1,
            _ => return true,
        }
    }
    false
}

pub(crate) fn is_word_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

pub(crate) fn word_end(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len()
        && (bytes[i].is_ascii_alphanumeric()
            || bytes[i] == b'_'
            || bytes[i] == b'$'
            || bytes[i] >= 0x80)
    {
        i += 1;
    }
    i
}

/// Skips a '…', "…" or `…` run; a doubled quote or (outside backticks) a backslash
/// escapes. Returns the offset just past the closing quote, or the end of input.
pub(crate) fn skip_quoted(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if quote != b'`' => i += 2,
            b if b == quote => {
                if bytes.get(i + 1) == Some(&quote) {
                    i += 2;
                } else {
                    return i + 1;
                }
            }
            _ => i += 1,
        }
    }
    bytes.len()
}

pub(crate) fn skip_line(bytes: &[u8], start: usize) -> usize {
    bytes[start..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |p| start + p + 1)
}

pub(crate) fn skip_block_comment(bytes: &[u8], start: usize) -> usize {
    bytes[start + 2..]
        .windows(2)
        .position(|w| w == b"*/")
        .map_or(bytes.len(), |p| start + 2 + p + 2)
}

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
    let toks = tokens(text);
    if toks.is_empty() {
        return Err(StatementError::Empty);
    }
    if toks.iter().any(|t| matches!(t, Token::Semicolon(_))) {
        return Err(StatementError::Several);
    }
    if toks.iter().any(|t| matches!(t, Token::Question)) {
        return Err(StatementError::Positional);
    }
    let mut positional = String::with_capacity(text.len());
    let mut params = Vec::new();
    let mut copied = 0;
    for tok in &toks {
        if let Token::Param { name, start, end } = tok {
            positional.push_str(&text[copied..*start]);
            positional.push('?');
            params.push((*name).to_string());
            copied = *end;
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
    match tokens(text).last() {
        Some(Token::Semicolon(end)) => {
            let rest = &text[*end..];
            if !has_code(rest) {
                text[..*end - 1].trim_end()
            } else {
                text
            }
        }
        _ => text,
    }
}

/// The bare words outside any parentheses, upper-cased, in order: what a clause
/// check (`LIMIT`, `FOR UPDATE`) needs, blind to subqueries.
pub fn top_level_words(sql: &str) -> Vec<String> {
    let mut depth = 0usize;
    let mut words = Vec::new();
    for tok in tokens(sql) {
        match tok {
            Token::Open => depth += 1,
            Token::Close => depth = depth.saturating_sub(1),
            Token::Word(w) if depth == 0 => words.push(w.to_ascii_uppercase()),
            _ => {}
        }
    }
    words
}

/// For a `SET` statement: true if every assignment is to a user variable (`@x`), so
/// the statement cannot change the session tableq depends on.
pub fn sets_only_user_variables(sql: &str) -> bool {
    let toks = tokens(sql);
    let mut depth = 0usize;
    let mut expect_target = true;
    for tok in toks.iter().skip(1) {
        match tok {
            Token::Open => depth += 1,
            Token::Close => depth = depth.saturating_sub(1),
            Token::Comma if depth == 0 => expect_target = true,
            Token::Word(w) if expect_target => {
                if !w.starts_with('@') || w.starts_with("@@") {
                    return false;
                }
                expect_target = false;
            }
            _ => expect_target = false,
        }
    }
    true
}

/// The first word of a statement, upper-cased (`SELECT`, `UPDATE`, …).
pub fn first_word(sql: &str) -> Option<String> {
    tokens(sql).into_iter().find_map(|t| match t {
        Token::Word(w) => Some(w.to_ascii_uppercase()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
