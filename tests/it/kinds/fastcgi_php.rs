//! What counts as done under PHP-FPM, whatever the pool's settings: a script that
//! died — a fatal error, an uncaught exception, `memory_limit` or
//! `max_execution_time` exhausted, a parse error — is its item's failure with PHP's
//! own message, never done, whether the pool displays its errors (200 with the
//! message in the body: `php-fpm -n`'s default) or logs them to a file (500 and an
//! empty body: `:error` names the file); with `done_header`, a script that stops
//! early (`exit()`) is a failure too.

use crate::support::fpm::Fpm;
use crate::support::{load, run_until_empty, QueueFiles, TestDb};

use super::fastcgi::{appended, job_table, jobs};

/// A job that dies as row `id` asks (1 and 8 finish: they note their id and say
/// they are done; 7 stops early with `exit()`).
const DIES: &str = r#"
$row = json_decode(file_get_contents('php://input'), true);
switch ($row['id']) {
    case 2: undefined_function_here(); break;
    case 3: throw new RuntimeException("mail server said no to {$row['id']}");
    case 4: ini_set('memory_limit', '8M'); $big = str_repeat('x', 32 * 1024 * 1024); break;
    case 5: set_time_limit(1); while (true) { $spin = hash('sha256', 'burn'); } break;
    case 6: include __DIR__ . '/broken.php'; break;
    case 7: echo "half done\n"; exit();
}
header('Tableq-Done: 1');
file_put_contents(__DIR__ . '/done.log', $row['id'] . "\n", FILE_APPEND | LOCK_EX);
echo 'sent ', $row['id'];
"#;

/// What each row came to: its state and `:error`, by id.
async fn fates(db: &TestDb) -> Vec<(u32, String, Option<String>)> {
    db.rows("SELECT id, state, error FROM job ORDER BY id")
        .await
}

/// Runs [`DIES`] over rows 1-8 on `fpm` — rows 1-6 without `done_header`, then 7-8
/// with it — and checks that only rows 1 and 8 are done, each once; returns the
/// rows' fates.
async fn run_deaths(fpm: &Fpm, name: &str) -> Vec<(u32, String, Option<String>)> {
    let db = TestDb::new().await;
    job_table(&db, 8).await;
    let script = fpm.script("dies.php", DIES);
    fpm.script("broken.php", "function ( {");
    let files = QueueFiles::new();
    let failed = "UPDATE job SET state = 'failed', status = :status, error = :error WHERE id = :id";
    let plain = jobs(name, fpm, &script)
        .select("SELECT id FROM job WHERE state = 'waiting' AND id <= 6 ORDER BY id")
        .on_failure(failed)
        .write(&files);
    run_until_empty(load(&[plain]), &db.url).await;
    let acked = jobs(&format!("{name}_acked"), fpm, &script)
        .select("SELECT id FROM job WHERE state = 'waiting' AND id >= 7 ORDER BY id")
        .action_set("done_header", "Tableq-Done")
        .on_failure(failed)
        .write(&files);
    run_until_empty(load(&[acked]), &db.url).await;
    assert_eq!(
        appended(fpm),
        [1, 8],
        "only the rows that finished noted their work"
    );
    let fates = fates(&db).await;
    let done: Vec<u32> = fates
        .iter()
        .filter(|f| f.1 == "done")
        .map(|f| f.0)
        .collect();
    assert_eq!(done, [1, 8], "{fates:?}");
    let early = fates[6].2.as_deref().unwrap_or_default();
    assert!(
        early.contains("without its `Tableq-Done` header"),
        "{early}"
    );
    fates
}

/// `php-fpm -n`: no php.ini, so PHP's own defaults — display_errors on, in HTML.
/// Every way PHP dies answers 200 with the message at the end of the body, and is
/// the item's failure with PHP's message (type, text, file:line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_that_displays_errors_never_records_a_death_as_done() {
    let Some(fpm) = Fpm::start_with(2, &["php_admin_value[log_errors] = off"]) else {
        return;
    };
    let fates = run_deaths(&fpm, "displayed").await;
    let error = |id: usize| fates[id - 1].2.clone().unwrap_or_default();
    let dies = fpm.dir().join("dies.php").display().to_string();
    let expected = [
        (
            2,
            "PHP Fatal error: Uncaught Error: Call to undefined function undefined_function_here()",
        ),
        (
            3,
            "PHP Fatal error: Uncaught RuntimeException: mail server said no to 3",
        ),
        (
            4,
            "PHP Fatal error: Allowed memory size of 8388608 bytes exhausted",
        ),
        (
            5,
            "PHP Fatal error: Maximum execution time of 1 second exceeded",
        ),
        (6, "PHP Parse error: syntax error"),
    ];
    for (id, start) in expected {
        assert!(error(id).starts_with(start), "row {id}: {}", error(id));
    }
    assert!(error(2).contains(&format!("{dies}:5")), "{}", error(2));
    assert!(error(6).contains("broken.php on line"), "{}", error(6));
}

/// display_errors off and error_log to a file: PHP answers 500 with an empty body,
/// and its message is only in that file — every death is the item's failure, and
/// `:error` names the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_that_logs_to_a_file_names_it_in_the_error() {
    let settings = [
        "php_admin_value[display_errors] = off",
        "php_admin_flag[log_errors] = on",
        "php_admin_value[error_log] = {dir}/php-errors.log",
    ];
    let Some(fpm) = Fpm::start_with(2, &settings) else {
        return;
    };
    let fates = run_deaths(&fpm, "filed").await;
    let log = fpm.dir().join("php-errors.log").display().to_string();
    for (id, state, error) in &fates[1..6] {
        let error = error.as_deref().unwrap_or_default();
        assert_eq!(state, "failed", "row {id}");
        assert!(
            error.contains(&format!("logged why to {log}")),
            "row {id}: {error}"
        );
    }
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(logged.contains("mail server said no to 3"), "{logged}");
}
