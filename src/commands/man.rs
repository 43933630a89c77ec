//! `tableq man`: the manual pages, from the command line's own definition plus the
//! sections clap knows nothing of — EXIT STATUS, ENVIRONMENT, SIGNALS, FILES. Without
//! a directory it prints tableq(1) (`tableq man > tableq.1`); with one it writes
//! tableq.1 and a page per subcommand, tableq-run.1, tableq-check.1, ….

use std::io::{self, Write};
use std::path::Path;

use clap::CommandFactory;
use clap_mangen::roff::{bold, roman, Roff};
use clap_mangen::Man;

use super::cli::{Cli, VERSION};

type Items = &'static [(&'static str, &'static str)];

const DATABASE_ENV: Items = &[
    ("TABLEQ_DATABASE_URL", "the database of queues whose file names none (--database-url), mysql://USER:PASSWORD@HOST:3306/DATABASE"),
    ("TABLEQ_DATABASE_URL_FILE", "a file holding that URL instead (--database-url-file); setting both is an error"),
    ("CREDENTIALS_DIRECTORY", "set by systemd: the credential database-url in it is the URL when neither of the above is set"),
    ("DATABASE_URL", "the URL when none of the above gives one"),
];

const LOG_ENV: Items = &[
    (
        "TABLEQ_LOG",
        "the log filter, tracing's EnvFilter syntax (default info)",
    ),
    ("TABLEQ_LOG_FORMAT", "text or json (--log-format)"),
    ("NO_COLOR", "no colours in text logs"),
];

const RUN_ENV: Items = &[
    (
        "TABLEQ_QUEUES",
        "run only these queues, comma-separated (--queue)",
    ),
    (
        "TABLEQ_STOP_WHEN_EMPTY",
        "true: exit 0 once nothing is waiting (--stop-when-empty)",
    ),
    (
        "TABLEQ_METRICS_ADDR",
        "where /metrics, /healthz, /readyz and the status page listen (--metrics-addr)",
    ),
    (
        "TABLEQ_SHUTDOWN_TIMEOUT",
        "how long items in flight may take after SIGTERM (--shutdown-timeout, default 30s)",
    ),
    (
        "OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "export a trace span per item over OTLP/HTTP when --otlp-endpoint is not given: the base URL (/v1/traces added), or the traces URL as is",
    ),
    (
        "OTEL_SERVICE_NAME",
        "the service.name of the exported spans (default tableq)",
    ),
    (
        "NOTIFY_SOCKET, WATCHDOG_USEC",
        "set by systemd: tableq reports READY, RELOADING, STOPPING and feeds the watchdog",
    ),
];

const QUEUE_FILE_ENV: Items = &[
    (
        "${NAME} in a queue file",
        "replaced from the environment when the file loads; ${file:/PATH} reads a secret from a file",
    ),
    (
        "TABLEQ_WAKE",
        "the wake of every queue whose file sets none (auto, binlog or poll): poll for a process that polls on purpose and is not to be told of the binary log",
    ),
];

const RUN_SIGNALS: Items = &[
    ("SIGTERM, SIGINT", "stop claiming; items in flight finish within the shutdown timeout, past it they are rolled back and wait again; exit 0. A second one exits at once with status 1"),
    ("SIGHUP", "reload the queue files: only changed queues restart, items in flight finish under the old file; a reload that fails keeps every queue as it was"),
    ("SIGKILL", "safe too: the server rolls back, the rows wait again"),
];

const SHORT_SIGNALS: Items = &[(
    "SIGTERM, SIGINT",
    "end the command at once; anything it had open on the database is rolled back",
)];

const FILES: Items = &[
    ("/etc/tableq/queues.d/*.toml", "the queue files the systemd unit and the container run"),
    ("/etc/credstore/tableq-database-url", "the database URL, which the systemd unit loads as the credential database-url"),
    ("/etc/tableq/env", "more environment for the systemd unit (EnvironmentFile=)"),
    ("/var/lib/tableq", "the working directory under systemd and in the container: the one place commands may write"),
];

/// What one page says beyond its options.
struct Sections {
    exit_status: Items,
    environment: Vec<(&'static str, &'static str)>,
    signals: Items,
}

fn sections(subcommand: Option<&str>) -> Sections {
    let exit_status: Items = match subcommand {
        None => &[
            ("0", "done"),
            ("1", "a runtime failure; for check: it found a problem"),
            ("2", "bad usage, or queue files that do not load (for run: also SQL the server rejects, a login it refuses at the first connection)"),
        ],
        Some("run") => &[
            ("0", "done: stopped by SIGTERM or SIGINT, or (--stop-when-empty) nothing left to do"),
            ("1", "a runtime failure, a forced stop (a second signal), or --stop-when-empty with a queue that stopped itself (a loop)"),
            ("2", "bad usage, queue files that do not load, SQL the server rejects, a login it refuses at the first connection, a URL file that cannot be read"),
        ],
        Some("check") => &[
            ("0", "no error (with --strict, no warning either)"),
            ("1", "an error, a file that does not load included (with --strict, a warning too)"),
            ("2", "bad usage, or a URL file that cannot be read"),
        ],
        Some("count") => &[
            ("0", "counted (or printed the statement)"),
            ("1", "a database could not be reached"),
            ("2", "bad usage, or queue files that do not load"),
        ],
        Some("health") => &[("0", "the endpoint answered 200"), ("1", "anything else")],
        Some(_) => &[("0", "written"), ("1", "the output could not be written"), ("2", "bad usage")],
    };
    let mut environment = Vec::new();
    match subcommand {
        None | Some("run") => {
            environment.extend(DATABASE_ENV);
            environment.extend(RUN_ENV);
            environment.extend(QUEUE_FILE_ENV);
        }
        Some("check" | "count") => {
            environment.extend(DATABASE_ENV);
            environment.extend(QUEUE_FILE_ENV);
        }
        Some("health") => environment.push(RUN_ENV[2]),
        Some(_) => {}
    }
    environment.extend(LOG_ENV);
    let signals = match subcommand {
        None | Some("run") => RUN_SIGNALS,
        Some(_) => SHORT_SIGNALS,
    };
    Sections {
        exit_status,
        environment,
        signals,
    }
}

/// Writes `command`'s page: clap's sections, then ours.
fn render(command: clap::Command, subcommand: Option<&str>, out: &mut dyn Write) -> io::Result<()> {
    let pages: Vec<String> = Cli::command()
        .get_subcommands()
        .map(|s| format!("tableq-{}(1)", s.get_name()))
        .collect();
    let has_subcommands = command.has_subcommands();
    let has_version = command.get_version().is_some();
    let man = Man::new(command).source(format!("tableq {VERSION}"));
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    if has_subcommands {
        man.render_subcommands_section(out)?;
    }
    let ours = sections(subcommand);
    let mut roff = Roff::new();
    list(&mut roff, "EXIT STATUS", ours.exit_status);
    list(&mut roff, "ENVIRONMENT", &ours.environment);
    list(&mut roff, "SIGNALS", ours.signals);
    list(&mut roff, "FILES", FILES);
    roff.control("SH", ["SEE ALSO"]);
    let this_page = subcommand.map(|s| format!("tableq-{s}(1)"));
    let mut see_also = vec!["tableq(1)".to_string()];
    see_also.extend(pages);
    see_also.retain(|page| {
        this_page.as_ref() != Some(page) && (subcommand.is_some() || page != "tableq(1)")
    });
    roff.text([roman(see_also.join(", ")), roman(", and the README.")]);
    roff.to_writer(out)?;
    if has_version {
        man.render_version_section(out)?;
    }
    Ok(())
}

/// A section of `.TP` items: the term in bold, its meaning below.
fn list(roff: &mut Roff, title: &str, items: &[(&str, &str)]) {
    if items.is_empty() {
        return;
    }
    roff.control("SH", [title]);
    for (term, meaning) in items {
        roff.control("TP", []);
        roff.text([bold(*term)]);
        roff.text([roman(*meaning)]);
    }
}

/// tableq(1), to `out`.
pub fn print_page(out: &mut dyn Write) -> io::Result<()> {
    render(Cli::command(), None, out)
}

/// tableq.1 and tableq-SUBCOMMAND.1 for every subcommand, into `dir` (made if need be).
pub fn write_pages(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut root = Cli::command().disable_help_subcommand(true);
    root.build();
    for sub in root.get_subcommands() {
        let name = sub.get_name();
        let mut file = std::fs::File::create(dir.join(format!("tableq-{name}.1")))?;
        render(sub.clone(), Some(name), &mut file)?;
        file.flush()?;
    }
    let mut file = std::fs::File::create(dir.join("tableq.1"))?;
    render(root, None, &mut file)?;
    file.flush()
}
