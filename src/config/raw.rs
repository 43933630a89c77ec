//! The queue file exactly as written: serde types with no meaning attached yet.
//! `validate` turns them into a [`super::QueueConfig`].

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawQueue {
    pub name: Option<String>,
    pub workers: Option<u32>,
    pub batch: Option<u32>,
    #[serde(default, with = "humantime_serde")]
    pub poll_interval: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub error_backoff: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub database_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub loop_window: Option<Duration>,
    pub loop_limit: Option<u32>,
    pub rate_limit: Option<String>,
    pub max_in_flight: Option<u32>,
    /// `"transaction"` (the default) or `"lease"`.
    pub mode: Option<String>,
    pub lease: Option<super::lease::RawLease>,
    pub circuit: Option<super::circuit::RawCircuit>,
    pub scope: Option<String>,
    pub database_url: Option<String>,
    #[serde(default, with = "humantime_serde")]
    pub stats_interval: Option<Duration>,
    pub waiting_cap: Option<u64>,
    pub waiting_since: Option<String>,
    pub select: String,
    pub key: Option<String>,
    pub action: super::action::RawAction,
    pub on_success: Option<RawOutcome>,
    pub on_failure: Option<RawOutcome>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOutcome {
    pub sql: Statements,
}

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
