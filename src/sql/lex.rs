//! The small lexer the readers of [`super`] share: words, quoted names, literals,
//! `:params` and punctuation, with comments skipped, and helpers to find top-level
//! clauses and split them.

use crate::sql::statement::{is_word_start, skip_block_comment, skip_line, skip_quoted, word_end};

/// One lexical piece, as much as the readers need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Lex {
    /// A bare word (keyword or identifier), as written; `@x` keeps its `@`.
    Word(String),
    /// A `quoted` identifier, unquoted.
    Name(String),
    /// A string or number.
    Literal,
    /// `:name`.
    Param(String),
    /// An operator or punctuation: `.`, `,`, `(`, `)`, `*`, `=`, `<=>`, …
    Punct(&'static str),
}

const OPERATORS: &[&str] = &[
    "<=>", "->>", "<=", ">=", "<>", "!=", ":=", "||", "&&", "->", ".", ",", "(", ")", "*", "=",
    "<", ">", "+", "-", "/", "%", "!", "~", "^", "&", "|", ";", "?", ":",
];

pub(super) fn lex(sql: &str) -> Vec<Lex> {
    let bytes = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'`' => {
                let end = skip_quoted(bytes, i);
                let inner = &sql[i + 1..end.saturating_sub(1).max(i + 1)];
                out.push(Lex::Name(inner.replace("``", "`")));
                i = end;
            }
            b'\'' | b'"' => {
                out.push(Lex::Literal);
                i = skip_quoted(bytes, i);
            }
            b'#' => i = skip_line(bytes, i),
            b'-' if bytes.get(i + 1) == Some(&b'-')
                && bytes.get(i + 2).is_none_or(|b| b.is_ascii_whitespace()) =>
            {
                i = skip_line(bytes, i)
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => i = skip_block_comment(bytes, i),
            b':' if bytes.get(i + 1).is_some_and(|b| is_word_start(*b)) => {
                let end = word_end(bytes, i + 1);
                out.push(Lex::Param(sql[i + 1..end].to_string()));
                i = end;
            }
            b'@' => {
                let mut name = i;
                while bytes.get(name) == Some(&b'@') {
                    name += 1;
                }
                let end = word_end(bytes, name).max(i + 1);
                out.push(Lex::Word(sql[i..end].to_string()));
                i = end;
            }
            b'0'..=b'9' => {
                let mut end = i;
                while end < bytes.len()
                    && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'.')
                {
                    end += 1;
                }
                out.push(Lex::Literal);
                i = end;
            }
            _ if is_word_start(c) => {
                let end = word_end(bytes, i);
                out.push(Lex::Word(sql[i..end].to_string()));
                i = end;
            }
            _ if c.is_ascii_whitespace() => i += 1,
            _ => {
                let op = OPERATORS
                    .iter()
                    .find(|op| sql[i..].starts_with(**op))
                    .copied()
                    .unwrap_or("?");
                out.push(Lex::Punct(op));
                i += op.len().max(1);
            }
        }
    }
    out
}

pub(super) fn is_kw(lex: &Lex, keyword: &str) -> bool {
    matches!(lex, Lex::Word(w) if w.eq_ignore_ascii_case(keyword))
}

pub(super) fn is_any_kw(lex: &Lex, keywords: &[&str]) -> bool {
    keywords.iter().any(|k| is_kw(lex, k))
}

/// An identifier: a bare word (not a variable) or a quoted name.
pub(super) fn ident(lex: &Lex) -> Option<String> {
    match lex {
        Lex::Word(w) if !w.starts_with('@') => Some(w.clone()),
        Lex::Name(n) => Some(n.clone()),
        _ => None,
    }
}

/// `col`, `t.col` or `db.t.col`: the column's name.
pub(super) fn column_ref(lexes: &[Lex]) -> Option<String> {
    qualified_column_ref(lexes).map(|(_, name)| name)
}

/// `col`, `t.col` or `db.t.col`: the table (or alias) it is qualified with, if any,
/// and the column's name.
pub(super) fn qualified_column_ref(lexes: &[Lex]) -> Option<(Option<String>, String)> {
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
pub(super) fn split_top(lexes: &[Lex], is_sep: impl Fn(&Lex) -> bool) -> Vec<&[Lex]> {
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
pub(super) fn find_top(lexes: &[Lex], from: usize, keywords: &[&str]) -> Option<usize> {
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

/// The top-level clause that starts with `keywords`, up to the next of `ends`.
pub(super) fn clause<'a>(lexes: &'a [Lex], keywords: &[&str], ends: &[&str]) -> Option<&'a [Lex]> {
    let start = find_top(lexes, 0, keywords)? + keywords.len();
    let end = ends
        .iter()
        .filter_map(|end| find_top(lexes, start, &[end]))
        .min()
        .unwrap_or(lexes.len());
    Some(&lexes[start..end])
}
