//! The hand-written worker of the article, the raw SQL limit tableq is measured
//! against: per item BEGIN; claim one id FOR UPDATE SKIP LOCKED; read the row; mark
//! it sent; COMMIT — with prepared statements, until a claim finds nothing.

use std::time::Instant;

use anyhow::ensure;
use mysql_async::prelude::Queryable;
use mysql_async::{Opts, Row};

use crate::claim::Claim;
use crate::engine::Sample;
use crate::server::{self, Bench};
use crate::{email, measure};

/// The raw SQL limit: `k` connections, each running the article's transaction per
/// item until its claim finds nothing.
pub async fn drain(bench: &mut Bench, claim: Claim, k: usize, n: u64) -> anyhow::Result<Sample> {
    let before = bench.probe.snapshot().await?;
    let cpu_before = measure::self_cpu();
    let started = Instant::now();
    let workers: Vec<_> = (0..k)
        .map(|_| tokio::spawn(worker(bench.opts.clone(), claim.raw_sql(), u64::MAX)))
        .collect();
    let mut items = 0;
    for worker in workers {
        items += worker.await??;
    }
    let wall = started.elapsed().as_secs_f64();
    let cpu = measure::self_cpu() - cpu_before;
    let after = bench.probe.snapshot().await?;
    let delta = bench.probe.delta(&before, &after);
    ensure!(items == n, "the raw clients processed {items} of {n} rows");
    email::verify_sent(&mut bench.admin, n).await?;
    Ok(Sample::new(items, wall, cpu, None, &delta))
}

/// One hand-written worker: the article's loop, with prepared statements, until a
/// claim finds nothing (or `limit` items are done). Returns the items it did.
pub async fn worker(opts: Opts, claim_sql: String, limit: u64) -> anyhow::Result<u64> {
    let mut conn = server::read_committed(opts).await?;
    let claim = conn.prep(claim_sql).await?;
    let read = conn.prep("SELECT * FROM email WHERE id = ?").await?;
    let mark = conn
        .prep("UPDATE email SET status = 'sent' WHERE id = ?")
        .await?;
    let mut done = 0;
    while done < limit {
        conn.query_drop("BEGIN").await?;
        let step = async {
            let Some(id) = conn.exec_first::<u64, _, _>(&claim, ()).await? else {
                return Ok(false);
            };
            let _row: Option<Row> = conn.exec_first(&read, (id,)).await?;
            conn.exec_drop(&mark, (id,)).await?;
            Ok::<_, mysql_async::Error>(true)
        };
        match step.await {
            Ok(true) => {
                conn.query_drop("COMMIT").await?;
                done += 1;
            }
            Ok(false) => {
                conn.query_drop("COMMIT").await?;
                break;
            }
            // Deadlock or lock wait timeout: the transaction is gone; try again.
            Err(mysql_async::Error::Server(e)) if e.code == 1213 || e.code == 1205 => {
                conn.query_drop("ROLLBACK").await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    conn.disconnect().await?;
    Ok(done)
}
