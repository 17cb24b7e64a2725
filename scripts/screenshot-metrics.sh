#!/usr/bin/env bash
# The README's screenshot of metaroce-top's metrics in Prometheus: runs the
# real-Prometheus test (tui/tests/prometheus.rs: two namespaces, the
# reference stack with 10 % loss on ev 3, two exporters, Debian's
# prometheus) with METAROCE_SCREENSHOT set, so that headless Chromium
# screenshots Prometheus' graph of the loss per path before the test ends.
# Needs root (network namespaces), prometheus, curl and chromium
# (scripts/setup.sh installs them).
#   scripts/screenshot-metrics.sh [OUT.png]   (default: docs/images/metaroce-top-prometheus.png)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/images/metaroce-top-prometheus.png}
METAROCE_SCREENSHOT="$PWD/$out" cargo test -q -p metaroce-tui --test prometheus -- --nocapture
echo "wrote $out"
