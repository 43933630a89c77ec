//! The four queue files all tableq processes read, and the command actions' scripts.
//! Deadlines are short, so that faults cost seconds: `database_timeout` 3 s, action
//! timeouts 2 s, retries after 1, 2, 3… s, and a row fails for good at its
//! sixth failed attempt. The lease queue's jobs take 1 to 3 s, under a lease of 6 s
//! (in unix time) renewed every second.

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
/// The lease queue's script and its log (its inputs go to [`COMMAND_INPUTS`] too).
pub const LEASE_SCRIPT: &str = "soak-lease";
pub const LEASE_LOG: &str = "lease-deliveries.log";
/// The lease's length, the renewals' interval, and the lease queue's action timeout.
pub const LEASE: Duration = Duration::from_secs(6);
pub const RENEW_EVERY: Duration = Duration::from_secs(1);
pub const LEASE_ACTION_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a lease job takes: it logs its delivery when it is done, so up to
/// this long after its process was hit.
pub const LEASE_JOB_LONGEST: Duration = Duration::from_secs(3);
/// A lease-mode process runs this many times `--workers` on the lease queue: its
/// workers hold no connection while their jobs run.
const LEASE_WORKERS: u32 = 4;

/// Writes (or rewrites, for a reload) the four queue files into `dir`, each
/// replaced at once so that a process starting meanwhile reads a whole file.
pub fn write(dir: &Path, receiver: &str, workers: u32) -> anyhow::Result<()> {
    for queue in QUEUES {
        let path = dir.join(format!("{queue}.toml"));
        let temporary = dir.join(format!(".{queue}.toml.new"));
        let text = match queue {
            "lease" => lease_file(workers * LEASE_WORKERS),
            _ => queue_file(queue, receiver, workers),
        };
        std::fs::write(&temporary, text)?;
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

/// The lease queue: a command of 1 to 3 s in lease mode, its lease in unix time
/// (`UNIX_TIMESTAMP()`, never the session's `NOW()`). An expired lease is waiting
/// again. Outcomes check `:lease_id`; `[on_failure]` counts the attempt, and a
/// trigger logs it into `failure_log` (outcome SQL may only update the row).
///
/// Slow renewals: `renew_sql` sleeps as long as `soak_switch` says (the nemesis's
/// [`SlowRenewal`](crate::nemesis::Kind::SlowRenewal)). A switch table rather than
/// a stalled proxy: it slows the renewals alone, in every process at once, while
/// claims and outcomes go through — the case of the old bug (a command's exit
/// while its renewal waited, its status reaped away from the worker) — and it
/// holds the row's lock while it sleeps, as a renewal stuck on a busy server would.
fn lease_file(workers: u32) -> String {
    let table = table("lease");
    let lease = LEASE.as_secs();
    format!(
        r#"# The soak's lease queue (examples/soak/queues.rs): every tableq process reads it.
mode = "lease"
workers = {workers}
batch = 1
poll_interval = "250ms"
error_backoff = "250ms"
database_timeout = "{database_timeout}"

# No ORDER BY: the index (state, lease_until) reads the two ranges — expired
# leases, then waiting rows — without sorting (and locking) the backlog.
select = """
SELECT id, label, body, raw, attempts
FROM {table} FORCE INDEX (state_lease)
WHERE (state = 'waiting' AND (retry_at IS NULL OR retry_at <= UNIX_TIMESTAMP()))
   OR (state = 'leased' AND lease_until < UNIX_TIMESTAMP())
"""

[action]
type = "command"
command = ["./{LEASE_SCRIPT}", "{{label}}", "{{raw}}"]
timeout = "{timeout}"
env = ["SOAK_PROCESS"]

[lease]
sql = "UPDATE {table} SET state = 'leased', lease_until = UNIX_TIMESTAMP() + {lease}, lease_id = :lease_id WHERE id = :id"
renew_sql = """
UPDATE {table}
SET lease_until = UNIX_TIMESTAMP() + {lease} + (SELECT SLEEP(renew_sleep) FROM soak_switch),
    renewals = renewals + 1, progress = LEFT(:progress, 20)
WHERE id = :id AND lease_id = :lease_id
"""
renew_every = "{renew_every}"
release_sql = "UPDATE {table} SET state = 'waiting', lease_until = NULL, lease_id = NULL WHERE id = :id AND lease_id = :lease_id"
connections = 4

[on_success]
sql = "UPDATE {table} SET state = 'done', done_at = NOW(6), lease_id = NULL WHERE id = :id AND lease_id = :lease_id"

[on_failure]
sql = """
UPDATE {table}
SET state       = IF(attempts + 1 >= {ATTEMPTS}, 'failed', 'waiting'),
    retry_at    = UNIX_TIMESTAMP() + attempts + 1,
    last_error  = LEFT(:error, 2000),
    lease_until = NULL,
    lease_id    = NULL,
    attempts    = attempts + 1
WHERE id = :id AND lease_id = :lease_id
"""
"#,
        database_timeout = humantime::format_duration(DATABASE_TIMEOUT),
        timeout = humantime::format_duration(LEASE_ACTION_TIMEOUT),
        renew_every = humantime::format_duration(RENEW_EVERY),
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

/// Writes the command queue's and the lease queue's scripts and their folder of
/// inputs into `dir`.
pub fn write_script(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir.join(COMMAND_INPUTS))?;
    for (name, text) in [(SCRIPT, command_script()), (LEASE_SCRIPT, lease_script())] {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// The command queue's script: poison rows fail; the switch file makes every
/// command fail, or do its work and then hang past the timeout.
fn command_script() -> String {
    let switch = format!(
        r#"mode=ok
if [[ -s {SWITCH} ]]; then read -r mode < {SWITCH}; fi
if [[ $mode == fail ]]; then echo "the nemesis says fail" >&2; exit 1; fi"#
    );
    let hang = "if [[ $mode == hang ]]; then sleep 20; fi";
    script(SCRIPT, &switch, "", COMMAND_LOG, hang)
}

/// The lease queue's script: poison rows fail; the job takes 1 to 3 s (by its key),
/// reporting its progress halfway for the renewals to carry; it logs its delivery
/// when done, just before it exits 0.
fn lease_script() -> String {
    let longest = LEASE_JOB_LONGEST.as_millis() - 1000;
    let work = format!(
        r#"ms=$(( 1000 + key * 7919 % {span} ))
half=$(printf '%d.%03d' $(( ms / 2000 )) $(( ms / 2 % 1000 )))
sleep "$half"
echo half >> "$TABLEQ_PROGRESS"
sleep "$half""#,
        span = longest + 1
    );
    script(LEASE_SCRIPT, "mode=ok", &work, LEASE_LOG, "")
}

/// A script: poison rows fail; then `gate`; an input cut short fails; its work:
/// keep stdin and argv as they arrived, do `work`, and append a line to `log`
/// (time, key, mode, process, whether a secret of tableq's environment reached it,
/// the inputs' file name); then `after`.
fn script(name: &str, gate: &str, work: &str, log: &str, after: &str) -> String {
    format!(
        r#"#!/bin/bash
# The soak's {name} (written by examples/soak/queues.rs). argv: {{label}} {{raw}}.
set -u
key=$TABLEQ_KEY
if (( key % {POISON} == 0 )); then echo "poison row: fails every time" >&2; exit 3; fi
{gate}
leak=no
if [[ -n ${{SOAK_SIGNING_SECRET-}}${{TABLEQ_DATABASE_URL-}}${{MYSQL_PWD-}} ]]; then leak=yes; fi
name="{COMMAND_INPUTS}/{name}-$key.$EPOCHREALTIME.$$"
cat > "$name.json"
# tableq killed while writing stdin leaves it cut short: refuse it, as a program
# that parses its input would.
if [[ $(tail -c 1 "$name.json") != "}}" ]]; then echo "incomplete input" >&2; exit 2; fi
printf '%s\0%s' "$1" "$2" > "$name.argv"
{work}
printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$EPOCHREALTIME" "$key" "$mode" "${{SOAK_PROCESS-}}" "$leak" "$name" >> {log}
{after}
exit 0
"#
    )
}
