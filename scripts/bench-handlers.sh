#!/usr/bin/env bash
# The handler benchmark (issue 35): the same trivial PHP handler (read the row,
# append it to a file) reached each way tableq can reach PHP, side by side in one
# run, on the article's email table (the row's change included): items/s, and
# tableq's own CPU per 1,000 items (its children's not counted).
#
#   scripts/bench-handlers.sh                 # every case
#   scripts/bench-handlers.sh command fastcgi # some cases
#   ROWS_SCALE=0.5 scripts/bench-handlers.sh  # fewer rows per case
#
# It builds tableq in release mode (TABLEQ_BIN=path/to/tableq measures another
# build) and starts a private MariaDB (mariadbd) and, for fastcgi, a private PHP-FPM
# pool, all in a temporary directory. Needs php8.2-cli and php8.2-fpm.
#
# A case is a function `case_NAME` below, and its name in CASES: it sets ROWS (how
# many rows make a run of a few seconds) and prints its [action] table; it may
# start what it needs in `start_NAME` and stop it in `stop_NAME`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/mariadb.sh   # start_private_mariadb (its sql is replaced below)

CASES=(command fastcgi worker)
WORKERS=4

# type = "command": a php process per row.
case_command() {
    ROWS=400
    cat <<EOF
type = "command"
command = ["$PHP", "-n", "$WORK/handler.php"]
EOF
}

# type = "fastcgi": a private PHP-FPM pool of $WORKERS children on a unix socket. No
# php.ini (-n), so no extension is loaded but PDO MySQL's, which a handler that
# writes to the database needs (Debian's builds: pdo and mysqlnd first).
FPM_EXTENSIONS=(-d extension=pdo -d extension=mysqlnd -d extension=pdo_mysql)
start_fastcgi() {
    cat >"$WORK/fpm.conf" <<EOF
[global]
pid = $WORK/fpm.pid
error_log = $WORK/fpm.log
daemonize = no
[bench]
$( [ "$(id -u)" = 0 ] && echo "user = root" )
listen = $WORK/fpm.sock
pm = static
pm.max_children = $WORKERS
EOF
    local root=""
    [ "$(id -u)" = 0 ] && root="-R"
    "$FPM" -n "${FPM_EXTENSIONS[@]}" $root -F -y "$WORK/fpm.conf" >/dev/null 2>&1 &
    FPM_PID=$!
    wait_for "PHP-FPM" test -S "$WORK/fpm.sock"
}
stop_fastcgi() { kill "$FPM_PID" 2>/dev/null; wait "$FPM_PID" 2>/dev/null || true; }
case_fastcgi() {
    ROWS=4000
    cat <<EOF
type = "fastcgi"
address = "unix:$WORK/fpm.sock"
script = "$WORK/handler.php"
EOF
}

# type = "worker": long-lived php processes (one per item in flight: $WORKERS), the
# same handler in a loop over stdin's lines, answering each with {"ok": true}.
case_worker() {
    ROWS=8000
    cat <<EOF
type = "worker"
command = ["$PHP", "-n", "$WORK/worker.php"]
EOF
}
WORKER='<?php
while (($line = fgets(STDIN)) !== false) {
    $row = json_decode($line, true);
    file_put_contents(__DIR__ . "/sent.log", $row["id"] . " " . $row["recipient"] . "\n", FILE_APPEND);
    echo "{\"ok\": true}\n";
}
'

# The handler every case runs: the row as JSON on stdin (CLI) or as the request
# body (FPM), one line appended to a file.
HANDLER='<?php
$row = json_decode(file_get_contents(PHP_SAPI === "cli" ? "php://stdin" : "php://input"), true);
file_put_contents(__DIR__ . "/sent.log", $row["id"] . " " . $row["recipient"] . "\n", FILE_APPEND);
'

wait_for() {
    local what=$1
    shift
    for _ in $(seq 1 300); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "$what did not start" >&2
    exit 1
}

sql() { mariadb --no-defaults -uroot -h127.0.0.1 -P"$PORT" -N -B bench -e "$1"; }

# The queue file of case $1, its action from case_$1.
queue_file() {
    local action
    action=$("case_$1")
    cat <<EOF
name = "bench_$1"
workers = $WORKERS
poll_interval = "100ms"
select = "SELECT id, recipient, subject, body FROM email FORCE INDEX (status_id) WHERE status = 'waiting' ORDER BY id"
[action]
$action
timeout = "30s"
[on_success]
sql = "UPDATE email SET status = 'sent' WHERE id = :id"
[on_failure]
sql = "UPDATE email SET status = 'failed', attempts = attempts + 1 WHERE id = :id"
EOF
}

# Runs case $1: fills the table, runs tableq until the table is drained, and
# prints its line.
run_case() {
    local name=$1
    "case_$name" >/dev/null
    ROWS=$(awk -v r="$ROWS" -v s="${ROWS_SCALE:-1}" 'BEGIN { printf "%d", r * s }')
    queue_file "$name" >"$WORK/$name.toml"
    declare -F "start_$name" >/dev/null && "start_$name"
    sql "TRUNCATE email"
    sql "INSERT INTO email (recipient, subject, body) SELECT CONCAT('user', seq, '@example.com'), CONCAT('Hello ', seq), 'Body' FROM seq_1_to_$ROWS"
    : >"$WORK/sent.log"
    local started ticks pid
    started=$(date +%s.%N)
    "$TABLEQ" run --database-url "mysql://root@127.0.0.1:$PORT/bench" "$WORK/$name.toml" 2>"$WORK/$name.log" &
    pid=$!
    while [ "$(sql "SELECT COUNT(*) FROM email WHERE status = 'waiting'")" != 0 ]; do
        kill -0 "$pid" 2>/dev/null || { cat "$WORK/$name.log" >&2; exit 1; }
        sleep 0.05
    done
    local ended
    ended=$(date +%s.%N)
    # utime + stime of tableq itself (fields 14 and 15), in clock ticks.
    ticks=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    kill -TERM "$pid"
    wait "$pid" || true
    declare -F "stop_$name" >/dev/null && "stop_$name"
    local sent failed
    sent=$(sql "SELECT COUNT(*) FROM email WHERE status = 'sent'")
    failed=$(sql "SELECT COUNT(*) FROM email WHERE status = 'failed'")
    [ "$failed" = 0 ] || { echo "$name: $failed rows failed; see $WORK/$name.log" >&2; exit 1; }
    [ "$(wc -l <"$WORK/sent.log")" = "$ROWS" ] || { echo "$name: the handler ran $(wc -l <"$WORK/sent.log") times for $ROWS rows" >&2; exit 1; }
    awk -v n="$name" -v rows="$sent" -v s="$started" -v e="$ended" -v t="$ticks" -v hz="$(getconf CLK_TCK)" \
        'BEGIN { secs = e - s; printf "%s %d %.2f %.0f %.0f\n", n, rows, secs, rows / secs, 1000 * (t / hz) * 1000 / rows }'
}

[ $# -gt 0 ] && CASES=("$@")
PHP=$(command -v php8.2 || command -v php)
FPM=$(command -v php-fpm8.2 || echo /usr/sbin/php-fpm8.2)
WORK=$(mktemp -d /tmp/tableq-bench-handlers.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
printf '%s' "$HANDLER" >"$WORK/handler.php"
printf '%s' "$WORKER" >"$WORK/worker.php"

if [ -n "${TABLEQ_BIN:-}" ]; then
    TABLEQ=$TABLEQ_BIN
else
    cargo build --release --quiet --bin tableq
    TABLEQ="${CARGO_TARGET_DIR:-target}/release/tableq"
fi

PRIVATE_MARIADB_ARGS=(--innodb-flush-log-at-trx-commit=2)
start_private_mariadb "$WORK/mariadb"
PORT=${PRIVATE_MARIADB_URL##*:}
mariadb --no-defaults -uroot -h127.0.0.1 -P"$PORT" -e "CREATE DATABASE bench"
sql "$(cat config/email.sql)"

echo "The same PHP handler (read the row, append a line to a file), $WORKERS workers, item scope:"
printf '%-10s %7s %9s %9s %22s %12s\n' case rows seconds items/s "tableq CPU ms/1,000" "vs command"
base=""
for name in "${CASES[@]}"; do
    read -r n rows secs rate cpu < <(run_case "$name") || true
    [ -n "${n:-}" ] || exit 1
    [ "$n" = command ] && base=$rate
    ratio="-"
    [ -n "$base" ] && ratio=$(awk -v r="$rate" -v b="$base" 'BEGIN { printf "%.1fx", r / b }')
    printf '%-10s %7d %9.2f %9d %22d %12s\n' "$n" "$rows" "$secs" "$rate" "$cpu" "$ratio"
done
