#!/usr/bin/env bash
# The history benchmark (issue 47): what keeping the console's history costs. The
# same drain, `tableq run --stop-when-empty` on N waiting rows (an SQL action that
# marks each row sent; 1 in 100 fails, is recorded by [on_failure] and gives up into
# [failed] select, so failed attempts are written and judged too), at batch 1 and
# batch 100, with `--history on` and `--history off`, alternated in each repetition
# (on/off, then off/on), side by side on one private MariaDB. Prints each run's
# items/s, then per batch the medians and the ratio on/off. Not part of CI; written
# up in docs/src/explanation/performance.md ("The history").
#
#   bench/history/run.sh                     # 20,000 rows, 5 repetitions
#   ROWS=5000 REPS=3 bench/history/run.sh
#   WORKERS=8 BATCHES="1 100" bench/history/run.sh
#
# tableq is the release build: TABLEQ_BIN=path/to/tableq, else
# `cargo build --release --locked` (CARGO_TARGET_DIR is honoured).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
source scripts/lib/mariadb.sh # start_private_mariadb, stop_private_mariadb

ROWS=${ROWS:-20000}
REPS=${REPS:-5}
WORKERS=${WORKERS:-4}
BATCHES=${BATCHES:-1 100}

WORK=$(mktemp -d /tmp/tableq-bench-history.XXXXXX)
cleanup() {
    stop_private_mariadb
    [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

if [ -n "${TABLEQ_BIN:-}" ]; then
    TABLEQ=$TABLEQ_BIN
else
    cargo build --release --locked --quiet --bin tableq
    TABLEQ="${CARGO_TARGET_DIR:-target}/release/tableq"
fi

start_private_mariadb "$WORK/mariadb"
PORT=${PRIVATE_MARIADB_URL##*:}
URL="mysql://root@127.0.0.1:$PORT/bench"
sql() { mariadb --no-defaults -uroot -h127.0.0.1 -P"$PORT" -N -B bench -e "$1"; }
mariadb --no-defaults -uroot -h127.0.0.1 -P"$PORT" -e "CREATE DATABASE bench"
sql "CREATE TABLE email (id INT PRIMARY KEY, status VARCHAR(10) NOT NULL DEFAULT 'waiting',
       sent_at DATETIME NULL, KEY status_id (status, id)) ENGINE=InnoDB"

fill() {
    sql "TRUNCATE email; DELETE FROM tableq_history; DELETE FROM tableq_attempts" 2>/dev/null \
        || sql "TRUNCATE email"
    sql "INSERT INTO email (id) SELECT seq FROM seq_1_to_$ROWS"
}

queue_file() { # batch
    cat > "$WORK/email.toml" <<TOML
select = "SELECT id FROM email WHERE status = 'waiting' ORDER BY id"
workers = $WORKERS
batch = $1
[action]
type = "sql"
sql = "UPDATE email SET sent_at = IF(:id % 100 = 0, (SELECT 1 UNION SELECT 2), NOW()) WHERE id = :id"
[on_success]
sql = "UPDATE email SET status = 'sent' WHERE id = :id"
[on_failure]
sql = "UPDATE email SET status = 'failed' WHERE id = :id"
[failed]
select = "SELECT id FROM email WHERE status = 'failed' ORDER BY id DESC"
TOML
}

run() { # batch history → items/s
    fill
    local start end
    start=$(date +%s.%N)
    TABLEQ_DATABASE_URL=$URL TABLEQ_LOG=warn "$TABLEQ" run --stop-when-empty \
        --history "$2" "$WORK/email.toml" 2>>"$WORK/tableq.log"
    end=$(date +%s.%N)
    local done
    done=$(sql "SELECT COUNT(*) FROM email WHERE status IN ('sent', 'failed')")
    [ "$done" = "$ROWS" ] || { echo "only $done of $ROWS rows settled" >&2; exit 1; }
    echo "$ROWS / ($end - $start)" | bc -l
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "history benchmark: $ROWS rows (1% failing into [failed]), workers = $WORKERS, $REPS repetitions"
for batch in $BATCHES; do
    queue_file "$batch"
    : > "$WORK/on.$batch"; : > "$WORK/off.$batch"
    for rep in $(seq 1 "$REPS"); do
        order="on off"; [ $((rep % 2)) -eq 0 ] && order="off on"
        for history in $order; do
            rate=$(run "$batch" "$history")
            echo "$rate" >> "$WORK/$history.$batch"
            printf '  batch %-4s rep %s history %-3s %9.0f items/s\n' "$batch" "$rep" "$history" "$rate"
        done
    done
done
echo
printf '%-8s %14s %14s %10s\n' batch "on (items/s)" "off (items/s)" "on/off"
for batch in $BATCHES; do
    on=$(median < "$WORK/on.$batch"); off=$(median < "$WORK/off.$batch")
    printf '%-8s %14.0f %14.0f %10.3f\n' "$batch" "$on" "$off" "$(echo "$on / $off" | bc -l)"
done
