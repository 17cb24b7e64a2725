#!/usr/bin/env bash
# `cargo xtask bench plugin` (xtask/src/bench/plugin.rs; docs/performance.md):
#   [BENCH_INSTRUCTIONS=1] scripts/bench-plugin.sh [--wireshark host|4.4|4.6]... [PACKETS] [PAYLOAD] [REPEAT]
set -euo pipefail
cd "$(dirname "$0")/.."
instructions=()
[ "${BENCH_INSTRUCTIONS:-0}" = 1 ] && instructions=(--instructions)
exec cargo xtask bench plugin "${instructions[@]}" "$@"
