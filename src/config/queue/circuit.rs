//! `[circuit]`: the circuit breaker of an HTTP or command queue. When, within
//! `window`, at least `min_items` items finished and more than `failure_ratio` of
//! them failed for a reason that is not the item's own (the receiver unreachable,
//! a timeout, HTTP 429/502/503/504, a command's transient exit code), the queue
//! stops claiming for a cool-down, so no row spends an attempt on an outage.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::action::ActionConfig;
use crate::config::validate::validator::Validator;
use crate::config::value::duration::DurationText;

/// `[circuit]`, the circuit breaker: when more than failure_ratio of the items
/// finished within window (at least min_items) failed downstream — unreachable,
/// timed out, HTTP 429/502/503/504 — the queue stops claiming for a cool-down.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCircuit {
    /// Default: on for HTTP and command actions; false turns it off.
    pub enabled: Option<bool>,
    /// The failures counted are those of the items finished this long ago at most.
    /// Default "60s".
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub window: Option<Duration>,
    /// The fewest items finished within the window before the circuit may open.
    /// Default 10.
    pub min_items: Option<u32>,
    /// The circuit opens when more than this share of them failed downstream.
    /// Default 0.5.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub failure_ratio: Option<f64>,
    /// After this one item is tried (a probe): success closes the circuit, failure
    /// doubles the cool-down. Default "10s", jittered.
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub cool_down: Option<Duration>,
    /// The longest cool-down. Default "5m".
    #[serde(default, with = "humantime_serde")]
    #[schemars(with = "Option<DurationText>")]
    pub max_cool_down: Option<Duration>,
    /// A command's exit codes that mean "not now" rather than "not this item": a
    /// failure downstream. Default [75] (EX_TEMPFAIL).
    pub transient_exit_codes: Option<Vec<i32>>,
}

/// The breaker of a queue whose circuit is enabled.
#[derive(Debug, Clone, PartialEq)]
pub struct CircuitConfig {
    /// The failures counted are those of the items finished this long ago at most.
    pub window: Duration,
    /// The fewest items finished within the window before the circuit may open.
    pub min_items: usize,
    /// The circuit opens when more than this share of them failed downstream.
    pub failure_ratio: f64,
    /// The first cool-down; it doubles after each failed probe.
    pub cool_down: Duration,
    /// The longest cool-down.
    pub max_cool_down: Duration,
    /// A command's exit codes that mean "not now" rather than "not this item".
    pub transient_exit_codes: Vec<i32>,
}

/// `window` when `[circuit]` does not set it.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);
/// `min_items` when `[circuit]` does not set it.
pub const DEFAULT_MIN_ITEMS: u32 = 10;
/// `failure_ratio` when `[circuit]` does not set it.
pub const DEFAULT_FAILURE_RATIO: f64 = 0.5;
/// `cool_down` when `[circuit]` does not set it.
pub const DEFAULT_COOL_DOWN: Duration = Duration::from_secs(10);
/// `max_cool_down` when `[circuit]` does not set it.
pub const DEFAULT_MAX_COOL_DOWN: Duration = Duration::from_secs(300);
/// `transient_exit_codes` when `[circuit]` does not set it: EX_TEMPFAIL.
pub const DEFAULT_TRANSIENT_EXIT_CODES: [i32; 1] = [75];

/// The queue's breaker, checked; `None` when it is off (an SQL action, or
/// `enabled = false`).
pub(crate) fn validate(
    v: &mut Validator,
    raw: Option<&RawCircuit>,
    action: &ActionConfig,
) -> Option<CircuitConfig> {
    let kind = action.kind();
    let name = action.type_name();
    if !kind.reaches_downstream() {
        if raw.is_some() {
            v.error(
                &["circuit"],
                format!(
                    "`[circuit]` is for actions that reach outside the database: a `type = \
                     \"{name}\"` action runs in it, with nothing downstream to break; remove the table"
                ),
            );
        }
        return None;
    }
    let default = RawCircuit::default();
    let raw = raw.unwrap_or(&default);
    if raw.transient_exit_codes.is_some() && !kind.has_exit_codes() {
        v.error(
            &["circuit", "transient_exit_codes"],
            format!(
                "`circuit.transient_exit_codes` is for command actions, whose failures have exit \
                 codes; a `type = \"{name}\"` queue's transient failures are known without them: \
                 remove the key"
            ),
        );
    }
    let config = CircuitConfig {
        window: v.positive(&["circuit", "window"], raw.window, DEFAULT_WINDOW),
        min_items: min_items(v, raw.min_items),
        failure_ratio: failure_ratio(v, raw.failure_ratio),
        cool_down: v.positive(&["circuit", "cool_down"], raw.cool_down, DEFAULT_COOL_DOWN),
        max_cool_down: v.positive(
            &["circuit", "max_cool_down"],
            raw.max_cool_down,
            DEFAULT_MAX_COOL_DOWN,
        ),
        transient_exit_codes: match kind.has_exit_codes() {
            true => exit_codes(v, raw.transient_exit_codes.as_deref()),
            false => Vec::new(),
        },
    };
    if config.cool_down > config.max_cool_down {
        v.error(
            &["circuit", "cool_down"],
            format!(
                "`circuit.cool_down` = {} is longer than `circuit.max_cool_down` = {}: the \
                 cool-down doubles up to max_cool_down, so it must start below it",
                humantime::format_duration(config.cool_down),
                humantime::format_duration(config.max_cool_down)
            ),
        );
    }
    raw.enabled.unwrap_or(true).then_some(config)
}

fn min_items(v: &mut Validator, given: Option<u32>) -> usize {
    let value = given.unwrap_or(DEFAULT_MIN_ITEMS);
    if !(1..=100_000).contains(&value) {
        v.error(
            &["circuit", "min_items"],
            format!("`circuit.min_items` = {value} is out of range: use 1 to 100000"),
        );
    }
    value as usize
}

fn failure_ratio(v: &mut Validator, given: Option<f64>) -> f64 {
    let value = given.unwrap_or(DEFAULT_FAILURE_RATIO);
    if !(value > 0.0 && value < 1.0) {
        v.error(
            &["circuit", "failure_ratio"],
            format!(
                "`circuit.failure_ratio` = {value} is out of range: a share above 0 and below 1, \
                 e.g. 0.5 (the circuit opens when more than half the items failed downstream)"
            ),
        );
    }
    value
}

fn exit_codes(v: &mut Validator, given: Option<&[i32]>) -> Vec<i32> {
    let codes = given.map_or(DEFAULT_TRANSIENT_EXIT_CODES.to_vec(), <[i32]>::to_vec);
    if let Some(bad) = codes.iter().find(|code| !(1..=255).contains(*code)) {
        v.error(
            &["circuit", "transient_exit_codes"],
            format!(
                "`circuit.transient_exit_codes` holds {bad}: an exit code that means failure is 1 \
                 to 255, e.g. [75] (EX_TEMPFAIL)"
            ),
        );
    }
    codes
}
