#!/usr/bin/env bash
# `cargo xtask bench tui` (xtask/src/bench/tui.rs; docs/performance.md), root:
#   [SECONDS_PER_STEP=3] [THREADS=2] [PAYLOAD=1024] [ONLY_METRICS=1] [ROUNDS=3] \
#       scripts/bench-tui.sh [RATES_KPPS...]
# ONLY_METRICS (any value): only the cost of --metrics; ROUNDS: its rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
only_metrics=()
[ -n "${ONLY_METRICS:-}" ] && only_metrics=(--only-metrics)
exec cargo xtask bench tui --seconds-per-step "${SECONDS_PER_STEP:-3}" --threads "${THREADS:-2}" \
    --payload "${PAYLOAD:-1024}" --rounds "${ROUNDS:-3}" "${only_metrics[@]}" "$@"
