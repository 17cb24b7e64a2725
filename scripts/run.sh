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
    # The post-mortem report needs neither polars nor plotters.
    cargo build --release -p metaroce-analyze --bin metaroce-analyze --no-default-features
    sender=fixtures/generated/multipath_loss_sender.pcap
    receiver=fixtures/generated/multipath_loss_receiver.pcap
    echo "== metaroce-analyze decode --frames 1-12 $sender"
    target/release/metaroce-analyze decode --frames 1-12 "$sender"
    echo
    echo "== metaroce-analyze report $sender $receiver"
    target/release/metaroce-analyze report "$sender" "$receiver"
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
