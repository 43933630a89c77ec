#!/usr/bin/env bash
# The throughput benchmark (issue 5): tableq against the hand-written worker of the
# article, on one private MariaDB (or the server of $TABLEQ_BENCH_DATABASE_URL, in a
# database tableq_bench that it creates and drops). Builds everything in release mode
# (cargo builds the tableq binary alongside the bench) and prints one report.
#
#   scripts/bench.sh              # the full run: ~10-15 minutes
#   scripts/bench.sh --quick      # a smoke test: a minute or two
#   scripts/bench.sh --help       # every flag
#
# TABLEQ_BIN=path/to/tableq measures another build of the binary.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench --bench throughput -- "$@"
