#!/usr/bin/env bash
# The due-time benchmark (issue 44): how late rows due by time alone are claimed —
# 12 rows due 1 s apart (`send_after <= NOW()`), 30 rows 100 ms apart (`<= NOW(3)`)
# and 20 rows due at one instant — in transaction and lease mode, woken by the
# binary log and by polling (`wake = "poll"`, every 5 s), each mode and wake-up
# alone in its tableq, on one private MariaDB writing a row-based binary log. It
# prints, per case, the lateness at p50 and at most, from each row's due time (at
# the precision of its select's clock) to its claim. Targets on a quiet machine:
# p50 ≤ 100 ms and max ≤ 300 ms in every case.
#
#   scripts/bench-due.sh              # ~2 minutes once built (a debug build)
#   scripts/bench-due.sh --release    # the release build
#
# The measurement is the ignored test engine::due::lateness_at_each_spacing
# (tests/it/engine/due.rs); the CI runs the same cases, fewer rows, against a
# looser bound (rows_due_at_any_spacing_are_claimed_within_a_second).
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo test "$@" --test it -- --ignored --exact engine::due::lateness_at_each_spacing \
    --nocapture
