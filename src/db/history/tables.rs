//! The history tables' DDL. `run` creates them at start when its account may;
//! where it may not, the copy keeps no history and says once which grant to give.
//! The reference (`docs/src/reference/history-tables.md`) shows the same text.

/// Per queue, per minute, per copy: what it did, and how the queue looked.
pub const HISTORY: &str = "CREATE TABLE IF NOT EXISTS tableq_history (
  queue VARCHAR(191) NOT NULL,
  minute_at DATETIME NOT NULL COMMENT 'UTC: the minute''s start',
  copy VARCHAR(191) NOT NULL COMMENT 'host:pid:started',
  done INT UNSIGNED NOT NULL DEFAULT 0,
  failed INT UNSIGNED NOT NULL DEFAULT 0,
  gave_up INT UNSIGNED NOT NULL DEFAULT 0,
  returned INT UNSIGNED NOT NULL DEFAULT 0,
  held_back INT UNSIGNED NOT NULL DEFAULT 0,
  action_sketch MEDIUMTEXT NULL COMMENT 'the action times: a DDSketch (JSON), merged across copies',
  backlog INT UNSIGNED NULL COMMENT 'waiting rows at the minute''s end',
  lag_s DOUBLE NULL COMMENT 'the oldest waiting row''s age at the minute''s end',
  PRIMARY KEY (queue, minute_at, copy),
  KEY by_minute (minute_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='tableq: each copy''s minutes'";

/// Each failed attempt of an item.
pub const ATTEMPTS: &str = "CREATE TABLE IF NOT EXISTS tableq_attempts (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  queue VARCHAR(191) NOT NULL,
  item_key VARCHAR(191) NOT NULL COMMENT 'as tableq prints it: hex:… for bytes',
  at DATETIME(6) NOT NULL COMMENT 'UTC',
  copy VARCHAR(191) NOT NULL COMMENT 'host:pid:started',
  ms INT UNSIGNED NOT NULL COMMENT 'how long the action ran',
  status BIGINT NULL,
  kind VARCHAR(191) NULL,
  error TEXT NOT NULL,
  gave_up TINYINT(1) NOT NULL DEFAULT 0 COMMENT 'its outcome left the row in [failed] select',
  KEY by_key (queue, item_key, id),
  KEY by_time (at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='tableq: failed attempts'";

/// Each copy's heartbeat.
pub const COPIES: &str = "CREATE TABLE IF NOT EXISTS tableq_copies (
  copy VARCHAR(191) NOT NULL PRIMARY KEY COMMENT 'host:pid:started',
  host VARCHAR(255) NOT NULL,
  pid INT UNSIGNED NOT NULL,
  version VARCHAR(64) NOT NULL,
  started DATETIME(6) NOT NULL COMMENT 'UTC',
  last_seen DATETIME(6) NOT NULL COMMENT 'UTC, by the database''s clock',
  queues TEXT NOT NULL COMMENT 'a JSON array of the queue names it runs here',
  in_flight INT UNSIGNED NOT NULL DEFAULT 0,
  console VARCHAR(255) NULL COMMENT 'its console''s address'
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='tableq: the copies, by heartbeat'";

/// Chores one copy does for all (the trim), and when one last did each.
pub const CHORES: &str = "CREATE TABLE IF NOT EXISTS tableq_chores (
  chore VARCHAR(64) NOT NULL PRIMARY KEY,
  done_at DATETIME(6) NOT NULL COMMENT 'UTC'
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='tableq: chores done by one copy for all'";

/// Every history table, in the order `run` creates them.
pub const ALL: [(&str, &str); 5] = [
    ("tableq_history", HISTORY),
    ("tableq_attempts", ATTEMPTS),
    ("tableq_copies", COPIES),
    ("tableq_chores", CHORES),
    ("tableq_alerts", super::alerts::ALERTS),
];

/// The grants the history needs, for a refusal's message: to create the tables
/// and use them (or, once an administrator created them, all but CREATE).
pub fn grant(database: &str, account: &str) -> String {
    let tables: Vec<String> = ALL
        .iter()
        .map(|(table, _)| {
            format!("GRANT CREATE, SELECT, INSERT, UPDATE, DELETE ON `{database}`.{table} TO {account};")
        })
        .collect();
    format!(
        "{} (without CREATE once an administrator created them: docs, reference/history-tables)",
        tables.join(" ")
    )
}

/// Creates the tables that are not there — and only those: a table found is left
/// alone, so a copy's start sends no DDL once they exist (on a Galera cluster DDL
/// runs in total order, holding up the whole cluster), and an account without
/// CREATE works once an administrator made them. Else the server's error (1142
/// when the account may not create one).
pub async fn create(conn: &mut super::HistoryConn) -> Result<(), crate::db::DbError> {
    use mysql_async::prelude::Queryable;
    let conn = &mut conn.0;
    for (table, ddl) in ALL {
        if let Err(missing) = conn
            .query_drop(format!("SELECT 1 FROM {table} LIMIT 0"))
            .await
        {
            let missing = crate::db::DbError::from(missing);
            if missing.server_code() != Some(super::NO_SUCH_TABLE) {
                return Err(missing);
            }
            conn.query_drop(ddl).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference shows the very statements `run` sends.
    #[test]
    fn the_reference_shows_the_ddl() {
        let reference = include_str!("../../../docs/src/reference/history-tables.md");
        for (table, ddl) in ALL {
            assert!(
                reference.contains(ddl),
                "the reference's {table} differs from tables.rs"
            );
        }
        let grant = grant("app", "'tableq'@'%'");
        let chores = "SELECT, INSERT, UPDATE, DELETE ON `app`.tableq_chores TO 'tableq'@'%';";
        assert!(
            grant.contains(&format!("GRANT CREATE, {chores}")),
            "{grant}"
        );
        let shown = format!("GRANT {}", chores.replace("`app`", "app"));
        assert!(reference.contains(&shown), "the reference shows the grants");
    }
}
