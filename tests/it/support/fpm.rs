//! A private PHP-FPM pool for one test: `php-fpm8.2 -n -R -y CONF` in the
//! foreground (no php.ini; as root when the tests run as root), listening on a
//! socket in a directory of its own, with the test's PHP scripts beside it. It dies
//! with the test process (PR_SET_PDEATHSIG) and is stopped when dropped; a test
//! may stop it and start it again (an FPM outage).

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::mariadb::{find, is_root, spawn_tied_to_process};
use super::tools;

pub struct Fpm {
    dir: tempfile::TempDir,
    child: Mutex<Option<Child>>,
    program: PathBuf,
}

impl Fpm {
    /// A pool of `children` (pm = static), started and answering; `None` (having
    /// said so loudly) when PHP-FPM is not installed outside CI.
    pub fn start(children: u32) -> Option<Fpm> {
        Fpm::start_with(children, &[])
    }

    /// A pool of `children` with `settings`, lines of the pool's section
    /// (`php_admin_value[display_errors] = off`; `{dir}` stands for the pool's
    /// directory).
    pub fn start_with(children: u32, settings: &[&str]) -> Option<Fpm> {
        // php-fpm lives in /usr/sbin, which is not always on a test's PATH; Debian
        // 12 ships 8.2, Ubuntu's runners a later one.
        let installed = ["php-fpm8.2", "php-fpm8.3", "php-fpm8.4"]
            .map(find)
            .into_iter()
            .find(|p| p.is_absolute());
        let program = match installed {
            Some(program) => program,
            None => tools::required(
                &["php-fpm8.2", "php-fpm"],
                "apt-get install php8.2-fpm php8.2-cli",
                "type = \"fastcgi\" against a real PHP-FPM",
            )?,
        };
        let dir = tempfile::tempdir().expect("a directory for PHP-FPM");
        let user = if is_root() { "user = root\n" } else { "" };
        let d = dir.path().display().to_string();
        let mut conf = format!(
            "[global]\npid = {d}/fpm.pid\nerror_log = {d}/fpm.log\ndaemonize = no\n\
             [tableq]\n{user}listen = {d}/fpm.sock\npm = static\npm.max_children = {children}\n\
             catch_workers_output = yes\nclear_env = no\n"
        );
        for line in settings {
            conf.push_str(&line.replace("{dir}", &d));
            conf.push('\n');
        }
        std::fs::write(dir.path().join("fpm.conf"), conf).expect("write fpm.conf");
        let fpm = Fpm {
            dir,
            child: Mutex::new(None),
            program,
        };
        fpm.start_again();
        Some(fpm)
    }

    /// `unix:/…/fpm.sock`, as `[action] address` takes it.
    pub fn address(&self) -> String {
        format!("unix:{}", self.socket().display())
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("fpm.sock")
    }

    /// The pool's directory: its scripts, and the files they write.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Writes the PHP script `name` (`<?php` and `body`) beside the pool; its path.
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, format!("<?php\n{body}\n")).expect("write a PHP script");
        path
    }

    /// Starts the pool and waits until its socket takes connections.
    pub fn start_again(&self) {
        let mut cmd = Command::new(&self.program);
        cmd.args(["-n", "-F", "-y"])
            .arg(self.dir.path().join("fpm.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if is_root() {
            cmd.arg("-R");
        }
        let child = spawn_tied_to_process(cmd).expect("start php-fpm");
        *self.child.lock().unwrap() = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while UnixStream::connect(self.socket()).is_err() {
            assert!(
                Instant::now() < deadline,
                "php-fpm did not start: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the pool (SIGTERM: the master ends its children) and waits for it.
    pub fn stop(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = child.wait();
        }
    }

    /// PHP-FPM's own log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("fpm.log")).unwrap_or_default()
    }
}

impl Drop for Fpm {
    fn drop(&mut self) {
        self.stop();
    }
}
