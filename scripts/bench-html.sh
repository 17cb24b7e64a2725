#!/usr/bin/env bash
# `cargo xtask bench html` (xtask/src/bench/html.rs; docs/performance.md):
#   [ROUNDS=5] scripts/bench-html.sh [CONNECTIONS] [FRAMES]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo xtask bench html --rounds "${ROUNDS:-5}" "$@"
