#!/usr/bin/env bash
# `cargo xtask bench stack` (xtask/src/bench/stack.rs; reference-stack/README.md):
#   scripts/stack-bench.sh [seconds-per-case] [loss-percent] [rounds] [--json]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo xtask bench stack "$@"
