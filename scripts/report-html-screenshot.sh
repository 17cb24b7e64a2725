#!/usr/bin/env bash
# The README's screenshot of `report --html`: the page of the bundled
# two-host scenario, rendered by headless Chromium at 1280x1400, written to
# docs/images/report-html.png.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
command -v chromium >/dev/null || { echo "chromium is missing: run scripts/setup.sh" >&2; exit 1; }
(cd "$root" && cargo build --release --quiet -p metaroce-analyze --no-default-features)
target_dir="$(cd "$root" && cargo metadata --format-version 1 --no-deps \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Relative capture paths: the page names them as given.
(cd "$root" && "$target_dir/release/metaroce-analyze" report --html "$work/report.html" \
    fixtures/generated/multipath_loss_sender.pcap \
    fixtures/generated/multipath_loss_receiver.pcap >/dev/null)
mkdir -p "$root/docs/images"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$work/profile" --window-size=1280,1400 \
    --screenshot="$root/docs/images/report-html.png" "file://$work/report.html" 2>/dev/null >/dev/null
echo "wrote docs/images/report-html.png"
