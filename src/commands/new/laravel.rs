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
    let queue = literal(&args.queue);
    let connection = literal(&args.connection);
    let command = argv(&args.command)?;
    let (retry_after, workers) = (args.retry_after.max(3), args.workers.max(1));
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
