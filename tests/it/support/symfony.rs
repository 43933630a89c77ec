//! A Symfony 5.4 app for the Symfony bridge's tests (`tests/it/frameworks/symfony.rs`),
//! built once per test process from Debian's packages: the sources in
//! `support/apps/symfony/` copied to a directory of their own, the repository's
//! `bridges/symfony` linked in as `bridge/` (loaded through its `autoload.php`), and
//! the container compiled. Each test runs it on a database of its own
//! (`DATABASE_URL`): Messenger's Doctrine transport `async` (queue `default`, retries
//! after 1 s and 2 s) and its failure transport `failed` (queue `failed`), both in
//! `messenger_messages`, made by `messenger:setup-transports`. PHP runs in UTC.
//!
//! The app's handlers write to two tables of the test: `handled` (per `CountMe`
//! message: `executions` when its handler starts, `completions` when it ends, `via`
//! the tableq queue that ran it first or `messenger:consume`, `first_at` when) and `attempts` (a row per run
//! of an `Explode` handler, which throws). A trigger copies every row Messenger
//! writes to `messenger_messages` into `sent`, so a test sees the retries' delays
//! after tableq has deleted them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use std::time::Duration;

use super::daemon::{run_to_end, tableq};
use super::{copy_tree, tools, QueueFiles, TestDb};

/// The built app.
pub struct SymfonyApp {
    dir: PathBuf,
}

/// The app, built on first use; `None` (having said so loudly) when PHP or Debian's
/// Symfony packages are missing outside CI.
pub fn app() -> Option<&'static SymfonyApp> {
    static APP: OnceLock<Option<SymfonyApp>> = OnceLock::new();
    APP.get_or_init(build).as_ref()
}

const DEBIAN_PACKAGES: [&str; 4] = [
    "/usr/share/php/Symfony/Bundle/FrameworkBundle",
    "/usr/share/php/Symfony/Component/Messenger/Bridge/Doctrine",
    "/usr/share/php/Doctrine/DBAL",
    "/usr/share/php/Doctrine/Persistence",
];

fn build() -> Option<SymfonyApp> {
    let install = "apt-get install php8.2-cli php8.2-mysql php-symfony-framework-bundle \
                   php-symfony-console php-symfony-messenger php-symfony-doctrine-messenger \
                   php-doctrine-dbal php-doctrine-persistence";
    tools::required(&["php"], install, "the Symfony bridge")?;
    if let Some(missing) = DEBIAN_PACKAGES.iter().find(|p| !Path::new(p).is_dir()) {
        let ci = std::env::var("CI").ok();
        assert!(
            !tools::says_ci(ci.as_deref()),
            "{missing} is missing, and CI is set: {install} (scripts/test.sh does)"
        );
        eprintln!("\n!!!!! SKIPPED: {missing} is missing ({install}): the Symfony bridge was NOT checked !!!!!\n");
        return None;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("symfony-app-{}", std::process::id()));
    remove_apps_of_gone_processes();
    let _ = std::fs::remove_dir_all(&dir);
    copy_tree(&root.join("tests/it/support/apps/symfony"), &dir);
    std::os::unix::fs::symlink(root.join("bridges/symfony"), dir.join("bridge"))
        .expect("link the bridge into the app");
    let app = SymfonyApp { dir };
    let warm = app
        .console_with("mysql://nobody@127.0.0.1:1/none", &["cache:warmup"])
        .output()
        .expect("run bin/console");
    assert!(
        warm.status.success(),
        "the Symfony app does not build: {}",
        String::from_utf8_lossy(&warm.stderr)
    );
    Some(app)
}

/// The apps earlier test processes built and left (a static is never dropped).
fn remove_apps_of_gone_processes() {
    let Ok(entries) = std::fs::read_dir(env!("CARGO_TARGET_TMPDIR")) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix("symfony-app-")
            .and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl SymfonyApp {
    /// `bin/console`, for the queue file's command.
    pub fn console_path(&self) -> PathBuf {
        self.dir.join("bin/console")
    }

    /// `php -d date.timezone=UTC bin/console ARGS…` on `db`.
    pub fn console(&self, db: &TestDb, args: &[&str]) -> Command {
        self.console_with(&db.url, args)
    }

    fn console_with(&self, url: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new("php");
        cmd.args(["-d", "date.timezone=UTC"])
            .arg(self.console_path())
            .args(args)
            .env("DATABASE_URL", url)
            .current_dir(&self.dir)
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `bin/console ARGS…` on `db` to its end, expecting success; its stdout.
    pub async fn run(&self, db: &TestDb, args: &[&str]) -> String {
        let mut cmd = tokio::process::Command::from(self.console(db, args));
        let done = cmd.output().await.expect("run bin/console");
        assert!(
            done.status.success(),
            "bin/console {args:?} failed: {}",
            String::from_utf8_lossy(&done.stderr)
        );
        String::from_utf8_lossy(&done.stdout).into_owned()
    }

    /// The transports' table (Messenger's own setup) and the test's tables.
    pub async fn setup(&self, db: &TestDb) {
        self.run(db, &["messenger:setup-transports"]).await;
        db.exec(
            "CREATE TABLE handled (number INT PRIMARY KEY, executions INT NOT NULL,
               completions INT NOT NULL, via VARCHAR(100) NOT NULL, first_at DATETIME(3) NOT NULL);
             CREATE TABLE attempts (number INT NOT NULL, at DATETIME(3) NOT NULL);
             CREATE TABLE sent (id BIGINT NOT NULL, queue_name VARCHAR(190) NOT NULL,
               created_at DATETIME NOT NULL, available_at DATETIME NOT NULL);
             CREATE TRIGGER sent_copy AFTER INSERT ON messenger_messages FOR EACH ROW
               INSERT INTO sent VALUES (NEW.id, NEW.queue_name, NEW.created_at, NEW.available_at)",
        )
        .await;
    }

    /// `$bus->dispatch(...)` of `count` messages of `kind` (`count`, `explode`,
    /// `exhaust`), numbered from `first`, with the options of `app:dispatch`
    /// (`--work-ms=5`, `--delay-ms=3000`: a DelayStamp).
    pub async fn dispatch(
        &self,
        db: &TestDb,
        kind: &str,
        first: u32,
        count: u32,
        options: &[&str],
    ) {
        let (first, count) = (format!("--first={first}"), count.to_string());
        let mut args = vec!["app:dispatch", kind, &count, &first];
        args.extend_from_slice(options);
        self.run(db, &args).await;
    }

    /// The queue file of the transport `async` on `db`, as `tableq new symfony`
    /// writes it, for tableq to run with the bridge (`tableq:consume async`) as its
    /// worker; Messenger's redelivery after `redeliver_timeout` seconds.
    pub async fn queue_file(
        &self,
        db: &TestDb,
        files: &QueueFiles,
        name: &str,
        redeliver_timeout: u32,
    ) -> PathBuf {
        let command = format!(
            "env DATABASE_URL={} php -d date.timezone=UTC {} tableq:consume async",
            db.url,
            self.console_path().display()
        );
        let redeliver = redeliver_timeout.to_string();
        let args = [
            "new",
            "symfony",
            "--transport",
            "async",
            "--table",
            "messenger_messages",
            "--queue-name",
            "default",
            "--redeliver-timeout",
            &redeliver,
            "--command",
            &command,
        ];
        let new = run_to_end(tableq(&args), Duration::from_secs(30)).await;
        assert_eq!(new.code(), Some(0), "tableq new symfony: {}", new.stderr);
        files.write(&format!("{name}.toml"), &new.stdout)
    }
}
