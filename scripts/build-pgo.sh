#!/usr/bin/env bash
# Builds metaroce-analyze with profile-guided optimisation (PGO): an
# instrumented build analyses a training set, and the release build is
# then optimised with the branch and call counts it recorded (block layout,
# inlining). Same code, same output, less CPU per packet (the measured
# figures: docs/performance.md).
#
#   scripts/build-pgo.sh [CARGO_BUILD_ARGS...]      e.g. --no-default-features
#
# Prints the binary's path: target/pgo/release/metaroce-analyze (the
# benchmark's `walk` example, built with the same profile, is beside it in
# target/pgo/release/examples/).
# PGO_RUSTFLAGS adds flags to both builds, e.g. "-Ctarget-cpu=native" for a
# binary that runs only on CPUs like this one (docs/performance.md).
# Needs llvm-profdata from the toolchain: the llvm-tools component, which
# this script adds with rustup when it is missing.
# Two release builds in their own target dirs (RUSTFLAGS differ, so they
# would otherwise rebuild the shared one): 2.5 minutes with
# --no-default-features on the 2-core machine; with the default features
# polars is built twice from scratch (a release build of the analyzer crate
# alone takes about 17 minutes there).
#
# The training set is not the benchmark's capture: a generated capture of
# another shape (64 connections, 2 % DATA loss, 256-byte payloads), every
# fixture (RoCEv2 from real captures, every MetaRoCE packet type, malformed
# and cut records) and the two-capture merge, each in JSON and text.
set -euo pipefail
cd "$(dirname "$0")/.."

find_profdata() { find "$(rustc --print sysroot)" -name llvm-profdata -type f | head -1; }
profdata=$(find_profdata)
if [ -z "$profdata" ] && command -v rustup >/dev/null; then
    rustup component add llvm-tools >&2
    profdata=$(find_profdata)
fi
if [ -z "$profdata" ]; then
    echo "build-pgo: llvm-profdata not found; run: rustup component add llvm-tools" >&2
    exit 1
fi

work=$PWD/target/pgo-profile
rm -rf "$work"
mkdir -p "$work/raw"

echo "build-pgo: instrumented build" >&2
RUSTFLAGS="-Cprofile-generate=$work/raw ${PGO_RUSTFLAGS:-}" \
    cargo build --quiet --release -p metaroce-analyze --bin metaroce-analyze "$@" --target-dir target/pgo-gen
# Build scripts of the instrumented build wrote profiles too: not training.
rm -rf "$work/raw"/*

echo "build-pgo: training run" >&2
cargo build --quiet --release -p fixtures-generator
target/release/fixtures-generator bulk "$work/train.pcap" 1000000 64 20 256 >&2
train=target/pgo-gen/release/metaroce-analyze
run() { "$train" "$@" >/dev/null 2>&1 || true; } # exit codes 2/3 on damaged fixtures are expected
run report --json --no-progress "$work/train.pcap"
run report --no-progress "$work/train.pcap"
for f in fixtures/generated/*.pcap fixtures/real/*.pcap; do
    run report --json --no-progress "$f"
    run report --no-progress "$f"
done
run report --json --no-progress fixtures/generated/multipath_loss_sender.pcap \
    fixtures/generated/multipath_loss_receiver.pcap
if ! ls "$work/raw"/*.profraw >/dev/null 2>&1; then
    echo "build-pgo: the training run wrote no profile" >&2
    exit 1
fi
"$profdata" merge -o "$work/merged.profdata" "$work/raw"
rm -f "$work/train.pcap"

echo "build-pgo: optimised build" >&2
RUSTFLAGS="-Cprofile-use=$work/merged.profdata ${PGO_RUSTFLAGS:-}" \
    cargo build --quiet --release -p metaroce-analyze --bin metaroce-analyze --example walk "$@" \
        --target-dir target/pgo
echo target/pgo/release/metaroce-analyze
