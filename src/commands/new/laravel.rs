//! The queue file for Laravel's database queue: its `jobs` table worked in place by
//! `php artisan tableq:work` (bridges/laravel), side by side with `queue:work` if
//! need be. The select is the one `queue:work` claims with; the lease is Laravel's
//! own reservation (`reserved_at`, `attempts`); what the job decided comes back as
//! the bridge's answer, and the SQL here changes the row as Laravel would.

use super::fill::{argv, fill, literal, table};
use crate::commands::cli::LaravelArgs;
use crate::commands::Failure;

pub fn queue_file(args: &LaravelArgs) -> Result<String, Failure> {
    let jobs = table("table", &args.table)?;
    let failed = table("failed-table", &args.failed_table)?;
    let queue = literal("queue", &args.queue)?;
    let connection = literal("connection", &args.connection)?;
    if args.retry_after < 3 {
        return Err(Failure::Usage(format!(
            "--retry-after {}: give the connection's retry_after, at least 3 s (tableq renews \
             a reservation every third of it)",
            args.retry_after
        )));
    }
    let command = argv(&args.command)?;
    let (retry_after, workers) = (args.retry_after, args.workers.max(1));
    let values = [
        ("jobs", jobs.as_str()),
        ("failed", &failed),
        ("queue", &queue),
        ("connection", &connection),
        ("command", &command),
        ("retry_after", &retry_after.to_string()),
        ("renew_every", &(retry_after / 3).to_string()),
        ("workers", &workers.to_string()),
    ];
    Ok(fill(include_str!("laravel.toml.in"), &values))
}
