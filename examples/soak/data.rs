//! What each row holds, chosen by its id so the checker can tell what should have
//! arrived; what a row looks like once it arrives; and the producer that inserts the
//! rows while the queues run, as an application would.
//!
//! The values are hostile on purpose: NULLs, 1 MiB of text, 4-byte emoji, bytes that
//! are not UTF-8, SQL (`'; DROP TABLE …`) and shell (`$(…)`) that must stay text.

use std::time::{Duration, Instant};

use base64::Engine;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Value};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};

use crate::database::{self, QUEUES};

/// Rows whose id is a multiple of this fail every time, in every queue: they end
/// failed for good.
pub const POISON: u64 = 997;
/// Rows whose id is 1 modulo this hang in the SQL action (past its timeout).
pub const SQL_HANG: u64 = 1999;
/// A file the command action would create if a value ever reached a shell.
pub const PWNED: &str = "PWNED";

/// Rows inserted per statement (into the queues that have `--rows` rows).
const CHUNK: u64 = 100;
/// The lease queue's jobs take 1 to 3 s each, so it has a tenth of the rows: it
/// drains within the soak's time like the others.
pub const LEASE_SHARE: u64 = 10;

/// How many rows `queue` gets when the others get `rows`.
pub fn rows_of(queue: &str, rows: u64) -> u64 {
    match queue {
        "lease" => rows.div_ceil(LEASE_SHARE),
        _ => rows,
    }
}

pub fn is_poison(id: u64) -> bool {
    id.is_multiple_of(POISON)
}

/// Rows that fail every time in `queue`: the poison rows (in every queue), and in
/// the SQL queue the rows whose action hangs past its timeout.
pub fn fails_by_design(queue: &str, id: u64) -> bool {
    is_poison(id) || (queue == "sql" && id % SQL_HANG == 1)
}

/// The values of row `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Values {
    pub label: Option<String>,
    pub body: Option<String>,
    pub raw: Option<Vec<u8>>,
}

pub fn values(id: u64) -> Values {
    let label = match id % 7 {
        0 => None,
        1 => Some(format!("'; DROP TABLE sql_job; -- {id}")),
        2 => Some(format!("$(touch {PWNED}) `touch {PWNED}` ${{HOME}} {id}")),
        3 => Some(format!("🦀 𝄞 👍🏽 {id}")),
        4 => Some(format!("tab\tnewline\n\"quote\" back\\slash {id}")),
        _ => Some(format!("row {id}")),
    };
    let body = match id {
        _ if id % 1000 == 500 => Some(megabyte()),
        _ if id.is_multiple_of(7) => None,
        _ => Some(format!("body of {id}: ünïcödé 🦀, '' \"\" \\ %s {{id}}")),
    };
    let raw = match id % 5 {
        0 => Some(vec![0xff, 0xfe, 0xc3, 0x28, b'0' + (id % 10) as u8, 0x80]),
        1 => None,
        _ => Some(format!("raw-{id}").into_bytes()),
    };
    Values { label, body, raw }
}

/// 1 MiB of UTF-8 text (cut at a character boundary), with quotes, backslashes,
/// emoji and shell syntax all through it.
fn megabyte() -> String {
    const PIECE: &str = "The quick brown fox 🦀 jumps; 'single' \"double\" \\ $(id) ";
    let mut text = PIECE.repeat((1 << 20) / PIECE.len() + 1);
    let mut cut = 1 << 20;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text
}

/// The row's values as tableq's JSON has them: text as strings, NULL as null, bytes
/// that are not UTF-8 as base64.
pub fn json_fields(values: &Values) -> [Json; 3] {
    let text = |v: &Option<String>| v.clone().map_or(Json::Null, Json::String);
    let raw = match &values.raw {
        None => Json::Null,
        Some(bytes) => Json::String(match std::str::from_utf8(bytes) {
            Ok(text) => text.to_string(),
            Err(_) => base64::engine::general_purpose::STANDARD.encode(bytes),
        }),
    };
    [text(&values.label), text(&values.body), raw]
}

/// A short digest of some JSON values, to compare what arrived with what was meant.
pub fn fingerprint(fields: &[Json]) -> String {
    let bytes = serde_json::to_vec(fields).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    digest[..12].iter().map(|b| format!("{b:02x}")).collect()
}

/// What the command's argv should carry for `values`: `{label}`, a NUL, `{raw}`
/// (NULL as nothing), as its script writes them down.
pub fn argv_bytes(values: &Values) -> Vec<u8> {
    let mut bytes = values.label.clone().unwrap_or_default().into_bytes();
    bytes.push(0);
    bytes.extend(values.raw.clone().unwrap_or_default());
    bytes
}

/// Inserts [`rows_of`] rows into every queue's table, in chunks spread evenly over
/// `over`, each chunk retried until the server takes it (it may be down).
pub async fn produce(url: String, rows: u64, over: Duration) -> anyhow::Result<()> {
    let start = Instant::now();
    let chunks = rows.div_ceil(CHUNK);
    let mut conn = database::connect(&url).await?;
    for chunk in 0..chunks {
        let due = start + over.mul_f64(chunk as f64 / chunks as f64);
        tokio::time::sleep_until(due.into()).await;
        for queue in QUEUES {
            let ids = chunk_ids(chunk, chunks, rows_of(queue, rows));
            if !ids.is_empty() {
                conn = insert_surely(conn, &url, &database::table(queue), ids).await?;
            }
        }
    }
    conn.disconnect().await.ok();
    Ok(())
}

/// The ids of chunk `chunk` of `chunks` for a queue of `rows` rows: its share, so
/// that a queue with fewer rows is filled over the same time.
fn chunk_ids(chunk: u64, chunks: u64, rows: u64) -> std::ops::RangeInclusive<u64> {
    chunk * rows / chunks + 1..=(chunk + 1) * rows / chunks
}

/// Inserts rows `ids` into `table`; after an error, reconnects and looks whether
/// the statement committed before trying again (for up to two minutes).
async fn insert_surely(
    mut conn: Conn,
    url: &str,
    table: &str,
    ids: std::ops::RangeInclusive<u64>,
) -> anyhow::Result<Conn> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let error = match insert(&mut conn, table, ids.clone()).await {
            Ok(()) => return Ok(conn),
            Err(error) => error,
        };
        anyhow::ensure!(
            Instant::now() < deadline,
            "cannot insert into {table}: {error}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        conn = database::connect(url).await?;
        let sql = format!(
            "SELECT COUNT(*) FROM {table} WHERE id BETWEEN {} AND {}",
            ids.start(),
            ids.end()
        );
        let present: Option<u64> = conn.query_first(sql).await.unwrap_or(None);
        if present == Some(ids.end() - ids.start() + 1) {
            return Ok(conn);
        }
    }
}

async fn insert(
    conn: &mut Conn,
    table: &str,
    ids: std::ops::RangeInclusive<u64>,
) -> Result<(), mysql_async::Error> {
    let mut params: Vec<Value> = Vec::new();
    let mut tuples = Vec::new();
    for id in ids {
        let v = values(id);
        params.extend([id.into(), v.label.into(), v.body.into(), v.raw.into()]);
        tuples.push("(?, ?, ?, ?)");
    }
    let sql = format!(
        "INSERT INTO {table} (id, label, body, raw) VALUES {}",
        tuples.join(", ")
    );
    conn.exec_drop(sql, params).await
}
