#!/usr/bin/env bash
# `cargo xtask bench connections` (xtask/src/bench/connections.rs; docs/performance.md):
#   [BEFORE=REV [BEFORE_REVERT=COMMIT]] scripts/bench-connections.sh [CONNECTIONS:FRAMES[:stream]...]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo xtask bench connections ${BEFORE:+--before "$BEFORE"} \
    ${BEFORE_REVERT:+--before-revert "$BEFORE_REVERT"} "$@"
