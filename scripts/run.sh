#!/usr/bin/env bash
# The two entry points the README promises, each of which sets up a fresh
# Debian machine first:
#   scripts/run.sh demo   analyze a bundled capture (the post-mortem report)
#   scripts/run.sh test   format check, clippy, and every test of the workspace
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

case "${1:-}" in
demo)
    cargo build --release -p analyzer --bin metaroce-analyze
    capture=fixtures/generated/multipath_loss.pcap
    echo "== metaroce-analyze decode $capture (first 12 frames)"
    target/release/metaroce-analyze decode --frames 1-12 "$capture"
    ;;
test)
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings
    cargo test --workspace --no-fail-fast
    ;;
*)
    echo "usage: scripts/run.sh demo|test" >&2
    exit 64
    ;;
esac
