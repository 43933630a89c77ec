//! Text with `{column}` placeholders (URLs, headers, command arguments), and with
//! `${ENV}` replaced from the environment when the queue file is loaded.
//!
//! `{{` and `}}` are literal braces, `$$` a literal `$`. A placeholder names a column
//! of the select, or `queue`.

use std::fmt;

use crate::config::value::interpolate::{expand, Files};
use crate::config::InterpolateError;

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Literal(String),
    Placeholder(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub parts: Vec<Part>,
}

/// Why a template cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error(transparent)]
    Env(#[from] InterpolateError),
    #[error("`{{` is not closed by `}}` (write `{{{{` for a literal `{{`)")]
    Unclosed,
    #[error("`{{{0}}}` is not a placeholder: name a column, e.g. {{id}}")]
    BadName(String),
    #[error("a lone `}}` (write `}}}}` for a literal `}}`)")]
    LoneClose,
}

impl Template {
    /// Reads `text`, replacing `${NAME}` from `env` as it goes.
    pub fn parse(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Template, TemplateError> {
        Template::parse_with(text, env, Files::Refuse)
    }

    /// Like [`Template::parse`], for a value that may hold a secret (a header):
    /// `${file:/PATH}` is replaced by the file's text too.
    pub fn parse_secret(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Template, TemplateError> {
        Template::parse_with(text, env, Files::Read)
    }

    fn parse_with(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
        files: Files,
    ) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut chars = text.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            match c {
                '$' if matches!(chars.peek(), Some((_, '{' | '$'))) => {
                    let end = if chars.peek().map(|p| p.1) == Some('$') {
                        at + 2
                    } else {
                        text[at..]
                            .find('}')
                            .map(|i| at + i + 1)
                            .ok_or(InterpolateError::Unclosed)?
                    };
                    literal.push_str(&expand(&text[at..end], env, files)?);
                    while chars.peek().is_some_and(|(i, _)| *i < end) {
                        chars.next();
                    }
                }
                '{' if chars.peek().map(|p| p.1) == Some('{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek().map(|p| p.1) == Some('}') => {
                    chars.next();
                    literal.push('}');
                }
                '}' => return Err(TemplateError::LoneClose),
                '{' => {
                    let end = text[at..]
                        .find('}')
                        .map(|i| at + i)
                        .ok_or(TemplateError::Unclosed)?;
                    let name = &text[at + 1..end];
                    let valid = !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_alphanumeric() || c == '_' || c == '$');
                    if !valid {
                        return Err(TemplateError::BadName(name.to_string()));
                    }
                    if !literal.is_empty() {
                        parts.push(Part::Literal(std::mem::take(&mut literal)));
                    }
                    parts.push(Part::Placeholder(name.to_string()));
                    while chars.peek().is_some_and(|(i, _)| *i <= end) {
                        chars.next();
                    }
                }
                other => literal.push(other),
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        Ok(Template { parts })
    }

    /// The placeholder names, in order.
    pub fn placeholders(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Placeholder(name) => Some(name.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// The literal text, if the template has no placeholders.
    pub fn as_literal(&self) -> Option<String> {
        let mut text = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(l) => text.push_str(l),
                Part::Placeholder(_) => return None,
            }
        }
        Some(text)
    }

    /// Renders the template: `value(name)` gives each placeholder's bytes, and
    /// `encode(index, bytes)` may transform the placeholder at part `index`.
    pub fn render(
        &self,
        value: &dyn Fn(&str) -> Vec<u8>,
        encode: &dyn Fn(usize, Vec<u8>) -> Vec<u8>,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        for (index, part) in self.parts.iter().enumerate() {
            match part {
                Part::Literal(l) => out.extend_from_slice(l.as_bytes()),
                Part::Placeholder(name) => out.extend(encode(index, value(name))),
            }
        }
        out
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.parts {
            match part {
                Part::Literal(l) => write!(f, "{}", l.replace('{', "{{").replace('}', "}}"))?,
                Part::Placeholder(name) => write!(f, "{{{name}}}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cr{et}".to_string())
    }

    #[test]
    fn splits_placeholders_and_replaces_the_environment() {
        let t = Template::parse(
            "https://{host}/hooks/{id}?t=${TOKEN}&x={{y}}&cost=$$5",
            &env,
        )
        .unwrap();
        assert_eq!(
            t.parts,
            vec![
                Part::Literal("https://".into()),
                Part::Placeholder("host".into()),
                Part::Literal("/hooks/".into()),
                Part::Placeholder("id".into()),
                Part::Literal("?t=s3cr{et}&x={y}&cost=$5".into()),
            ]
        );
        assert_eq!(t.placeholders().collect::<Vec<_>>(), ["host", "id"]);
        let rendered = t.render(&|name| name.to_uppercase().into_bytes(), &|_, v| v);
        assert_eq!(rendered, b"https://HOST/hooks/ID?t=s3cr{et}&x={y}&cost=$5");
    }

    /// The queue file reference's example: doubled braces are the braces of a JSON
    /// body around a placeholder.
    #[test]
    fn doubled_braces_are_literal_braces() {
        let t = Template::parse("{{\"order\": {id}}}", &env).unwrap();
        let rendered = t.render(&|_| b"42".to_vec(), &|_, v| v);
        assert_eq!(rendered, br#"{"order": 42}"#);
        assert_eq!(
            Template::parse("{a-b}", &env),
            Err(TemplateError::BadName("a-b".into()))
        );
        assert_eq!(
            TemplateError::Unclosed.to_string(),
            "`{` is not closed by `}` (write `{{` for a literal `{`)"
        );
    }

    #[test]
    fn names_what_is_wrong() {
        assert_eq!(Template::parse("{id", &env), Err(TemplateError::Unclosed));
        assert_eq!(
            Template::parse("{}", &env),
            Err(TemplateError::BadName(String::new()))
        );
        assert_eq!(Template::parse("a}b", &env), Err(TemplateError::LoneClose));
        assert!(matches!(
            Template::parse("${NOPE}", &env),
            Err(TemplateError::Env(_))
        ));
        assert_eq!(
            Template::parse("/bin/echo", &env)
                .unwrap()
                .as_literal()
                .as_deref(),
            Some("/bin/echo")
        );
    }
}
