//! How `tableq check` prints its report: `text` for people (one line per finding,
//! then the summary), `json` for programs (one document), `github` for GitHub
//! Actions (each finding a workflow command, `::error file=…,line=…::message`, that
//! GitHub shows on the file's line in the pull request; then the summary).

use serde_json::json;

use super::CheckReport;
use crate::diagnostic::{Finding, Severity};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    #[default]
    Text,
    Json,
    Github,
}

/// The report as `format` prints it, ending with a newline.
pub fn render(report: &CheckReport, format: ReportFormat) -> String {
    let mut out = String::new();
    match format {
        ReportFormat::Text => {
            for finding in &report.findings {
                out.push_str(&format!("{finding}\n"));
            }
            out.push_str(&format!("{}\n", report.summary()));
        }
        ReportFormat::Json => {
            let document = json_report(report);
            out.push_str(&format!("{document:#}\n"));
        }
        ReportFormat::Github => {
            for finding in &report.findings {
                out.push_str(&format!("{}\n", github_annotation(finding)));
            }
            out.push_str(&format!("{}\n", report.summary()));
        }
    }
    out
}

fn json_report(report: &CheckReport) -> serde_json::Value {
    let errors = report.findings.iter().filter(|f| f.is_error()).count();
    let findings: Vec<serde_json::Value> = report
        .findings
        .iter()
        .map(|f| {
            json!({
                "file": f.file.display().to_string(),
                "line": f.line,
                "queue": f.queue,
                "severity": f.severity.to_string(),
                "message": f.message,
            })
        })
        .collect();
    json!({
        "queues": report.queues,
        "offline": report.offline,
        "servers": report.servers,
        "reads": report.reads,
        "wakes": report.wakes,
        "due": report.due,
        "errors": errors,
        "warnings": report.findings.iter().filter(|f| f.severity == Severity::Warning).count(),
        "findings": findings,
        "summary": report.summary(),
    })
}

/// `::error file=F,line=N,title=queue Q::message`, escaped as GitHub reads it.
fn github_annotation(finding: &Finding) -> String {
    let command = match finding.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Note => "notice",
    };
    let mut properties = vec![format!(
        "file={}",
        escape_property(&finding.file.display().to_string())
    )];
    if let Some(line) = finding.line {
        properties.push(format!("line={line}"));
    }
    let title = match &finding.queue {
        Some(queue) => format!("tableq check: queue {queue}"),
        None => "tableq check".to_string(),
    };
    properties.push(format!("title={}", escape_property(&title)));
    format!(
        "::{command} {}::{}",
        properties.join(","),
        escape_data(&finding.message)
    )
}

/// A workflow command's message: `%`, CR and LF escaped.
fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value: its message escapes, and `:` and `,`.
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Commas, colons, percent signs and newlines cannot break an annotation apart.
    #[test]
    fn escapes_what_would_end_an_annotation() {
        let finding = Finding::warning(Path::new("q/a,b:c.toml"), "100% sure\nor not")
            .at_line(Some(7))
            .in_queue("mail");
        assert_eq!(
            github_annotation(&finding),
            "::warning file=q/a%2Cb%3Ac.toml,line=7,title=tableq check%3A queue mail::100%25 sure%0Aor not"
        );
    }
}
