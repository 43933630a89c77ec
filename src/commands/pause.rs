//! `tableq pause` and `tableq resume`: a row in the queue's database's
//! `tableq_paused` table (see `db::pause`), which every running copy reads within
//! its `poll_interval`.

use std::time::{Duration, SystemTime};

use super::cli::{PauseArgs, ResumeArgs};
use super::failure::Failure;
use super::operate::{one_queue, runtime};
use super::stdout;
use crate::config::QueueConfig;
use crate::db::account::quoted;
use crate::db::pause::{self, Needs, PauseError, TABLE};
use crate::db::Database;

/// How long after a pause every copy has stopped claiming, at most, beyond its
/// `poll_interval` (the read's own time, and the turn a worker is in).
const REACHED_WITHIN: Duration = Duration::from_secs(1);

/// `tableq pause`.
pub async fn pause_command(args: PauseArgs, url: Option<&str>) -> Result<(), Failure> {
    let (queue, database) = &one_queue(args.paths, args.queue, url)?;
    let duration: Option<Duration> = args.duration.map(Into::into);
    let (name, timeout) = (&queue.name, queue.database_timeout);
    pause::pause_on(database, timeout, name, duration, &args.reason)
        .await
        .map_err(|e| refused(queue, database, "pause", e))?;
    let until = match duration {
        Some(d) => format!(
            "for {} (until {})",
            humantime::format_duration(d),
            humantime::format_rfc3339_seconds(SystemTime::now() + d)
        ),
        None => format!("until `tableq resume --queue {}`", queue.name),
    };
    stdout::line(format_args!(
        "queue {} paused on {database} {until}: every running copy stops claiming it within {}",
        queue.name,
        humantime::format_duration(queue.poll_interval + REACHED_WITHIN)
    ))
}

/// `tableq resume`.
pub async fn resume_command(args: ResumeArgs, url: Option<&str>) -> Result<(), Failure> {
    let (queue, database) = &one_queue(args.paths, args.queue, url)?;
    let resumed = pause::resume_on(database, queue.database_timeout, &queue.name).await;
    match resumed.map_err(|e| refused(queue, database, "resume", e))? {
        true => stdout::line(format_args!(
            "queue {} resumed on {database}: every running copy claims it again within {}",
            queue.name,
            humantime::format_duration(queue.poll_interval + REACHED_WITHIN)
        )),
        false => stdout::line(format_args!(
            "queue {} was not paused on {database}",
            queue.name
        )),
    }
}

/// Why `what` (pause, resume) could not be written, naming the grant that is missing.
fn refused(queue: &QueueConfig, database: &Database, what: &str, e: PauseError) -> Failure {
    let db = database.name();
    let why = match e {
        PauseError::Denied {
            needs,
            error,
            account,
        } => {
            // The account as the server named it; else the user at any host.
            let account = account.unwrap_or_else(|| quoted(&format!("{}@%", database.user())));
            let grant =
                format!("GRANT SELECT, INSERT, UPDATE, DELETE ON `{db}`.`{TABLE}` TO {account}");
            match needs {
                Needs::Create => format!(
                    "cannot {what}: user {account} may not create tableq's table \
                     `{db}`.`{TABLE}` ({error}). Grant it once (GRANT CREATE ON `{db}`.* TO \
                     {account}), or have an administrator create the table (the book's \
                     \"Pausing a queue\" shows the statement) and {grant}"
                ),
                Needs::Write => format!(
                    "cannot {what}: user {account} may not change `{db}`.`{TABLE}` ({error}): \
                     {grant} (and every running copy's user needs SELECT on it)"
                ),
            }
        }
        PauseError::Connect(e) => return runtime(queue, database, "connecting", &e),
        other => format!("cannot {what}: {other}"),
    };
    Failure::Runtime(format!(
        "{}: queue {}: {why}",
        queue.file.display(),
        queue.name
    ))
}
