#!/usr/bin/env bash
# `cargo xtask bench analyzer` (xtask/src/bench/analyzer.rs; docs/performance.md),
# with the environment this script always took:
#   [ROUNDS=3] [BEFORE=REV [BEFORE_REVERT=COMMIT]] scripts/bench-analyzer.sh [SMALL] [LARGE] [TSHARK_PACKETS]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo xtask bench analyzer --rounds "${ROUNDS:-3}" ${BEFORE:+--before "$BEFORE"} \
    ${BEFORE_REVERT:+--before-revert "$BEFORE_REVERT"} "$@"
