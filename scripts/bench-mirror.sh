#!/usr/bin/env bash
# `cargo xtask bench mirror` (xtask/src/bench/mirror.rs; docs/mirrors.md,
# docs/performance.md): `report` on an ERSPAN III copy of the bench capture
# against the capture, instructions and wall time per packet:
#   scripts/bench-mirror.sh [PACKETS]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo xtask bench mirror "$@"
