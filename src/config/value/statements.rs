//! The queue's own SQL: `sql = "…"` or `sql = ["…", …]` as written ([`Statements`]),
//! and validated as text — the select a claim is built from, and action and outcome
//! statements that must not end the item's transaction.

use std::borrow::Cow;
use std::fmt;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;

use crate::config::load::locate::statement_path;
use crate::config::validate::validator::Validator;
use crate::sql::statement::{
    first_word, parse_statement, sets_only_user_variables, top_level_words, ParsedStatement,
};

/// `sql = "…"` or `sql = ["…", "…"]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statements(pub Vec<String>);

impl<'de> Deserialize<'de> for Statements {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OneOrMany;

        impl<'de> Visitor<'de> for OneOrMany {
            type Value = Statements;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("one SQL statement as a string, or an array of them")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Statements, E> {
                Ok(Statements(vec![v.to_string()]))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Statements, A::Error> {
                let mut all = Vec::new();
                while let Some(one) = seq.next_element::<String>()? {
                    all.push(one);
                }
                if all.is_empty() {
                    return Err(de::Error::invalid_length(0, &self));
                }
                Ok(Statements(all))
            }
        }

        deserializer.deserialize_any(OneOrMany)
    }
}

/// `sql = "…"` or `sql = ["…", "…"]`: one statement, or several run in order.
impl JsonSchema for Statements {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Statements".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [
                { "type": "string" },
                { "type": "array", "items": { "type": "string" }, "minItems": 1 }
            ]
        })
    }
}

/// Parameters the select may use: it runs before any row is known.
const SELECT_PARAMS: &[&str] = &["queue"];

/// Statements that commit or end the transaction the item's lock lives in.
const TRANSACTION_BREAKERS: &[&str] = &[
    "BEGIN",
    "START",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT",
    "RELEASE",
    "LOCK",
    "UNLOCK",
    "CREATE",
    "ALTER",
    "DROP",
    "TRUNCATE",
    "RENAME",
    "GRANT",
    "REVOKE",
    "FLUSH",
    "XA",
    "ANALYZE",
    "OPTIMIZE",
    "REPAIR",
    "INSTALL",
    "RESET",
    "UNINSTALL",
];

impl Validator<'_> {
    /// The queue's select: one SELECT that tableq can append its claim clause to.
    pub(crate) fn select(&mut self, text: &str) -> Option<ParsedStatement> {
        let v = self;
        let parsed = match parse_statement(text) {
            Ok(parsed) => parsed,
            Err(e) => {
                v.error(&["select"], format!("`select`: {e}"));
                return None;
            }
        };
        if !matches!(first_word(&parsed.text).as_deref(), Some("SELECT" | "WITH")) {
            v.error(
                &["select"],
                "`select` must be a SELECT statement that returns the rows waiting for work",
            );
        }
        let words = top_level_words(&parsed.text);
        let has = |seq: &[&str]| {
            words
                .windows(seq.len())
                .any(|w| w.iter().zip(seq).all(|(a, b)| a == b))
        };
        let appended = "tableq appends `LIMIT <batch> FOR UPDATE SKIP LOCKED` itself";
        if has(&["LIMIT"]) {
            v.error(
                &["select"],
                format!("`select` ends in LIMIT: {appended}; remove it and set `batch` instead"),
            );
        }
        for clause in [
            &["FOR", "UPDATE"][..],
            &["FOR", "SHARE"],
            &["LOCK", "IN", "SHARE", "MODE"],
            &["SKIP", "LOCKED"],
            &["NOWAIT"],
        ] {
            if has(clause) {
                v.error(
                    &["select"],
                    format!("`select` has `{}`: {appended}; remove it", clause.join(" ")),
                );
            }
        }
        if has(&["INTO"]) {
            v.error(
                &["select"],
                "`select` has INTO: it must return the rows to the worker, not store them",
            );
        }
        for set_op in ["UNION", "INTERSECT", "EXCEPT"] {
            if has(&[set_op]) {
                v.error(
                    &["select"],
                    format!(
                        "`select` uses {set_op}: rows of a {set_op} cannot be locked; select from the \
                         queue's table (a join locks the rows it joins too: test other tables in an \
                         `EXISTS (SELECT …)` subquery)"
                    ),
                );
            }
        }
        if let Some(param) = parsed
            .params
            .iter()
            .find(|p| !SELECT_PARAMS.contains(&p.as_str()))
        {
            v.error(
                &["select"],
                format!("`select` uses `:{param}`: the select can only use `:queue`; write the condition into the SQL"),
            );
        }
        Some(parsed)
    }

    /// Action or outcome statements: each parsed, none allowed to end the transaction.
    pub(crate) fn statements(
        &mut self,
        path: &[&str],
        statements: &Statements,
    ) -> Vec<ParsedStatement> {
        let v = self;
        let key = path.join(".");
        let mut parsed = Vec::new();
        for (index, text) in statements.0.iter().enumerate() {
            let at = statement_path(path, index, statements.0.len());
            let at: Vec<&str> = at.iter().map(String::as_str).collect();
            let statement = match parse_statement(text) {
                Ok(statement) => statement,
                Err(e) => {
                    v.error(&at, format!("`{key}`: {e}"));
                    continue;
                }
            };
            let first = first_word(&statement.text).unwrap_or_default();
            let words = top_level_words(&statement.text);
            let second = words.get(1).map(String::as_str).unwrap_or_default();
            let commits = TRANSACTION_BREAKERS.contains(&first.as_str())
                || matches!(
                    (first.as_str(), second),
                    ("CHECK", "TABLE") | ("LOAD", "INDEX") | ("CACHE", "INDEX")
                );
            if commits {
                v.error(
                    &at,
                    format!(
                        "`{key}`: `{first}` would end or commit the transaction that holds the item's lock; \
                         tableq begins and commits it around your statements"
                    ),
                );
                continue;
            }
            if (first == "SET" && !sets_only_user_variables(&statement.text)) || first == "USE" {
                v.error(
                    &at,
                    format!(
                        "`{key}`: `{first}` would change the session tableq relies on (isolation level, \
                         autocommit, database); only user variables (`SET @x = …`) may be set"
                    ),
                );
                continue;
            }
            parsed.push(statement);
        }
        parsed
    }
}
