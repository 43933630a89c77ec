//! The real `tableq` binary as a child process: its stderr collected as it runs,
//! signals sent with kill(2), exits waited for with a deadline.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

/// A `tableq` command with a clean environment for its own variables.
pub fn tableq(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tableq"));
    cmd.args(args)
        .env_remove("TABLEQ_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .env_remove("TABLEQ_DATABASE_URL_FILE")
        .env_remove("CREDENTIALS_DIRECTORY")
        .env_remove("TABLEQ_LOG_FORMAT")
        .env("TABLEQ_LOG", "info")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// A `tableq run FILE` on the database at `url`: a copy of tableq, one of several
/// side by side.
pub fn copy(file: &Path, url: &str) -> Daemon {
    let mut cmd = tableq(&["run"]);
    cmd.arg(file).env("TABLEQ_DATABASE_URL", url);
    Daemon::spawn(cmd)
}

/// `n` copies of `tableq run FILE` on the database at `url`.
pub fn copies(n: usize, file: &Path, url: &str) -> Vec<Daemon> {
    (0..n).map(|_| copy(file, url)).collect()
}

/// What a finished command printed, and how it exited.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

/// Runs `cmd` to the end (at most `timeout`).
pub async fn run_to_end(mut cmd: Command, timeout: Duration) -> Finished {
    let output = tokio::time::timeout(timeout, cmd.output())
        .await
        .expect("tableq finished in time")
        .expect("tableq ran");
    Finished {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A running `tableq`.
pub struct Daemon {
    child: Child,
    stderr: Arc<Mutex<String>>,
    stdout: Arc<Mutex<String>>,
    readers: Vec<tokio::task::JoinHandle<()>>,
}

impl Daemon {
    pub fn spawn(mut cmd: Command) -> Daemon {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start tableq");
        let stderr = Arc::new(Mutex::new(String::new()));
        let stdout = Arc::new(Mutex::new(String::new()));
        let err_pipe = child.stderr.take().expect("stderr is piped");
        let sink = stderr.clone();
        let err_reader = tokio::spawn(async move {
            let mut lines = BufReader::new(err_pipe).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut all = sink.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        });
        let mut out_pipe = child.stdout.take().expect("stdout is piped");
        let sink = stdout.clone();
        let out_reader = tokio::spawn(async move {
            let mut all = String::new();
            let _ = out_pipe.read_to_string(&mut all).await;
            sink.lock().unwrap().push_str(&all);
        });
        Daemon {
            child,
            stderr,
            stdout,
            readers: vec![err_reader, out_reader],
        }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn pid(&self) -> i32 {
        self.child.id().expect("still running") as i32
    }

    /// Sends `signal` (libc::SIGTERM, …).
    pub fn signal(&self, signal: i32) {
        unsafe { libc::kill(self.pid(), signal) };
    }

    /// Waits until stderr contains `text`; panics (with the log) after `timeout`.
    pub async fn wait_for_log(&self, text: &str, timeout: Duration) {
        self.wait_for_log_times(text, 1, timeout).await;
    }

    /// Waits until stderr contains `text` `times` times; panics (with the log) after
    /// `timeout`.
    pub async fn wait_for_log_times(&self, text: &str, times: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.stderr().matches(text).count() < times {
            assert!(
                Instant::now() < deadline,
                "tableq logged {text:?} fewer than {times} times; its log:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The exit status if the process has exited, without waiting.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("ask whether tableq exited")
    }

    /// Waits for the process to exit; panics (with the log) after `timeout`.
    pub async fn wait(&mut self, timeout: Duration) -> ExitStatus {
        match tokio::time::timeout(timeout, self.child.wait()).await {
            Ok(status) => {
                let status = status.expect("wait for tableq");
                // The pipes close with the process: read them to the end.
                for reader in self.readers.drain(..) {
                    let _ = reader.await;
                }
                status
            }
            Err(_) => panic!(
                "tableq did not exit within {timeout:?}; its log:\n{}",
                self.stderr()
            ),
        }
    }

    /// Sends SIGTERM and expects a clean exit, status 0, within 20 s; panics with the
    /// log otherwise.
    pub async fn terminate(&mut self) {
        self.signal(libc::SIGTERM);
        let status = self.wait(Duration::from_secs(20)).await;
        assert_eq!(status.code(), Some(0), "{}", self.stderr());
    }

    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }
}

/// Runs `tableq run --stop-when-empty FILE` against `url` and expects exit 0.
pub async fn run_binary_until_empty(file: &Path, url: &str) -> Finished {
    let mut cmd = tableq(&["run", "--stop-when-empty"]);
    cmd.arg(file).env("TABLEQ_DATABASE_URL", url);
    let finished = run_to_end(cmd, Duration::from_secs(120)).await;
    assert_eq!(
        finished.code(),
        Some(0),
        "tableq failed:\n{}",
        finished.stderr
    );
    finished
}
