#!/usr/bin/env bash
# The quickstart: build tableq, start a private MariaDB (or use $TABLEQ_DATABASE_URL
# as the server), create the article's email table with a few thousand emails, run
# config/email.toml until nothing is waiting, and show what happened.
#
#   scripts/demo.sh            # private throwaway MariaDB; needs mariadb-server
#   TABLEQ_DATABASE_URL=mysql://root@127.0.0.1:3306/test scripts/demo.sh
#                              # an existing server: creates database tableq_demo on it
#   TABLEQ_BIN=target/debug/tableq scripts/demo.sh   # this binary: no build
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/mariadb.sh

EMAILS=${EMAILS:-5000}

if [ -n "${TABLEQ_BIN:-}" ]; then
  TABLEQ=$TABLEQ_BIN   # a binary built already (the README's test runs the demo so)
else
  echo "==> building tableq (release; the first build takes a few minutes)"
  cargo build --release
  TABLEQ=${CARGO_TARGET_DIR:-target}/release/tableq
fi

workdir=$(mktemp -d)
cleanup() { stop_private_mariadb; rm -rf "$workdir"; }
trap cleanup EXIT

if [ -n "${TABLEQ_DATABASE_URL:-}" ]; then
  server=${TABLEQ_DATABASE_URL%%\?*}
  server=${server%/*}
  [[ $server == *://* ]] || server=$TABLEQ_DATABASE_URL
  echo "==> using the server of \$TABLEQ_DATABASE_URL"
else
  echo "==> starting a private MariaDB in $workdir"
  start_private_mariadb "$workdir/mariadb"
  server=$PRIVATE_MARIADB_URL
fi
url="$server/tableq_demo"

echo "==> creating tableq_demo with $EMAILS emails (1 in 100 to an address config/send-email refuses)"
sql "$server" -e "DROP DATABASE IF EXISTS tableq_demo; CREATE DATABASE tableq_demo DEFAULT CHARSET utf8mb4"
sql "$url" < config/email.sql
sql "$url" -e "
  INSERT INTO email (recipient, subject, body)
  SELECT CONCAT('user', n, IF(n % 100 = 0, '@invalid.example', '@example.com')),
         CONCAT('Hello #', n), 'This is the body of the email.'
  FROM (SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 1 AS n
        FROM (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
              UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a,
             (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
              UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b,
             (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
              UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c,
             (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
              UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) e) seq
  WHERE n <= $EMAILS"

export TABLEQ_DATABASE_URL=$url

echo "==> tableq count config/email.toml"
"$TABLEQ" count config/email.toml

echo "==> tableq run --stop-when-empty config/email.toml"
start=$(date +%s.%N)
"$TABLEQ" run --stop-when-empty config/email.toml
end=$(date +%s.%N)

echo "==> what happened"
sql "$url" --table -e "
  SELECT status, attempts, IF(retry_at > UNIX_TIMESTAMP(), 'in a minute', '') AS next_try, COUNT(*) AS emails
  FROM email GROUP BY status, attempts, next_try ORDER BY status"
awk -v s="$start" -v e="$end" -v n="$EMAILS" 'BEGIN { printf "%d emails in %.2f s: %.0f emails/s\n", n, e - s, n / (e - s) }'
echo "==> tableq count config/email.toml (waiting now: the failed ones retry in a minute)"
"$TABLEQ" count config/email.toml

VIDEOS=${VIDEOS:-40}
echo "==> lease mode: config/render.toml renders $VIDEOS videos of 2-4 s each, 20 at a time, on 2 connections"
sql "$url" < config/render.sql
sql "$url" -e "
  INSERT INTO video (title, seconds)
  SELECT CONCAT('video #', n), 2 + n % 3
  FROM (SELECT a.d + 10 * b.d + 1 AS n
        FROM (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
              UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a,
             (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
              UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b) seq
  WHERE n <= $VIDEOS"
"$TABLEQ" run --stop-when-empty config/render.toml
sql "$url" --table -e "SELECT state, progress, attempts, COUNT(*) AS videos FROM video GROUP BY state, progress, attempts"
