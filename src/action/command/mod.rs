//! `type = "command"`: run a program for an item — no shell, placeholders substituted
//! inside whole argv elements, the row as JSON on stdin — in a process group of its
//! own, so that a run dropped (at its deadline, or a cancelled item) kills
//! grandchildren too.
//!
//! - [`config`]: its `[action]` table — the argv, the working directory, the
//!   environment it may see.
//! - [`listening`]: its stdout, listened to for `progress: …` lines.
//!
//! Starting it, its environment and its process group are `crate::action::process`'s,
//! shared with `type = "worker"`.

pub mod config;
mod listening;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::AsyncWriteExt;
use tokio::process::Child;

use super::capture::{clip_error, last_lines, read_into, read_tail, Captured};
use super::process::{ended, grace, prepare, ProcessGroup};
use super::progress::Progress;
use super::{Action, ActionError, Blame, External, Job, Outcome, Probe, Ready};
use crate::db::row_json::{item_json, items_json, keys_json};
use crate::db::Item;
use config::CommandAction;
use listening::Listening;

/// How much of stderr is kept for the error message.
const STDERR_TAIL: usize = 8 * 1024;
/// How long output may keep flowing after the process group is gone.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// A queue's command action.
pub struct Command {
    config: Arc<CommandAction>,
}

impl Command {
    pub fn new(config: &CommandAction) -> Command {
        Command {
            config: Arc::new(config.clone()),
        }
    }

    /// Runs the command for the job's item — the row on stdin, its key in
    /// `TABLEQ_KEY`; with a progress (lease mode's `:progress`) the command finds its
    /// file in `TABLEQ_PROGRESS`, and its stdout is listened to for `progress: …`
    /// lines. In batch scope it runs once for the batch: the rows as a JSON array on
    /// stdin, their keys as a JSON array in `TABLEQ_KEYS`.
    async fn run_job(&self, job: Job<'_>) -> Outcome {
        let Some(first) = job.items.first() else {
            return Outcome::success();
        };
        let (input, key) = if job.batch {
            (
                items_json(job.items),
                ("TABLEQ_KEYS", keys_json(job.items).to_string()),
            )
        } else {
            (item_json(first), ("TABLEQ_KEY", first.key_text()))
        };
        // Only `{queue}` placeholders exist in batch scope: any item renders them.
        let launch = Launch {
            config: &self.config,
            item: first,
            queue: job.queue,
        };
        launch.start(&input, key, job.progress, job.output).await
    }
}


impl Ready for CommandAction {
    fn ready(&self) -> Result<Action, ActionError> {
        Ok(Action::external(Command::new(self)))
    }
}

/// A command has nothing for `check` to look at beyond the program itself, which
/// loading the queue already found.
impl Probe for Command {}

impl External for Command {
    fn run<'a>(&'a self, job: Job<'a>) -> BoxFuture<'a, Outcome> {
        Box::pin(self.run_job(job))
    }
}

/// One run of the command, for `item`.
struct Launch<'a> {
    config: &'a CommandAction,
    item: &'a Item,
    queue: &'a str,
}

impl Launch<'_> {
    /// Starts the command with `input` on stdin and the `key` variable, and
    /// supervises it, its stdout kept in `output`; with `progress`, as
    /// [`Command::run_job`] says.
    async fn start(
        &self,
        input: &serde_json::Value,
        key: (&str, String),
        progress: Option<Arc<Progress>>,
        output: Arc<Captured>,
    ) -> Outcome {
        let config = self.config;
        let argv = match arguments(config, self.item, self.queue) {
            Ok(argv) => argv,
            Err(refused) => return Outcome::failure(refused),
        };
        let Some((program, args)) = argv.split_first() else {
            return Outcome::failure("the command is empty");
        };
        let program_text = program.to_string_lossy().into_owned();
        let stdin = match serde_json::to_vec(input) {
            Ok(json) => json,
            Err(e) => return Outcome::failure(format!("cannot encode the row as JSON: {e}")),
        };
        let mut command = prepare(program, args, &config.surroundings);
        if let Some(progress) = &progress {
            command.env("TABLEQ_PROGRESS", progress.path());
        }
        let spawned = command
            .env("TABLEQ_QUEUE", self.queue)
            .env(key.0, key.1)
            .spawn();
        match spawned {
            Ok(child) => supervise(child, stdin, &program_text, progress, output).await,
            Err(e) => cannot_start(config, &program_text, &e),
        }
    }
}

/// A program that does not start: the row's fault when the row names it or makes
/// its arguments too long; else the queue's own program, which fails every item
/// alike and cannot have run for this one — unreached, its attempt not spent.
fn cannot_start(config: &CommandAction, program: &str, error: &std::io::Error) -> Outcome {
    let said = format!("cannot run {program}: {error}");
    let rows_own = config.argv.first().is_some_and(|p| p.as_literal().is_none())
        || error.kind() == std::io::ErrorKind::ArgumentListTooLong;
    match rows_own {
        true => Outcome::failure(said),
        false => Outcome::unreached(said),
    }
}

/// The argv for `item`: each element rendered whole from its template.
fn arguments(config: &CommandAction, item: &Item, queue: &str) -> Result<Vec<OsString>, String> {
    let mut argv: Vec<OsString> = Vec::with_capacity(config.argv.len());
    for (index, template) in config.argv.iter().enumerate() {
        let arg = template.render(&|p| item.placeholder_bytes(p, queue), &|_, v| v);
        if arg.contains(&0) {
            return Err(format!(
                "argument {index} holds a NUL byte, which a command line cannot carry"
            ));
        }
        argv.push(OsString::from_vec(arg));
    }
    Ok(argv)
}

/// Feeds the child its stdin, reads its output (into `output`, which the deadline
/// reads too), and waits for it; then nothing of its process group survives.
/// Dropped before (at the deadline), the group is killed as `group` is dropped, and
/// the child too (`kill_on_drop`).
async fn supervise(
    mut child: Child,
    stdin: Vec<u8>,
    program: &str,
    progress: Option<Arc<Progress>>,
    output: Arc<Captured>,
) -> Outcome {
    let group = child.id().map(|pid| ProcessGroup::new(pid as i32));

    let mut stdin_pipe = child.stdin.take();
    let writer = tokio::spawn(async move {
        if let Some(pipe) = stdin_pipe.as_mut() {
            // A program that does not read its stdin is fine: ignore EPIPE.
            let _ = pipe.write_all(&stdin).await;
            let _ = pipe.shutdown().await;
        }
    });
    let captured = output.clone();
    let stdout = child.stdout.take().map(|out| {
        tokio::spawn(async move {
            match progress {
                Some(progress) => read_into(Listening::new(out, progress), &captured).await,
                None => read_into(out, &captured).await,
            }
        })
    });
    let stderr = child
        .stderr
        .take()
        .map(|err| tokio::spawn(read_tail(err, STDERR_TAIL)));

    let waited = child.wait().await;
    // The command is done: nothing of its group may outlive it.
    drop(group);
    writer.abort();
    let status = match waited {
        Ok(status) => status,
        Err(e) => return Outcome::failure(format!("cannot wait for {program}: {e}")),
    };
    collect(stdout).await;
    let errors = collect(stderr).await.unwrap_or_default();
    judge(status, output.take().unwrap_or_default(), &errors)
}

/// What `reader` read, once it is done (or [`DRAIN_GRACE`] has passed).
async fn collect<T>(reader: Option<tokio::task::JoinHandle<T>>) -> Option<T> {
    let mut handle = reader?;
    match grace(DRAIN_GRACE, &mut handle).await {
        Some(Ok(read)) => Some(read),
        _ => {
            handle.abort();
            None
        }
    }
}

fn judge(status: ExitStatus, output: Vec<u8>, errors: &[u8]) -> Outcome {
    let code = status.code();
    if code == Some(0) {
        return Outcome {
            status: Some(0),
            output: Some(output),
            ..Outcome::success()
        };
    }
    let mut error = ended(status);
    let tail = last_lines(errors, 5);
    if !tail.is_empty() {
        error.push_str(": ");
        error.push_str(&tail);
    }
    Outcome {
        error: Some(clip_error(error)),
        status: code.map(i64::from),
        output: Some(output),
        retry_after: None,
        release_after: None,
        rearmed: None,
        interrupted: false,
        kind: None,
        trace: None,
        blame: Blame::Item,
        each: None,
    }
}
