#!/usr/bin/env bash
# `cargo xtask bench lint` (xtask/src/bench/lint.rs; docs/performance.md):
#   [HANDSHAKE=1] [ROUNDS=5] scripts/bench-lint.sh [FRAMES]
set -euo pipefail
cd "$(dirname "$0")/.."
handshake=()
[ "${HANDSHAKE:-0}" = 1 ] && handshake=(--handshake)
exec cargo xtask bench lint --rounds "${ROUNDS:-5}" "${handshake[@]}" "$@"
