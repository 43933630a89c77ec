//! What drains the table in a throughput run — the raw clients, or tableq at a
//! batch size, in item or batch scope — and what one drain measured.

use crate::claim::Claim;
use crate::measure::Delta;
use crate::server::Bench;
use crate::{daemon, raw};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Engine {
    Raw,
    Tableq {
        batch: usize,
    },
    /// tableq with `scope = "batch"`: one UPDATE per batch, joined with `:batch`.
    SetBased {
        batch: usize,
    },
}

impl Engine {
    /// Every engine, the raw clients first: the others are compared with them.
    pub const ALL: [Engine; 4] = [
        Engine::Raw,
        Engine::Tableq { batch: 1 },
        Engine::Tableq { batch: 100 },
        Engine::SetBased { batch: 100 },
    ];

    pub fn label(self) -> String {
        match self {
            Engine::Raw => "raw SQL".into(),
            Engine::Tableq { batch } => format!("tableq b={batch}"),
            Engine::SetBased { batch } => format!("tableq b={batch} scope=batch"),
        }
    }

    /// The claim this engine sends, as EXPLAIN sees it.
    pub fn claim_sql(self, claim: Claim, table: &str) -> String {
        match self {
            Engine::Raw => claim.raw_sql(),
            Engine::Tableq { batch } | Engine::SetBased { batch } => claim.tableq_sql(table, batch),
        }
    }

    /// Drains the freshly filled `email` table of its `n` rows with `k` workers.
    pub async fn drain(
        self,
        bench: &mut Bench,
        claim: Claim,
        k: usize,
        n: u64,
    ) -> anyhow::Result<Sample> {
        match self {
            Engine::Raw => raw::drain(bench, claim, k, n).await,
            Engine::Tableq { batch } => daemon::drain(bench, claim, k, batch, n).await,
            Engine::SetBased { batch } => {
                let queue = daemon::set_based_queue_file("email", claim, k, batch);
                daemon::drain_with(bench, &queue, n).await
            }
        }
    }
}

/// One drain of a freshly filled table.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub items: u64,
    pub wall: f64,
    /// The client's CPU: tableq's (wait4), or this process's for the raw clients.
    pub cpu: f64,
    pub server_cpu: Option<f64>,
    pub max_rss_kb: Option<u64>,
    pub reads: u64,
    pub reads_by_kind: [(char, u64); 5],
    pub questions: u64,
}

impl Sample {
    /// A drain of `items` that took `wall` seconds and `cpu` seconds of the client's
    /// CPU, and `server` of the server's work.
    pub fn new(items: u64, wall: f64, cpu: f64, max_rss_kb: Option<u64>, server: &Delta) -> Sample {
        Sample {
            items,
            wall,
            cpu,
            server_cpu: server.server_cpu,
            max_rss_kb,
            reads: server.counters.handler_reads(),
            reads_by_kind: server.counters.handler_reads_by_kind(),
            questions: server.counters.get("Questions"),
        }
    }

    /// Items per second.
    pub fn rate(&self) -> f64 {
        self.items as f64 / self.wall
    }
}
