#!/usr/bin/env bash
# The soak (issues 9, 25): three tableq processes work an SQL, an HTTP, a command and
# a lease-mode command queue on a private MariaDB while a seeded nemesis kills,
# stops, reloads, stalls and breaks things, turns the database read-only (a
# failover) and makes lease renewals slow; then a checker reads the database and
# every log. Exit status 0 when nothing was lost, no SQL effect was applied twice,
# everything arrived as written, every duplicate delivery has a cause and no log
# says "No child processes"; 1 otherwise. See examples/soak/main.rs.
#
#   scripts/soak.sh                          # 20,000 rows per queue, 120 s of faults
#   scripts/soak.sh --seconds 60 --rows 3000 # what CI runs
#   scripts/soak.sh --seed 1234              # the faults of an earlier run, again
#   scripts/soak.sh --help                   # every flag
#
# Debug builds of tableq and the soak; TABLEQ_BIN=path/to/tableq soaks another build.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/usr/local/sbin"
cargo build --locked --quiet --bin tableq --example soak
exec cargo run --locked --quiet --example soak -- "$@"
