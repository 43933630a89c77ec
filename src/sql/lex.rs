//! The one lexer for the user's SQL: words, quoted names, literals, `:params` and
//! punctuation, never looking inside string literals, quoted identifiers or
//! comments — and helpers to find top-level clauses and split them.
//!
//! tableq never splices a value into SQL. It rewrites `:name` to `?` and binds the
//! values positionally, so it has to know exactly where the parameters are: every
//! piece comes with the byte range it covers ([`spans`]).

use std::ops::Range;

/// One lexical piece, as much as the readers need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lex {
    /// A bare word (keyword or identifier), as written; `@x` keeps its `@`.
    Word(String),
    /// A `quoted` identifier, unquoted.
    Name(String),
    /// A string or number.
    Literal,
    /// `:name`.
    Param(String),
    /// An operator or punctuation: `.`, `,`, `(`, `)`, `*`, `=`, `<=>`, `;`, `?`, …;
    /// `""` for a character that is none of these.
    Punct(&'static str),
}

const OPERATORS: &[&str] = &[
    "<=>", "->>", "<=", ">=", "<>", "!=", ":=", "||", "&&", "->", ".", ",", "(", ")", "*", "=",
    "<", ">", "+", "-", "/", "%", "!", "~", "^", "&", "|", ";", "?", ":",
];

/// The pieces of `sql`, as [`spans`] without their ranges.
pub fn lex(sql: &str) -> Vec<Lex> {
    spans(sql).into_iter().map(|(lex, _)| lex).collect()
}

/// The pieces of `sql` with the byte range each covers; comments and whitespace
/// are skipped.
pub fn spans(sql: &str) -> Vec<(Lex, Range<usize>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < sql.len() {
        let (lex, end) = piece_at(sql, i);
        if let Some(lex) = lex {
            out.push((lex, i..end));
        }
        i = end.max(i + 1);
    }
    out
}

/// The piece that starts at byte `i` (`None` for a comment or whitespace), and
/// where it ends.
fn piece_at(sql: &str, i: usize) -> (Option<Lex>, usize) {
    let bytes = sql.as_bytes();
    let c = bytes[i];
    match c {
        b'`' => {
            let end = skip_quoted(bytes, i);
            let inner = &sql[i + 1..end.saturating_sub(1).max(i + 1)];
            (Some(Lex::Name(inner.replace("``", "`"))), end)
        }
        b'\'' | b'"' => (Some(Lex::Literal), skip_quoted(bytes, i)),
        b'#' => (None, skip_line(bytes, i)),
        b'-' if bytes.get(i + 1) == Some(&b'-')
            && bytes.get(i + 2).is_none_or(|b| b.is_ascii_whitespace()) =>
        {
            (None, skip_line(bytes, i))
        }
        b'/' if bytes.get(i + 1) == Some(&b'*') => (None, skip_block_comment(bytes, i)),
        b':' if bytes.get(i + 1).is_some_and(|b| is_word_start(*b)) => {
            let end = word_end(bytes, i + 1);
            (Some(Lex::Param(sql[i + 1..end].to_string())), end)
        }
        b'@' => {
            let name = i + bytes[i..].iter().take_while(|b| **b == b'@').count();
            let end = word_end(bytes, name).max(i + 1);
            (Some(Lex::Word(sql[i..end].to_string())), end)
        }
        b'0'..=b'9' => {
            let length = bytes[i..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'.')
                .count();
            (Some(Lex::Literal), i + length)
        }
        _ if is_word_start(c) => {
            let end = word_end(bytes, i);
            (Some(Lex::Word(sql[i..end].to_string())), end)
        }
        _ if c.is_ascii_whitespace() => (None, i + 1),
        _ => {
            let op = OPERATORS
                .iter()
                .find(|op| sql[i..].starts_with(**op))
                .copied()
                .unwrap_or("");
            // An unknown character: step over the whole of it, UTF-8 included.
            let width = sql[i..].chars().next().map_or(1, char::len_utf8);
            (Some(Lex::Punct(op)), i + op.len().max(width))
        }
    }
}

pub fn is_kw(lex: &Lex, keyword: &str) -> bool {
    matches!(lex, Lex::Word(w) if w.eq_ignore_ascii_case(keyword))
}

pub fn is_any_kw(lex: &Lex, keywords: &[&str]) -> bool {
    keywords.iter().any(|k| is_kw(lex, k))
}

/// An identifier: a bare word (not a variable) or a quoted name.
pub fn ident(lex: &Lex) -> Option<String> {
    match lex {
        Lex::Word(w) if !w.starts_with('@') => Some(w.clone()),
        Lex::Name(n) => Some(n.clone()),
        _ => None,
    }
}

/// `col`, `t.col` or `db.t.col`: the column's name.
pub fn column_ref(lexes: &[Lex]) -> Option<String> {
    qualified_column_ref(lexes).map(|(_, name)| name)
}

/// `col`, `t.col` or `db.t.col`: the table (or alias) it is qualified with, if any,
/// and the column's name.
pub fn qualified_column_ref(lexes: &[Lex]) -> Option<(Option<String>, String)> {
    match lexes {
        [col] => Some((None, ident(col)?)),
        [t, Lex::Punct("."), col] => Some((Some(ident(t)?), ident(col)?)),
        [d, Lex::Punct("."), t, Lex::Punct("."), col] => {
            ident(d)?;
            Some((Some(ident(t)?), ident(col)?))
        }
        _ => None,
    }
}

/// Pieces of `lexes` between top-level separators (`is_sep` outside parentheses).
pub fn split_top(lexes: &[Lex], is_sep: impl Fn(&Lex) -> bool) -> Vec<&[Lex]> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, lex) in lexes.iter().enumerate() {
        match lex {
            Lex::Punct("(") => depth += 1,
            Lex::Punct(")") => depth = depth.saturating_sub(1),
            _ if depth == 0 && is_sep(lex) => {
                parts.push(&lexes[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&lexes[start..]);
    parts
}

/// The position of the first top-level `keywords` sequence at or after `from`.
pub fn find_top(lexes: &[Lex], from: usize, keywords: &[&str]) -> Option<usize> {
    let mut depth = 0usize;
    for i in 0..lexes.len() {
        match &lexes[i] {
            Lex::Punct("(") => depth += 1,
            Lex::Punct(")") => depth = depth.saturating_sub(1),
            _ if depth == 0 && i >= from => {
                let matches = keywords
                    .iter()
                    .enumerate()
                    .all(|(k, kw)| lexes.get(i + k).is_some_and(|l| is_kw(l, kw)));
                if matches {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The keywords that end a select's WHERE clause (and its FROM clause, with WHERE).
pub const AFTER_WHERE: &[&str] = &["GROUP", "HAVING", "WINDOW", "ORDER", "LIMIT", "FOR", "LOCK"];

/// The top-level clause that starts with `keywords`, up to the next of `ends`.
pub fn clause<'a>(lexes: &'a [Lex], keywords: &[&str], ends: &[&str]) -> Option<&'a [Lex]> {
    let start = find_top(lexes, 0, keywords)? + keywords.len();
    let end = ends
        .iter()
        .filter_map(|end| find_top(lexes, start, &[end]))
        .min()
        .unwrap_or(lexes.len());
    Some(&lexes[start..end])
}

/// True if `sql` holds anything besides whitespace and comments.
pub fn has_code(sql: &str) -> bool {
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

fn is_word_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

fn word_end(bytes: &[u8], mut i: usize) -> usize {
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
fn skip_quoted(bytes: &[u8], start: usize) -> usize {
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

fn skip_line(bytes: &[u8], start: usize) -> usize {
    bytes[start..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |p| start + p + 1)
}

fn skip_block_comment(bytes: &[u8], start: usize) -> usize {
    bytes[start + 2..]
        .windows(2)
        .position(|w| w == b"*/")
        .map_or(bytes.len(), |p| start + 2 + p + 2)
}

/// `name` as a quoted identifier: in backticks, a backtick doubled.
pub fn quote_identifier(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}
