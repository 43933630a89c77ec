//! The three queue files all tableq processes read, and the command action's script.
//! Deadlines are short, so that faults cost seconds: `database_timeout` 3 s, action
//! timeouts 2 s, retries after 1, 2, 3… s, and a row fails for good at its
//! sixth failed attempt.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use crate::data::POISON;
use crate::database::{table, QUEUES};

pub const ACTION_TIMEOUT: Duration = Duration::from_secs(2);
pub const DATABASE_TIMEOUT: Duration = Duration::from_secs(3);
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
pub const ATTEMPTS: u32 = 6;
/// The command action's script, in the queues' directory (its working directory).
pub const SCRIPT: &str = "soak-command";
/// The nemesis writes `fail` or `hang` here for every command to read.
pub const SWITCH: &str = "command.switch";
/// The command action's log, one line per delivery, and its folder of what arrived.
pub const COMMAND_LOG: &str = "deliveries.log";
pub const COMMAND_INPUTS: &str = "in";

/// Writes (or rewrites, for a reload) the three queue files into `dir`, each
/// replaced at once so that a process starting meanwhile reads a whole file.
pub fn write(dir: &Path, receiver: &str, workers: u32) -> anyhow::Result<()> {
    for queue in QUEUES {
        let path = dir.join(format!("{queue}.toml"));
        let temporary = dir.join(format!(".{queue}.toml.new"));
        std::fs::write(&temporary, queue_file(queue, receiver, workers))?;
        std::fs::rename(&temporary, &path)?;
    }
    Ok(())
}

fn queue_file(queue: &str, receiver: &str, workers: u32) -> String {
    let table = table(queue);
    let (batch, action) = action(queue, receiver);
    format!(
        r#"# The soak's {queue} queue (examples/soak/queues.rs): every tableq process reads it.
workers = {workers}
batch = {batch}
poll_interval = "250ms"
error_backoff = "250ms"
database_timeout = "{database_timeout}"

select = """
SELECT id, label, body, raw, attempts
FROM {table} FORCE INDEX (state_id)
WHERE state = 'waiting' AND (retry_at IS NULL OR retry_at <= UNIX_TIMESTAMP())
ORDER BY id
"""

[action]
{action}

[on_success]
sql = "UPDATE {table} SET state = 'done', done_at = NOW(6) WHERE id = :id"

[on_failure]
sql = [
  """
  UPDATE {table}
  SET state      = IF(attempts + 1 >= {ATTEMPTS}, 'failed', 'waiting'),
      retry_at   = UNIX_TIMESTAMP() + attempts + 1,
      last_error = LEFT(:error, 2000),
      attempts   = attempts + 1
  WHERE id = :id
  """,
  "INSERT INTO failure_log (queue, job_id, error, at) VALUES (:queue, :id, LEFT(:error, 2000), UNIX_TIMESTAMP(NOW(6)))",
]
"#,
        database_timeout = humantime::format_duration(DATABASE_TIMEOUT),
    )
}

/// A queue's batch size and `[action]` table: an SQL action that logs its effect
/// (the procedure fails or hangs for some rows), a signed webhook naming the process
/// that sends it, or the script.
fn action(queue: &str, receiver: &str) -> (u32, String) {
    let timeout = humantime::format_duration(ACTION_TIMEOUT);
    match queue {
        "sql" => (
            10,
            format!(
                r#"type = "sql"
sql = [
  "INSERT INTO sql_effect (job_id, label, body, raw, session) VALUES (:id, :label, :body, :raw, CONNECTION_ID())",
  "CALL soak_check(:id)",
]
timeout = "{timeout}""#
            ),
        ),
        "http" => (
            5,
            format!(
                r#"type = "http"
url = "{receiver}/hook/{{id}}"
timeout = "{timeout}"
signing_secret = "${{SOAK_SIGNING_SECRET}}"
headers = {{ "x-soak-process" = "${{SOAK_PROCESS}}" }}"#
            ),
        ),
        _ => (
            5,
            format!(
                r#"type = "command"
command = ["./{SCRIPT}", "{{label}}", "{{raw}}"]
timeout = "{timeout}"
env = ["SOAK_PROCESS"]"#
            ),
        ),
    }
}

/// Writes the command action's script and its folder of inputs into `dir`.
pub fn write_script(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir.join(COMMAND_INPUTS))?;
    let path = dir.join(SCRIPT);
    std::fs::write(&path, script())?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// The script: poison rows fail; the switch file makes every command fail, or do
/// its work and then hang past the timeout; an input cut short fails. Its work:
/// keep stdin and argv as they arrived, and append a line to the log (time, key, mode, process, whether a
/// secret of tableq's environment reached it, the inputs' file name).
fn script() -> String {
    format!(
        r#"#!/bin/bash
# The soak's command action (written by examples/soak/queues.rs). argv: {{label}} {{raw}}.
set -u
key=$TABLEQ_KEY
if (( key % {POISON} == 0 )); then echo "poison row: fails every time" >&2; exit 3; fi
mode=ok
if [[ -s {SWITCH} ]]; then read -r mode < {SWITCH}; fi
if [[ $mode == fail ]]; then echo "the nemesis says fail" >&2; exit 1; fi
leak=no
if [[ -n ${{SOAK_SIGNING_SECRET-}}${{TABLEQ_DATABASE_URL-}}${{MYSQL_PWD-}} ]]; then leak=yes; fi
name="{COMMAND_INPUTS}/$key.$EPOCHREALTIME.$$"
cat > "$name.json"
# tableq killed while writing stdin leaves it cut short: refuse it, as a program
# that parses its input would.
if [[ $(tail -c 1 "$name.json") != "}}" ]]; then echo "incomplete input" >&2; exit 2; fi
printf '%s\0%s' "$1" "$2" > "$name.argv"
printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$EPOCHREALTIME" "$key" "$mode" "${{SOAK_PROCESS-}}" "$leak" "$name" >> {COMMAND_LOG}
if [[ $mode == hang ]]; then sleep 20; fi
exit 0
"#
    )
}
