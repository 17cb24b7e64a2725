#!/usr/bin/env bash
# Writes a large synthetic MetaRoCE capture for the analyzer benchmark
# (fixtures/generator/src/bulk.rs):
#   scripts/gen-large-capture.sh OUT.pcap [PACKETS] [CONNECTIONS] [LOSS_PER_MILLE] [PAYLOAD_BYTES]
# (default 2,000,000 packets, 8 connections, 5 per mille DATA loss, 64-byte payloads).
# Keep the output out of git (under target/, say).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: $0 OUT.pcap [PACKETS] [CONNECTIONS] [LOSS_PER_MILLE] [PAYLOAD_BYTES]}
shift
cargo build --quiet --release -p fixtures-generator
exec target/release/fixtures-generator bulk "$out" "$@"
