#!/usr/bin/env bash
# Loopback benchmark of the reference stack (release build), in one process:
#   raw UDP through the same driver (sendmmsg/recvmmsg over 8 ev sockets)
#   vs one MetaRoCE connection (8 paths, 4 KiB MTU, 1 MiB WRITEs, depth 8),
#   lossless and at LOSS% loss, with the go-back-N (RoCEv2-like) mode beside it.
# Every round runs all five cases back to back (so a noisy neighbour weighs on
# all of them alike); the table gives per-case medians, and each ratio is the
# median of the per-round ratios (both figures of a ratio from the same round).
# Loopback on a small shared VM is noisy: compare rounds, not single runs.
# Usage: scripts/stack-bench.sh [seconds-per-case] [loss-percent] [rounds] [--json]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-3}"
loss="${2:-1}"
reps="${3:-5}"
shift $(( $# > 3 ? 3 : $# )) || true
cargo build --release -q -p reference-stack
exec ./target/release/metaroce-stack bench --paths 8 --mtu 4096 --size 1048576 \
  --duration "$secs" --loss "$loss" --reps "$reps" "$@"
