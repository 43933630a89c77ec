//! The queue file for Symfony Messenger's Doctrine transport: its
//! `messenger_messages` table worked in place by `bin/console tableq:consume`
//! (bridges/symfony), side by side with `messenger:consume` if need be. The select
//! is the one the transport's receiver claims with; the lease is Symfony's own
//! `delivered_at`; retries and the failure transport are Symfony's, sent by its own
//! listeners in the bridge.

use super::fill::{argv, fill, literal, plain, table};
use crate::commands::cli::SymfonyArgs;
use crate::commands::Failure;

pub fn queue_file(args: &SymfonyArgs) -> Result<String, Failure> {
    let messages = table("table", &args.table)?;
    let queue = literal("queue-name", &args.queue_name)?;
    let failed = literal("failed-queue-name", &args.failed_queue_name)?;
    if args.redeliver_timeout < 3 {
        return Err(Failure::Usage(format!(
            "--redeliver-timeout {}: give the transport's redeliver_timeout, at least 3 s",
            args.redeliver_timeout
        )));
    }
    let transport = plain("transport", &args.transport)?;
    let default_command = format!("php bin/console tableq:consume {transport}");
    let command = argv(args.command.as_deref().unwrap_or(&default_command))?;
    let (redeliver, workers) = (args.redeliver_timeout, args.workers.max(1));
    let values = [
        ("messages", messages.as_str()),
        ("queue", &queue),
        ("failed", &failed),
        ("command", &command),
        ("transport", &transport),
        ("redeliver", &redeliver.to_string()),
        ("renew_every", &(redeliver / 3).min(600).to_string()),
        ("workers", &workers.to_string()),
    ];
    Ok(fill(include_str!("symfony.toml.in"), &values))
}
