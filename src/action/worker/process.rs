//! One worker process: started, handed an item's line and its answer read, its
//! stderr logged line by line (under its queue and number); ended either at once —
//! dropped, its process group killed — or retired: stdin closed, a grace to exit,
//! then killed.

use std::collections::VecDeque;
use std::io;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::task::JoinHandle;
use tracing::{info, Instrument, Span};

use super::config::WorkerAction;
use super::protocol::{self, Line, NotProtocol};
use crate::action::capture::OUTPUT_LIMIT;
use crate::action::php;
use crate::action::process::{dies_with_tableq, ended, grace, prepare, ProcessGroup};
use crate::action::progress::Progress;
use crate::action::Outcome;
use crate::lock::lock;

/// The longest line read from a worker: longer is not the protocol.
const LINE_LIMIT: u64 = 1024 * 1024;
/// The longest stderr line logged as one (longer ones are logged in pieces).
const STDERR_LINE: u64 = 4 * 1024;
/// How many of the last stderr lines a failure quotes.
const STDERR_TAIL: usize = 5;
/// How long a process whose stdout ended gets to exit, and its stderr to drain.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// A worker process, ready for an item or handling one.
pub struct Running {
    /// Its number in its queue: 1 for the first process started, and so on.
    pub number: u64,
    /// The items it has answered.
    pub answered: u64,
    /// Its last answer said it ends after it (`"last": true`).
    pub leaving: bool,
    pub pid: u32,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    stderr: Stderr,
    /// Killed when dropped: nothing of the process outlives it.
    group: ProcessGroup,
}

/// Why a process can take no more items: it is killed, and the item it held fails.
#[derive(Debug)]
pub enum Ended {
    /// It exited (or closed its stdout): how, and the last lines of its stderr.
    Exited(String),
    /// It wrote a line that is not the protocol.
    NotProtocol(NotProtocol),
    /// PHP died in it (a fatal error, an uncaught exception, a limit, a parse
    /// error): PHP's own message, from its stdout or its stderr.
    Died(String),
}

/// How long a process that wrote something other than the protocol gets to
/// finish writing it (PHP's displayed fatal error) before it is killed.
const DRAIN: Duration = Duration::from_millis(500);

/// What a process did when its input ended before any item.
#[derive(Debug)]
pub enum WithoutInput {
    /// It exited with status 0, as a worker should.
    Ended,
    /// It exited otherwise: how.
    Failed(String),
    /// It wrote this on stdout.
    Wrote(String),
    /// It was still running.
    KeptRunning,
}

impl Running {
    /// Starts process number `number` of `queue`'s worker.
    pub fn start(config: &WorkerAction, queue: &str, number: u64) -> io::Result<Running> {
        let (program, args) = config
            .argv
            .split_first()
            .ok_or_else(|| io::Error::other("the command is empty"))?;
        let mut process = prepare(program.as_ref(), args, &config.surroundings);
        dies_with_tableq(&mut process);
        let mut child = process
            .env("TABLEQ_QUEUE", queue)
            .env("TABLEQ_WORKER", number.to_string())
            .spawn()?;
        let pid = child.id().unwrap_or_default();
        let group = ProcessGroup::new(pid as i32);
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(io::Error::other("its pipes were not opened"));
        };
        // Its own root: the process outlives the item that started it.
        let span =
            tracing::info_span!(parent: None, "worker_process", queue = %queue, process = number, pid);
        Ok(Running {
            number,
            answered: 0,
            leaving: false,
            pid,
            child,
            stdin: Some(stdin),
            stdout: BufReader::new(stdout),
            stderr: Stderr::listen(stderr, span),
            group,
        })
    }

    /// Hands the process `line` (one item, its newline included) and reads its
    /// answer, noting `{"progress": …}` lines in `progress` meanwhile.
    pub async fn exchange(
        &mut self,
        line: &[u8],
        progress: Option<&Progress>,
    ) -> Result<Outcome, Ended> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(Ended::Exited("its stdin was closed".into()));
        };
        self.stderr.forget();
        if stdin.write_all(line).await.is_err() || stdin.flush().await.is_err() {
            // A broken pipe: it is gone, or going.
            return Err(self.exited().await);
        }
        loop {
            let Some(line) = self.read_line().await else {
                return Err(self.exited().await);
            };
            match protocol::read(&line) {
                Ok(Line::Answer { outcome, last }) => {
                    self.answered += 1;
                    self.leaving = last;
                    return Ok(outcome);
                }
                Ok(Line::Progress(said)) => {
                    if let Some(progress) = progress {
                        progress.report(&said);
                    }
                }
                Err(not) => return Err(self.not_protocol(line, not).await),
            }
        }
    }

    /// The process wrote `line`, which is not the protocol: if PHP died in it, what
    /// it writes next and its stderr say so (`display_errors` writes the error on
    /// stdout after a blank line, `log_errors` on stderr); else it wrote `not`.
    async fn not_protocol(&mut self, mut line: Vec<u8>, not: NotProtocol) -> Ended {
        line.push(b'\n');
        let mut rest = (&mut self.stdout).take(OUTPUT_LIMIT as u64);
        let drained = grace(DRAIN, rest.read_to_end(&mut line)).await;
        let ended = matches!(drained, Some(Ok(_)));
        if let Some(php) = php::died_in_output(&line) {
            return Ended::Died(php);
        }
        if ended {
            if let Ended::Died(php) = self.exited().await {
                return Ended::Died(php);
            }
        }
        Ended::NotProtocol(not)
    }

    /// The next line of stdout, without its newline; `None` once stdout ends (or
    /// cannot be read). A line longer than [`LINE_LIMIT`] comes back cut, and is not
    /// the protocol.
    async fn read_line(&mut self) -> Option<Vec<u8>> {
        let mut line = Vec::new();
        let read = (&mut self.stdout)
            .take(LINE_LIMIT)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => None,
            Ok(_) => {
                if line.last() == Some(&b'\n') {
                    line.pop();
                }
                Some(line)
            }
        }
    }

    /// Whether the process can take an item: `Err` if it exited, or wrote
    /// something, while it had none.
    pub async fn idle_check(&mut self) -> Result<(), Ended> {
        // Ready to read now: it has written something, or closed its stdout.
        let ready = match self.stdout.fill_buf().now_or_never() {
            None => return Ok(()),
            Some(Ok(buffered)) => !buffered.is_empty(),
            Some(Err(_)) => false,
        };
        if !ready {
            return Err(self.exited().await);
        }
        let stray = self.read_line().await.unwrap_or_default();
        let why = format!("a line between items: {}", protocol::excerpt(&stray));
        Err(Ended::NotProtocol(NotProtocol(why)))
    }

    /// How the process ended, once its stdout did: PHP's death, if its stderr says
    /// so.
    async fn exited(&mut self) -> Ended {
        let (_, how) = self.exit().await;
        match self.stderr.died() {
            Some(php) => Ended::Died(php),
            None => Ended::Exited(how),
        }
    }

    /// Its exit status once its stdout ended — it gets [`EXIT_GRACE`] to exit, then
    /// its group is killed — and how it ended in words, with the last lines of
    /// its stderr.
    async fn exit(&mut self) -> (Option<ExitStatus>, String) {
        let status = grace(EXIT_GRACE, self.child.wait()).await;
        self.group.kill();
        let (status, how) = match status {
            Some(Ok(status)) => (Some(status), ended(status)),
            Some(Err(e)) => (None, format!("cannot be waited for: {e}")),
            None => (None, "closed its stdout but did not exit".to_string()),
        };
        let tail = self.stderr.tail().await;
        match tail.is_empty() {
            true => (status, how),
            false => (status, format!("{how}: {tail}")),
        }
    }

    /// What the process does once its input ends before any item (`check`'s look
    /// at it), within `within`.
    pub async fn without_input(&mut self, within: Duration) -> WithoutInput {
        self.close_stdin();
        match grace(within, self.read_line()).await {
            None => WithoutInput::KeptRunning,
            Some(Some(line)) => WithoutInput::Wrote(protocol::excerpt(&line)),
            Some(None) => match self.exit().await {
                (Some(status), _) if status.success() => WithoutInput::Ended,
                (_, how) => WithoutInput::Failed(how),
            },
        }
    }

    /// Closes the process's stdin: a worker ends once its input does.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// True once the process has exited.
    pub fn has_exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Ends the process kindly: stdin closed, `within` to exit, then its group killed.
    pub async fn retire(mut self, within: Duration) {
        self.close_stdin();
        let _ = grace(within, self.child.wait()).await;
    }
}

/// A process's stderr: each line logged as it comes, the last few kept for a
/// failure's message.
struct Stderr {
    tail: Arc<Mutex<VecDeque<String>>>,
    /// The last line of PHP's log that says it died.
    died: Arc<Mutex<Option<String>>>,
    task: Option<JoinHandle<()>>,
}

impl Stderr {
    fn listen(stderr: ChildStderr, span: Span) -> Stderr {
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let died = Arc::new(Mutex::new(None));
        let (kept, death) = (tail.clone(), died.clone());
        let task = tokio::spawn(
            async move {
                let mut reader = BufReader::new(stderr);
                loop {
                    let mut line = Vec::new();
                    match (&mut reader).take(STDERR_LINE).read_until(b'\n', &mut line).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    let line = String::from_utf8_lossy(&line).trim_end().to_string();
                    if line.is_empty() {
                        continue;
                    }
                    info!("{line}");
                    if let Some(php) = php::died_in_log([line.as_str()]) {
                        *lock(&death) = Some(php);
                    }
                    let mut kept = lock(&kept);
                    if kept.len() == STDERR_TAIL {
                        kept.pop_front();
                    }
                    kept.push_back(line);
                }
            }
            .instrument(span),
        );
        Stderr {
            tail,
            died,
            task: Some(task),
        }
    }

    /// PHP's message, if its log on stderr said it died (read once stderr has
    /// ended: after [`Stderr::tail`]).
    fn died(&self) -> Option<String> {
        lock(&self.died).clone()
    }

    /// Forgets what an earlier item's log said: a death is this item's.
    fn forget(&self) {
        lock(&self.died).take();
    }

    /// The last lines, joined with " | ", once stderr has ended (or
    /// [`EXIT_GRACE`] has passed).
    async fn tail(&mut self) -> String {
        if let Some(task) = self.task.take() {
            let _ = grace(EXIT_GRACE, task).await;
        }
        let kept = lock(&self.tail);
        kept.iter().map(String::as_str).collect::<Vec<_>>().join(" | ")
    }
}
