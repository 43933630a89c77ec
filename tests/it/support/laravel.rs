//! A minimal Laravel 8.83 application — Debian's `php-laravel-framework`, the
//! framework's own `jobs` and `failed_jobs` migrations (`queue:table`,
//! `queue:failed-table`), job classes as `make:job` writes them — with tableq's
//! bridge (`bridges/laravel`, loaded through its `autoload.php`), built once per
//! test run from `support/apps/laravel/`. Each test gets an instance of it: its own
//! `artisan` and `.env` (its database), migrated; the queue file `tableq new
//! laravel` prints for it; `dispatch()` through an artisan command; `queue:work`
//! beside tableq.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::process::{Child, Command};

use super::process::children;
use super::{copy_tree, tools, QueueFiles, TestDb};

/// The application's sources, in the repository.
fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/support/apps/laravel")
}

/// The bridge's autoloader, as an application without Composer requires it.
fn bridge_autoload() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bridges/laravel/autoload.php")
}

/// The application, built once: `None` (said loudly) where PHP or Laravel is
/// missing outside CI.
pub fn app() -> Option<&'static LaravelApp> {
    static APP: OnceLock<Option<LaravelApp>> = OnceLock::new();
    APP.get_or_init(LaravelApp::build).as_ref()
}

/// The built application, in a directory of its own for the test run.
pub struct LaravelApp {
    dir: tempfile::TempDir,
}

impl LaravelApp {
    fn build() -> Option<LaravelApp> {
        let install = "apt-get install php8.2-cli php8.2-mysql php-laravel-framework";
        tools::required(&["php"], install, "the Laravel bridge")?;
        let framework = Path::new("/usr/share/php/Illuminate/Foundation/Application.php");
        if !framework.exists() {
            let ci = std::env::var("CI").ok();
            assert!(
                !tools::says_ci(ci.as_deref()),
                "no Laravel in /usr/share/php, and CI is set: {install}"
            );
            eprintln!("\n!!!!! SKIPPED: no Laravel ({install}): the Laravel bridge was NOT checked !!!!!\n");
            return None;
        }
        let dir = tempfile::tempdir().expect("a directory for the Laravel app");
        copy_tree(&sources(), dir.path());
        for made in ["bootstrap/cache", "storage/logs", "vendor"] {
            std::fs::create_dir_all(dir.path().join(made)).expect("the app's directories");
        }
        std::fs::write(dir.path().join("vendor/autoload.php"), vendor_autoload())
            .expect("write vendor/autoload.php");
        let app = LaravelApp { dir };
        // The framework's own migrations for its queue tables.
        for command in ["queue:table", "queue:failed-table"] {
            let done = std::process::Command::new("php")
                .arg(app.dir.path().join("artisan"))
                .arg(command)
                .env_remove("DATABASE_URL")
                .output()
                .expect("run php artisan");
            assert!(done.status.success(), "php artisan {command}: {done:?}");
        }
        Some(app)
    }

    /// An instance of the application on `db`, migrated.
    pub async fn instance(&'static self, db: &TestDb) -> Laravel {
        let dir = tempfile::tempdir().expect("a directory for the app's instance");
        std::fs::create_dir_all(dir.path().join("storage/logs")).expect("storage");
        std::fs::write(
            dir.path().join(".env"),
            format!("DATABASE_URL={}\n", db.url),
        )
        .expect("write .env");
        let artisan = instance_artisan(self.dir.path());
        std::fs::write(dir.path().join("artisan"), artisan).expect("write artisan");
        let laravel = Laravel { dir };
        laravel.artisan(&["migrate", "--force"]).await;
        laravel
    }
}

/// What `composer install` would give the application: Laravel (Debian's), the
/// bridge (through its autoload.php, as without Composer), and `App\`.
fn vendor_autoload() -> String {
    format!(
        r#"<?php
require_once '/usr/share/php/Illuminate/autoload.php';
require_once '{bridge}';
spl_autoload_register(static function (string $class): void {{
    if (strncmp($class, 'App\\', 4) === 0) {{
        $file = dirname(__DIR__).'/app/'.str_replace('\\', '/', substr($class, 4)).'.php';
        if (is_file($file)) {{
            require $file;
        }}
    }}
}});
"#,
        bridge = bridge_autoload().display()
    )
}

/// The `artisan` of one test's instance: the shared application, with the
/// instance's `.env` and storage.
fn instance_artisan(app: &Path) -> String {
    format!(
        r#"#!/usr/bin/env php
<?php
define('LARAVEL_START', microtime(true));
require '{app}/vendor/autoload.php';
$app = require_once '{app}/bootstrap/app.php';
$app->useEnvironmentPath(__DIR__);
$app->useStoragePath(__DIR__.'/storage');
$kernel = $app->make(Illuminate\Contracts\Console\Kernel::class);
$status = $kernel->handle($input = new Symfony\Component\Console\Input\ArgvInput, new Symfony\Component\Console\Output\ConsoleOutput);
$kernel->terminate($input, $status);
exit($status);
"#,
        app = app.display()
    )
}

/// One test's instance of the application.
pub struct Laravel {
    dir: tempfile::TempDir,
}

impl Laravel {
    /// Its `artisan`.
    pub fn artisan_path(&self) -> PathBuf {
        self.dir.path().join("artisan")
    }

    /// `php artisan ARGS`, as a command to start.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("php");
        cmd.arg(self.artisan_path())
            .args(args)
            .env_remove("DATABASE_URL")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    /// Runs `php artisan ARGS` to its end, expecting success; its stdout.
    pub async fn artisan(&self, args: &[&str]) -> String {
        let run = self.command(args).output();
        let done = tokio::time::timeout(Duration::from_secs(120), run)
            .await
            .expect("php artisan ends within 2 minutes")
            .expect("run php artisan");
        assert!(
            done.status.success(),
            "php artisan {args:?}: {}\n{}",
            String::from_utf8_lossy(&done.stdout),
            String::from_utf8_lossy(&done.stderr)
        );
        String::from_utf8_lossy(&done.stdout).into_owned()
    }

    /// Dispatches `count` jobs of `App\Jobs\JOB` with Laravel's `dispatch()`, keyed
    /// `JOB-1`, `JOB-2`… in `job_runs`; `args` follow the key in its constructor.
    pub async fn dispatch(&self, job: &str, count: usize, args: &[&str]) {
        let count = count.to_string();
        let mut all = vec!["app:dispatch", job, &count];
        all.extend_from_slice(args);
        self.artisan(&all).await;
    }

    /// `php artisan queue:work database --queue=default`, Laravel's own worker.
    pub fn queue_work(&self) -> Child {
        self.command(&[
            "queue:work",
            "database",
            "--queue=default",
            "--sleep=1",
            "--tries=3",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start php artisan queue:work")
    }

    /// The queue file `tableq new laravel` prints for this instance.
    pub fn queue(&self) -> LaravelQueue {
        LaravelQueue {
            artisan: self.artisan_path(),
            retry_after: 90,
        }
    }
}

/// The queue file `tableq new laravel` prints, for an instance (its artisan), with
/// `poll_interval = "250ms"` on top: a test waits for what a poll finds.
pub struct LaravelQueue {
    artisan: PathBuf,
    retry_after: u64,
}

impl LaravelQueue {
    /// `--retry-after SECONDS` (default 90): when a reservation that was not
    /// renewed (tableq was killed) lets the row be claimed again.
    pub fn retry_after(mut self, seconds: u64) -> LaravelQueue {
        self.retry_after = seconds;
        self
    }

    /// Writes it as `default.toml`; its path.
    pub fn write(&self, files: &QueueFiles) -> PathBuf {
        let artisan = self.artisan.display();
        let command = format!("php {artisan} tableq:work database --queue=default");
        let retry_after = self.retry_after.to_string();
        let done = std::process::Command::new(env!("CARGO_BIN_EXE_tableq"))
            .args(["new", "laravel", "--queue", "default", "--table", "jobs"])
            .args(["--failed-table", "failed_jobs", "--connection", "database"])
            .args(["--retry-after", &retry_after, "--command", &command])
            .output()
            .expect("run tableq new laravel");
        assert!(done.status.success(), "tableq new laravel: {done:?}");
        let text = String::from_utf8(done.stdout).expect("a queue file in UTF-8");
        files.write(
            "default.toml",
            &format!("poll_interval = \"250ms\"\n{text}"),
        )
    }
}

/// The pids of the bridge processes (`tableq:work`) tableq `parent` runs.
pub fn bridge_pids(parent: i32) -> Vec<i32> {
    children(parent)
        .into_iter()
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains("tableq:work")
        })
        .collect()
}

/// What a `tableq:work` run on its own said.
#[derive(Debug)]
pub struct Worked {
    pub status: std::process::ExitStatus,
    /// Its answers, one per line: all it wrote on stdout.
    pub answers: Vec<serde_json::Value>,
    pub stdout: String,
    pub stderr: String,
}

impl Laravel {
    /// Runs `php [PHP_OPTIONS] artisan tableq:work database --queue=default` on its
    /// own, `lines` (rows as tableq hands them over) on its stdin.
    pub async fn work(&self, php_options: &[&str], lines: &[String]) -> Worked {
        use tokio::io::AsyncWriteExt;
        let mut cmd = Command::new("php");
        cmd.args(php_options)
            .arg(self.artisan_path())
            .args(["tableq:work", "database", "--queue=default"])
            .env_remove("DATABASE_URL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("start tableq:work");
        let mut stdin = child.stdin.take().expect("its stdin");
        let input: String = lines.iter().map(|line| format!("{line}\n")).collect();
        // A process that dies early closes its stdin: a broken pipe is its answer.
        let _ = stdin.write_all(input.as_bytes()).await;
        drop(stdin);
        let done = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("tableq:work ends within a minute")
            .expect("wait for tableq:work");
        let stdout = String::from_utf8_lossy(&done.stdout).into_owned();
        let answers = stdout
            .lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not an answer ({e}): {line}"))
            })
            .collect();
        Worked {
            status: done.status,
            answers,
            stdout,
            stderr: String::from_utf8_lossy(&done.stderr).into_owned(),
        }
    }
}

/// The rows of `jobs` (`WHERE condition`, by id) as tableq hands them to a worker:
/// one JSON object per row, `attempts` as the select read it.
pub async fn job_lines(db: &TestDb, condition: &str) -> Vec<String> {
    let rows: Vec<(String,)> = db
        .rows(&format!(
            "SELECT JSON_OBJECT('id', id, 'queue', queue, 'payload', payload, 'attempts', attempts,
               'reserved_at', reserved_at, 'available_at', available_at, 'created_at', created_at)
             FROM jobs WHERE {condition} ORDER BY id"
        ))
        .await;
    rows.into_iter().map(|(line,)| line).collect()
}

/// `line` (a row of [`job_lines`]) as claimed once more: `attempts` + `more`.
pub fn attempted(line: &str, more: u64) -> String {
    let mut row: serde_json::Value = serde_json::from_str(line).expect("a row as JSON");
    let attempts = row["attempts"].as_u64().unwrap_or(0);
    row["attempts"] = (attempts + more).into();
    row.to_string()
}
