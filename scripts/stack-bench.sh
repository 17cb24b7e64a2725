#!/usr/bin/env bash
# Loopback benchmark of the reference stack (one run, release build):
#   raw UDP through the same driver (sendmmsg/recvmmsg over 8 ev sockets)
#   vs one MetaRoCE connection (8 paths, 4 KiB MTU, 1 MiB WRITEs, depth 8),
#   lossless and at 1% loss, with the go-back-N (RoCEv2-like) mode beside it.
# Usage: scripts/stack-bench.sh [seconds-per-case] [loss-percent] [--json]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-3}"
loss="${2:-1}"
shift $(( $# > 2 ? 2 : $# )) || true
cargo build --release -q -p reference-stack
exec ./target/release/metaroce-stack bench --paths 8 --mtu 4096 --size 1048576 \
  --duration "$secs" --loss "$loss" "$@"
