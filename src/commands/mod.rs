//! What each subcommand does, between the parsed command line and the library, and
//! the exit status each kind of failure maps to.

pub mod cli;
pub mod database_url;
mod failure;
mod health;
mod load;
mod man;
mod new;
mod notify;
mod operate;
mod pause;
mod reaper;
mod schedules;
mod signals;
mod stdout;

use std::io::Write;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::check::format::render;
use crate::check::{check, CheckOptions};
use crate::config::queue::failed::Change;
use crate::config::validate::names::key_name;
use crate::config::{QueueConfig, QueueSource};
use crate::count::{count_waiting, printable_count_statement};
use crate::db::{OpenError, Session};
use crate::diagnostic::Findings;
use crate::engine::history::HistoryOptions;
use crate::engine::queue::launch::FirstLook;
use crate::engine::queue::reload::{listen_for_hangups, run_with_reload};
use crate::engine::queue::supervisor::{resolve_databases, RunOptions};
use cli::{CheckArgs, Cli, Command, CountArgs, OnOff, RunArgs};
use database_url::{default_url, DefaultUrl};
pub use failure::Failure;
use load::{env_lookup, load};

/// Runs the command `cli` asks for.
pub async fn execute(cli: Cli) -> Result<(), Failure> {
    if database_url::password_on_command_line(&std::env::args_os().collect::<Vec<_>>()) {
        tracing::warn!("{}", database_url::PASSWORD_ON_ARGV);
    }
    // Read only by the commands that use it: `completions` needs no secret file.
    let database = || {
        let (flag, file) = (cli.database_url.clone(), cli.database_url_file.clone());
        default_url(flag, file, &env_lookup).map_err(|e| Failure::Usage(e.to_string()))
    };
    match cli.command {
        Command::Run(args) => run_command(args, database()?).await,
        Command::Check(args) => check_command(args, database()?).await,
        Command::Count(args) => count_command(args, database()?).await,
        Command::Failed(args) => operate::failed_command(args, database()?.url.as_deref()).await,
        Command::Inspect(args) => operate::inspect_command(args, database()?.url.as_deref()).await,
        Command::Retry(args) => {
            operate::change_command(args, Change::Retry, database()?.url.as_deref()).await
        }
        Command::Discard(args) => {
            operate::change_command(args, Change::Discard, database()?.url.as_deref()).await
        }
        Command::Pause(args) => pause::pause_command(args, database()?.url.as_deref()).await,
        Command::Resume(args) => pause::resume_command(args, database()?.url.as_deref()).await,
        Command::Schedules(args) => {
            schedules::schedules_command(args, database()?.url.as_deref()).await
        }
        Command::Health(args) => {
            match health::probe(args.metrics_addr, args.ready, args.timeout.into()).await {
                Ok(body) => stdout::line(body),
                Err(why) => Err(Failure::Runtime(format!("not healthy: {why}"))),
            }
        }
        Command::Completions(args) => stdout::write_with(|out| {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(args.shell, &mut command, "tableq", out);
            Ok(())
        }),
        Command::New(args) => stdout::print(&new::queue_file(&args)?),
        Command::Schema => stdout::print(&crate::config::load::schema::queue_file_schema::<
            crate::action::RawAction,
        >()),
        Command::Man(args) => match &args.dir {
            None => stdout::write_with(man::print_page),
            Some(dir) => man::write_pages(dir).map_err(|e| {
                Failure::Runtime(format!(
                    "{}: cannot write the manual pages: {e}",
                    dir.display()
                ))
            }),
        },
    }
}

async fn run_command(args: RunArgs, database: DefaultUrl) -> Result<(), Failure> {
    // First of all: a SIGHUP sent while the files load must not end the process.
    let hangups = listen_for_hangups()
        .map_err(|e| Failure::Runtime(format!("cannot listen for SIGHUP: {e}")))?;
    if let Some(finding) = &database.warning {
        tracing::warn!(%finding, "database URL file warning");
    }
    let database_url = database.url;
    let source = QueueSource {
        paths: args.paths.clone(),
        names: args.queues.clone(),
    };
    let queues = load(&source)?;
    // The loader refused the errors `check` finds offline; its warnings do not stop
    // a queue, but they are worth a line at start.
    for queue in &queues {
        for finding in crate::check::offline::warnings(queue, key_name(queue).as_deref()) {
            tracing::warn!(%finding, "queue file warning");
        }
    }
    let shutdown = CancellationToken::new();
    signals::install(shutdown.clone())
        .map_err(|e| Failure::Runtime(format!("cannot listen for signals: {e}")))?;
    if let Err(e) = reaper::start() {
        tracing::warn!(error = %e, "cannot become the reaper of orphaned command processes");
    }
    let mut options = RunOptions {
        database_url,
        stop_when_empty: args.stop_when_empty,
        allow_multi_primary: args.allow_multi_primary,
        shutdown_timeout: args.shutdown_timeout.into(),
        budget: std::sync::Arc::new(crate::db::Budget::new(args.max_connections as usize)),
        lifecycle: std::sync::Arc::new(notify::Systemd::from_env()),
        first_look: Some(FirstLook::new(warn_if_unindexed)),
        history: history_options(&args)?,
        ..RunOptions::default()
    };
    let monitor = options.monitor.clone();
    let stopping = shutdown.clone();
    tokio::spawn(async move {
        stopping.cancelled().await;
        monitor.set_stopping();
    });
    let metrics_stop = CancellationToken::new();
    serve_metrics(&args, &mut options, metrics_stop.clone()).await?;
    let _stop_metrics = metrics_stop.drop_guard();
    start_otlp(args.otlp_endpoint.as_deref())?;
    let monitor = options.monitor.clone();
    let stop_when_empty = options.stop_when_empty;
    let ran = run_with_reload(source, queues, options, shutdown, hangups).await;
    crate::telemetry::trace::otlp::finish(OTLP_FLUSH).await;
    ran.map_err(Failure::Config)?;
    let looping = monitor.looping_queues();
    if stop_when_empty && !looping.is_empty() {
        return Err(Failure::Runtime(format!(
            "stopped, not empty: queue {} kept completing rows that stayed in the select (see the log)",
            looping.join(", ")
        )));
    }
    Ok(())
}

/// Serves `--metrics-addr`, if given, with the console (its tokens read from their
/// files) until `stop`; the copy's history names the address it bound.
async fn serve_metrics(
    args: &RunArgs,
    options: &mut RunOptions,
    stop: CancellationToken,
) -> Result<(), Failure> {
    let console_token = database_url::console_token(args.console_token_file.clone(), &env_lookup)
        .map_err(|e| Failure::Usage(e.to_string()))?;
    if let Some(finding) = console_token.as_ref().and_then(|t| t.warning.as_ref()) {
        tracing::warn!(%finding, "console token file warning");
    }
    let console_token = console_token.and_then(|t| t.url);
    let read_token = read_token(args)?;
    let Some(addr) = args.metrics_addr else {
        return Ok(());
    };
    let tokens = (console_token.as_deref(), read_token.as_deref());
    let acting = crate::console::acting(options.monitor.clone(), tokens);
    let bound = crate::telemetry::http::start(addr, options.monitor.clone(), acting, stop)
        .await
        .map_err(|e| Failure::Runtime(format!("--metrics-addr {addr}: cannot listen: {e}")))?;
    if let Some(history) = options.history.as_mut() {
        history.console = Some(format!("http://{bound}"));
    }
    Ok(())
}

/// The console's read token, if one is given.
fn read_token(args: &RunArgs) -> Result<Option<String>, Failure> {
    let file = args.console_read_token_file.clone();
    let found = database_url::console_read_token(file, &env_lookup)
        .map_err(|e| Failure::Usage(e.to_string()))?;
    if let Some(finding) = found.as_ref().and_then(|t| t.warning.as_ref()) {
        tracing::warn!(%finding, "console read token file warning");
    }
    Ok(found.and_then(|t| t.url))
}

/// How the history is kept, unless `--history off`. `TABLEQ_HISTORY_EVERY` (for
/// tests) writes it more often than once a minute.
fn history_options(args: &RunArgs) -> Result<Option<HistoryOptions>, Failure> {
    if args.history == OnOff::Off {
        return Ok(None);
    }
    let every = match env_lookup("TABLEQ_HISTORY_EVERY") {
        Some(text) => humantime::parse_duration(&text)
            .ok()
            .filter(|every| !every.is_zero())
            .ok_or_else(|| {
                Failure::Usage(format!(
                    "TABLEQ_HISTORY_EVERY={text}: not a duration (e.g. 2s)"
                ))
            })?,
        None => HistoryOptions::default().every,
    };
    Ok(Some(HistoryOptions {
        retention: args.history_retention.into(),
        every,
        // The address bound, once the endpoint listens.
        console: None,
    }))
}

/// Says as each queue starts, on its first session, whether no index drives its
/// claim (as `check` does, naming the index to add): such a claim reads more of the
/// table the more it holds.
fn warn_if_unindexed<'a>(session: &'a mut Session, queue: &'a QueueConfig) -> BoxFuture<'a, ()> {
    Box::pin(async move {
        if let Some(finding) = crate::check::index::unindexed_claim(session, queue).await {
            tracing::warn!(%finding, "claim not driven by an index");
        }
    })
}

/// How long the spans still buffered at the end may take to be sent.
const OTLP_FLUSH: std::time::Duration = std::time::Duration::from_secs(5);

/// Starts the trace export, if `--otlp-endpoint` or the environment asks for it.
fn start_otlp(flag: Option<&str>) -> Result<(), Failure> {
    use crate::telemetry::trace::otlp;
    let Some(url) = otlp::endpoint(flag, &env_lookup) else {
        return Ok(());
    };
    otlp::start(&url, &otlp::service_name(&env_lookup))
        .map_err(|e| Failure::Usage(format!("trace export to {url}: {e}")))
}

async fn check_command(args: CheckArgs, database: DefaultUrl) -> Result<(), Failure> {
    let options = CheckOptions {
        offline: args.offline,
        database_url: database.url,
        allow_multi_primary: args.allow_multi_primary,
    };
    let mut report = check(&args.paths, &env_lookup, &options).await;
    report.findings.extend(database.warning);
    let printed = stdout::print(&render(&report, args.format));
    if report.fails(args.strict) {
        return Err(Failure::CheckFailed);
    }
    printed
}

async fn count_command(args: CountArgs, database: DefaultUrl) -> Result<(), Failure> {
    if let Some(warning) = &database.warning {
        let _ = writeln!(std::io::stderr(), "{warning}");
    }
    let source = QueueSource {
        paths: args.paths,
        names: args.queues,
    };
    let queues = load(&source)?;
    if args.print_sql {
        return print_count_sql(&queues);
    }
    let resolved = resolve_databases(queues, database.url.as_deref()).map_err(Failure::Config)?;
    for (queue, database) in &resolved {
        match count_waiting(queue, database, args.cap as usize).await {
            Ok(waiting) => stdout::line(format_args!("{}\t{waiting}", queue.name))?,
            Err(OpenError::Invalid(findings)) => return Err(Failure::Config(Findings(findings))),
            Err(OpenError::Unreachable(error)) => {
                return Err(Failure::Runtime(format!(
                    "{}: queue {}: cannot count: {error}",
                    queue.file.display(),
                    queue.name
                )))
            }
        }
    }
    Ok(())
}

/// `count --print-sql`: one queue's count statement, to paste into an autoscaler.
fn print_count_sql(queues: &[QueueConfig]) -> Result<(), Failure> {
    match queues {
        [queue] => stdout::line(printable_count_statement(queue)),
        _ => {
            let names: Vec<&str> = queues.iter().map(|q| q.name.as_str()).collect();
            Err(Failure::Usage(format!(
                "count --print-sql prints one queue's statement: choose it with --queue NAME \
                 (the files define: {})",
                names.join(", ")
            )))
        }
    }
}
