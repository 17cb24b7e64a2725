#!/usr/bin/env bash
# `cargo xtask bench tui` (xtask/src/bench/tui.rs; docs/performance.md), root:
#   [SECONDS_PER_STEP=3] [THREADS=2] [PAYLOAD=1024] scripts/bench-tui.sh [RATES_KPPS...]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo xtask bench tui --seconds-per-step "${SECONDS_PER_STEP:-3}" --threads "${THREADS:-2}" \
    --payload "${PAYLOAD:-1024}" "$@"
