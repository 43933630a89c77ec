//! The format `/metrics` answers in, chosen by the request's `Accept`: OpenMetrics
//! 1.0 (what prometheus-client writes) for a client that asks for it by name
//! (Prometheus does, first), else the Prometheus text format 0.0.4 — as Prometheus's
//! own clients (client_golang, client_python) answer — so that `curl …/metrics |
//! promtool check metrics` passes.
//!
//! The two differ where a linter looks: OpenMetrics names a counter's family
//! `x` and its sample `x_total`, where 0.0.4 wants the `# HELP` and `# TYPE` lines to
//! name the sample itself, or `promtool` finds "no help text". So the 0.0.4 answer is
//! the OpenMetrics text rewritten line by line (see [`to_text_0_0_4`]).

/// An exposition format `/metrics` can answer in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    /// The Prometheus text format, version 0.0.4.
    Text004,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it names
    /// `application/openmetrics-text`; 0.0.4 otherwise (also without a header, or
    /// with only `*/*`). A media type with `q=0` is refused, not asked for.
    pub fn from_accept(accept: Option<&str>) -> Format {
        let accepted: Vec<String> = accept
            .unwrap_or("")
            .split(',')
            .filter(|range| !refused(range))
            .filter_map(|range| range.split(';').next())
            .map(|media| media.trim().to_ascii_lowercase())
            .collect();
        if accepted.iter().any(|a| a == "application/openmetrics-text") {
            Format::OpenMetrics
        } else {
            Format::Text004
        }
    }

    /// The answer's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Text004 => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// Whether a media range of an `Accept` header carries `q=0`.
fn refused(range: &str) -> bool {
    range.split(';').skip(1).any(|param| {
        let Some((key, value)) = param.split_once('=') else {
            return false;
        };
        key.trim().eq_ignore_ascii_case("q") && value.trim().parse::<f64>() == Ok(0.0)
    })
}

/// Rewrites OpenMetrics text as Prometheus text 0.0.4: a counter's `# HELP` and
/// `# TYPE` name its `_total` sample, an `info` family becomes a gauge named
/// `…_info` and `unknown` becomes `untyped`; `# UNIT` and `# EOF` lines, `_created`
/// samples and exemplars, which 0.0.4 has no place for, are left out.
pub fn to_text_0_0_4(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // The family's `# HELP` text, held until its `# TYPE` says how to name it.
    let mut help: Option<(&str, &str)> = None;
    // The family being written, as OpenMetrics names it, and its type.
    let mut family: (&str, &str) = ("", "");
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest.split_once(' ').unwrap_or((rest, "")));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            family = (name, kind);
            let (sample, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "unknown" => (name.to_string(), "untyped"),
                other => (name.to_string(), other),
            };
            if let Some((_, text)) = help.take().filter(|(named, _)| *named == name) {
                out.push_str(&format!("# HELP {sample} {text}\n"));
            }
            out.push_str(&format!("# TYPE {sample} {kind}\n"));
        } else if line.starts_with('#') {
            // `# UNIT`, `# EOF`: nothing in 0.0.4.
        } else if !is_created(line, family) {
            out.push_str(without_exemplar(line));
            out.push('\n');
        }
    }
    out
}

/// Whether `line` is a counter's `_created` sample (OpenMetrics only).
fn is_created(line: &str, (name, kind): (&str, &str)) -> bool {
    kind == "counter"
        && line
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix("_created"))
            .is_some_and(|rest| rest.starts_with(['{', ' ']))
}

/// The sample without its exemplar (` # {…} value`), which comes after the label
/// set; a `#` inside a quoted label value is part of the value.
fn without_exemplar(line: &str) -> &str {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let (mut quoted, mut escaped) = (false, false);
    let mut labels_closed = !line[name_end..].starts_with('{');
    for (at, c) in line[name_end..].char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => labels_closed = true,
            '#' if labels_closed && !quoted => return line[..name_end + at].trim_end(),
            _ => {}
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_chooses_the_format() {
        let cases = [
            // What curl sends, or nothing: the text format, as Prometheus's clients.
            (None, Format::Text004),
            (Some("*/*"), Format::Text004),
            (Some("text/plain; version=0.0.4"), Format::Text004),
            (Some("text/plain"), Format::Text004),
            (Some("TEXT/PLAIN;version=0.0.4;q=0.3,*/*;q=0.2"), Format::Text004),
            // What Prometheus sends: it asks for OpenMetrics first.
            (
                Some("application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"),
                Format::OpenMetrics,
            ),
            (
                Some("application/openmetrics-text;q=0, text/plain"),
                Format::Text004,
            ),
            (Some("text/plain;q=0"), Format::Text004),
            (Some("application/openmetrics-text"), Format::OpenMetrics),
        ];
        for (accept, format) in cases {
            assert_eq!(Format::from_accept(accept), format, "{accept:?}");
        }
    }

    #[test]
    fn counters_help_and_type_name_their_samples() {
        let openmetrics = "# HELP tableq_claims Claim queries sent.\n\
            # TYPE tableq_claims counter\n\
            tableq_claims_total{queue=\"a\"} 3\n\
            tableq_claims_created{queue=\"a\"} 1700000000.0\n\
            tableq_claims_total 4 # {trace_id=\"y\"} 1\n\
            # HELP tableq_workers Worker loops.\n\
            # TYPE tableq_workers gauge\n\
            tableq_workers{queue=\"a # b\"} 2\n\
            # HELP tableq_wait_seconds Waits.\n\
            # TYPE tableq_wait_seconds histogram\n\
            # UNIT tableq_wait_seconds seconds\n\
            tableq_wait_seconds_bucket{le=\"+Inf\"} 1 # {trace_id=\"x\"} 0.5\n\
            tableq_wait_seconds_sum 0.5\n\
            tableq_wait_seconds_count 1\n\
            # HELP build Build.\n\
            # TYPE build info\n\
            build_info{version=\"1\"} 1\n\
            # EOF\n";
        assert_eq!(
            to_text_0_0_4(openmetrics),
            "# HELP tableq_claims_total Claim queries sent.\n\
             # TYPE tableq_claims_total counter\n\
             tableq_claims_total{queue=\"a\"} 3\n\
             tableq_claims_total 4\n\
             # HELP tableq_workers Worker loops.\n\
             # TYPE tableq_workers gauge\n\
             tableq_workers{queue=\"a # b\"} 2\n\
             # HELP tableq_wait_seconds Waits.\n\
             # TYPE tableq_wait_seconds histogram\n\
             tableq_wait_seconds_bucket{le=\"+Inf\"} 1\n\
             tableq_wait_seconds_sum 0.5\n\
             tableq_wait_seconds_count 1\n\
             # HELP build_info Build.\n\
             # TYPE build_info gauge\n\
             build_info{version=\"1\"} 1\n"
        );
    }
}
