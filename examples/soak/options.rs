//! The soak's command line.

use std::time::Duration;

use clap::Parser;

/// A soak of tableq under faults: see examples/soak/main.rs.
#[derive(Parser, Debug, Clone)]
#[command(name = "soak")]
pub struct Options {
    /// Rows per queue (the SQL, HTTP and command queues; the lease queue has a tenth).
    #[arg(long, default_value_t = 20_000)]
    pub rows: u64,
    /// How long the nemesis runs, in seconds; then the faults heal and the queues drain.
    #[arg(long, default_value_t = 120)]
    pub seconds: u64,
    /// The nemesis's seed; default: from the clock. Printed, to replay a run's faults.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Workers per queue in each tableq process.
    #[arg(long, default_value_t = 4)]
    pub workers: u32,
    /// Keep the work directory (logs, queue files) when the run passes too.
    #[arg(long)]
    pub keep: bool,
}

impl Options {
    pub fn nemesis_time(&self) -> Duration {
        Duration::from_secs(self.seconds)
    }

    /// The producer inserts the rows over the first five sixths of the nemesis's
    /// time, so that faults meet queues with work in them until near the end.
    pub fn fill_time(&self) -> Duration {
        self.nemesis_time() * 5 / 6
    }
}
