//! A private, throwaway MariaDB server: its own datadir and port under the target
//! directory, started with `--no-defaults` so nothing is read from /etc/mysql. Tests
//! may stop, kill and restart it. It dies with the test process (PR_SET_PDEATHSIG),
//! and leftovers of earlier runs are removed when the next one starts. The soak
//! (examples/soak) includes this file too.

use std::io;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub struct MariaDb {
    dir: PathBuf,
    port: u16,
    child: Mutex<Option<Child>>,
    /// Server options beyond the harness's own (`--log-bin`, …).
    extra_args: Vec<String>,
}

impl MariaDb {
    /// Installs a fresh datadir and starts a server on a free port.
    pub fn start() -> MariaDb {
        MariaDb::start_with(&[])
    }

    /// Like [`MariaDb::start`], with extra server options, e.g.
    /// `["--log-bin", "--binlog-format=STATEMENT"]`.
    pub fn start_with(extra_args: &[&str]) -> MariaDb {
        MariaDb::start_trying(extra_args, free_port)
    }

    /// Like [`MariaDb::start_with`], on the first port `next_port` gives that no
    /// other process has by the time the server binds it (at most 10 tries).
    pub fn start_trying(extra_args: &[&str], mut next_port: impl FnMut() -> u16) -> MariaDb {
        let root = servers_root();
        std::fs::create_dir_all(&root).expect("create the test server root");
        remove_leftovers(&root);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{}-", std::process::id()))
            .tempdir_in(&root)
            .expect("create a datadir")
            .keep();
        install(&dir.join("data"), &dir.join("tmp"), &[]);
        let mut server = MariaDb {
            dir,
            port: 0,
            child: Mutex::new(None),
            extra_args: extra_args.iter().map(|a| a.to_string()).collect(),
        };
        // A port free a moment ago may be taken by the time the server binds it
        // (another process picked it too): then another port.
        for _ in 0..10 {
            server.port = next_port();
            match server.try_start() {
                Err(log) if log.contains(PORT_TAKEN) => continue,
                Err(log) => panic!("mariadbd did not start: {log}"),
                Ok(()) => return server,
            }
        }
        panic!(
            "mariadbd found no free port in 10 tries: {}",
            server.error_log()
        )
    }

    /// `mysql://root@127.0.0.1:PORT` (no database).
    pub fn base_url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Starts the server on its datadir and port, and waits until it accepts connections.
    pub fn start_again(&self) {
        if let Err(log) = self.try_start() {
            panic!("mariadbd did not start: {log}");
        }
    }

    /// Starts the server and waits until it accepts connections; else its error log.
    fn try_start(&self) -> Result<(), String> {
        let mut cmd = server_command(&self.dir, self.port);
        cmd.arg("--innodb-buffer-pool-size=128M")
            .arg("--innodb-log-file-size=48M")
            .args(&self.extra_args);
        // This start's log alone: a failure is read from it.
        let _ = std::fs::remove_file(self.dir.join("error.log"));
        let child = spawn_tied_to_process(cmd).expect("start mariadbd");
        *self.child.lock().unwrap() = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        // Its own log, not the port answering: the port may be another process's.
        while !self.error_log().contains(READY) {
            let exited = self
                .child
                .lock()
                .unwrap()
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                self.child.lock().unwrap().take();
                return Err(format!("exited with {status}: {}", self.error_log()));
            }
            if Instant::now() >= deadline {
                return Err(format!("not answering after 60 s: {}", self.error_log()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Stops the server the way an operator would (SIGTERM) and waits for it to exit.
    pub fn stop(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = child.wait();
        }
    }

    /// Kills the server (SIGKILL), as a crash would, and waits for it to exit;
    /// `start_again` recovers it from its datadir.
    pub fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Where private servers keep their datadirs: the target directory's tmp for tests
/// and benches; for an example, which cargo gives no `CARGO_TARGET_TMPDIR`, the
/// system's temporary directory.
fn servers_root() -> PathBuf {
    match option_env!("CARGO_TARGET_TMPDIR") {
        Some(tmp) => Path::new(tmp).join("mariadb"),
        None => std::env::temp_dir().join("tableq-mariadb"),
    }
}

/// A fresh datadir at `data`, the install's temporary files in `tmp` (created),
/// with extra server options for the install (`--innodb-log-file-size=16M`).
pub fn install(data: &Path, tmp: &Path, server_options: &[&str]) {
    std::fs::create_dir_all(tmp).expect("create the server's tmpdir");
    let mut install = Command::new(find("mariadb-install-db"));
    install
        .arg("--no-defaults")
        .arg(format!("--datadir={}", data.display()))
        .arg("--auth-root-authentication-method=normal")
        .arg("--skip-test-db")
        // Its own temporary directory: two installs at once (two test processes)
        // must not share temporary table names in /tmp.
        .arg(format!("--tmpdir={}", tmp.display()))
        .args(server_options)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if is_root() {
        install.arg("--user=root");
    }
    let out = install
        .output()
        .expect("run mariadb-install-db (is MariaDB installed?)");
    assert!(
        out.status.success(),
        "mariadb-install-db failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `mariadbd` on the datadir `dir/data` and `port`, loopback only, its socket, pid
/// file, error log (`dir/error.log`) and temporary files in `dir`, nothing read
/// from /etc/mysql; a caller adds its own options.
pub fn server_command(dir: &Path, port: u16) -> Command {
    let mut cmd = Command::new(find("mariadbd"));
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", dir.join("data").display()))
        .arg(format!("--port={port}"))
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--socket={}", dir.join("mysqld.sock").display()))
        .arg(format!("--pid-file={}", dir.join("mysqld.pid").display()))
        .arg(format!("--log-error={}", dir.join("error.log").display()))
        .arg(format!("--tmpdir={}", dir.join("tmp").display()))
        .arg("--skip-name-resolve")
        .arg("--innodb-flush-log-at-trx-commit=2")
        .arg("--max-connections=1000")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if is_root() {
        cmd.arg("--user=root");
    }
    cmd
}

pub fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

/// `mariadbd` lives in /usr/sbin, which is not always on a test's PATH.
pub fn find(program: &str) -> PathBuf {
    for dir in [
        "/usr/sbin",
        "/usr/bin",
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/local/mysql/bin",
    ] {
        let candidate = Path::new(dir).join(program);
        if candidate.exists() {
            return candidate;
        }
    }
    PathBuf::from(program)
}

/// What mariadbd's error log says once it accepts connections.
const READY: &str = "ready for connections";

/// What mariadbd's error log says when another process has its port.
pub const PORT_TAKEN: &str = "Address already in use";

/// A loopback port that nothing listens on just now, below Linux's ephemeral range
/// (32768–60999): the kernel never gives one to a client connection, of which the
/// suite makes thousands, so none takes it between this look and the server's bind.
/// Another process picking the same port at the same moment still can: a server
/// started on it tries another on [`PORT_TAKEN`].
pub fn free_port() -> u16 {
    (0..1000)
        .map(|_| fastrand::u16(20_000..32_000))
        .find(|port| TcpListener::bind(("127.0.0.1", *port)).is_ok())
        .expect("find a free port below 32000")
}

/// Removes datadirs of earlier test processes that are no longer running.
pub fn remove_leftovers(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let alive = unsafe { libc::kill(pid, 0) == 0 };
        if !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Has the child `cmd` spawns killed (SIGKILL) when the thread that spawned it ends
/// (PR_SET_PDEATHSIG).
pub fn die_with_parent(cmd: &mut Command) {
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `cmd` from a thread that lives as long as the process, with
/// PR_SET_PDEATHSIG so the child is killed when the test process exits — however it
/// exits. (The signal fires when the spawning *thread* ends, hence the one thread.)
/// The soak starts its tableq processes with it too.
pub fn spawn_tied_to_process(cmd: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::spawn(move || {
            for (mut cmd, reply) in rx {
                die_with_parent(&mut cmd);
                let _ = reply.send(cmd.spawn());
            }
        });
        Mutex::new(tx)
    });
    let (reply, answer) = mpsc::channel();
    sender
        .lock()
        .unwrap()
        .send((cmd, reply))
        .map_err(|_| io::Error::other("spawner thread is gone"))?;
    answer
        .recv()
        .map_err(|_| io::Error::other("spawner thread is gone"))?
}
