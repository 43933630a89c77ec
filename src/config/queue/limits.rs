//! How far a queue's limits reach: `limits = "global"` (the default) shares
//! `rate_limit` and `max_in_flight` among every copy of tableq running the queue
//! against its database; `"per_process"` keeps each copy to them on its own (K
//! copies: K times the limits). And `[concurrency]`: at most `limit` rows of one
//! key value (a column of the select, or a `{template}` over its columns) in flight
//! across every copy.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::validate::validator::Validator;
use crate::config::value::template::{Part, Template};

/// The largest `[concurrency] limit`: each row claimed tries at most this many of
/// its key's slots.
pub const MAX_KEY_LIMIT: usize = 100;

/// Whom `rate_limit` and `max_in_flight` bound together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Across {
    /// Every copy running the queue against its database, together.
    #[default]
    Copies,
    /// Each process on its own.
    Process,
}

/// `[concurrency]` as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawConcurrency {
    /// What rows share a limit: a column of the select ("customer_id"), or a
    /// template over its columns ("{tenant}:{endpoint}").
    pub key: String,
    /// Rows of one key value worked on at once, across every copy. Default 1, at
    /// most 100.
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
}

/// `[concurrency]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Concurrency {
    /// The key as written, for messages.
    pub written: String,
    /// The columns and text it is made of.
    pub key: Template,
    pub limit: usize,
}

impl Concurrency {
    /// The columns the key reads.
    pub fn columns(&self) -> impl Iterator<Item = &str> {
        self.key.placeholders()
    }
}

impl Validator<'_> {
    /// `limits = "global" | "per_process"`; global when not given.
    pub(crate) fn across(&mut self, text: Option<&str>) -> Across {
        match text {
            None | Some("global") => Across::Copies,
            Some("per_process") => Across::Process,
            Some(other) => {
                let message = format!(
                    "`limits` = {other:?} is not how far limits reach: use \"global\" (rate_limit \
                     and max_in_flight shared by every copy of tableq on the database) or \
                     \"per_process\" (each copy on its own)"
                );
                self.error(&["limits"], message);
                Across::Copies
            }
        }
    }

    /// `[concurrency]`: its key read as a column or a template, its limit in range.
    pub(crate) fn concurrency(&mut self, raw: Option<&RawConcurrency>) -> Option<Concurrency> {
        let raw = raw?;
        let limit = raw.limit.map_or(1, |n| n as usize);
        if !(1..=MAX_KEY_LIMIT).contains(&limit) {
            let message = format!(
                "`[concurrency] limit` = {limit} is out of range: use 1 to {MAX_KEY_LIMIT}"
            );
            self.error(&["concurrency", "limit"], message);
        }
        let key = if raw.key.contains('{') {
            Template::parse(&raw.key, &|_| None).map_err(|e| e.to_string())
        } else {
            Ok(Template {
                parts: vec![Part::Placeholder(raw.key.trim().to_string())],
            })
        };
        let key = key.and_then(|key| match key.placeholders().count() {
            0 => Err("it names no column".to_string()),
            _ => Ok(key),
        });
        match key {
            Ok(key) => Some(Concurrency {
                written: raw.key.clone(),
                key,
                limit,
            }),
            Err(e) => {
                let message = format!(
                    "`[concurrency] key` = {:?}: {e}; name a column of the select \
                     (\"customer_id\") or write a template over its columns (\"{{tenant}}:{{endpoint}}\")",
                    raw.key
                );
                self.error(&["concurrency", "key"], message);
                None
            }
        }
    }
}
