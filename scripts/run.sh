#!/usr/bin/env bash
# The two entry points the README promises, each of which sets up a fresh
# Debian machine first:
#   scripts/run.sh demo   analyze a bundled capture (the post-mortem report)
#   scripts/run.sh test   format check, clippy, every test of the workspace, the
#                         Spark job's tests (pytest), and the plugin's tests in
#                         Wireshark 4.4 and 4.6 too
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
    # The Spark post-mortem job (cluster/): pytest in Spark local mode, with
    # the PySpark that setup.sh pinned. No test collected (exit 5) fails too.
    "${METAROCE_CLUSTER_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/metaroce-cluster-venv}/bin/python" \
        -m pytest -q cluster/tests
    # The plugin again, built for and run in Wireshark 4.4 and 4.6 (Debian
    # roots made on first use by scripts/wireshark-root.sh; if one cannot be
    # made, that line fails), the GUI test too: the root's `wireshark`
    # package (without recommends; made with the root, installed here in a
    # root made before) runs inside the root on the host's Xvfb.
    # Both lines run before the verdict.
    failed=()
    for line in 4.4 4.6; do
        echo "== the plugin's tests in Wireshark $line"
        { scripts/wireshark-root.sh "$line" install wireshark &&
          scripts/wireshark-root.sh "$line" cargo test -p metaroce-dissector --no-fail-fast; } ||
            failed+=("$line")
    done
    if ((${#failed[@]})); then
        echo "the plugin's tests failed in Wireshark ${failed[*]}" >&2
        exit 1
    fi
    ;;
*)
    echo "usage: scripts/run.sh demo|test" >&2
    exit 64
    ;;
esac
