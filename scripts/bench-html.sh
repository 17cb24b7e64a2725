#!/usr/bin/env bash
# Render time of `metaroce-analyze report --html` pages in headless Chromium:
# the bundled two-host scenario beside a report over many connections.
#
#   scripts/bench-html.sh [CONNECTIONS] [FRAMES]     (default 10000 150000)
#
# The large capture is written by `fixtures-generator bulk OUT FRAMES
# CONNECTIONS 20 64` (about 15 frames per connection, 2 % loss) and analysed
# with --max-flows above its two directions per connection. For each page,
# ROUNDS times (default 5), in the same run:
#
# - render ms: from navigation start to the first frame after the load
#   event (`performance.now()` logged by a probe appended to a copy of the
#   page: parsing, style, layout and the first paint of the whole page);
# - chromium s: the wall time of a whole headless run that takes a
#   1280x2000 screenshot (browser start-up included: compare the rows).
#
# Medians are printed, with the page's size, SVG elements and table rows.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
connections="${1:-10000}"
frames="${2:-150000}"
rounds="${ROUNDS:-5}"
command -v chromium >/dev/null || { echo "chromium is missing: run scripts/setup.sh" >&2; exit 1; }

(cd "$root" && cargo build --release --quiet -p fixtures-generator \
    && cargo build --release --quiet -p metaroce-analyze --no-default-features)
target_dir="$(cd "$root" && cargo metadata --format-version 1 --no-deps \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
gen="$target_dir/release/fixtures-generator"
analyze="$target_dir/release/metaroce-analyze"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$analyze" report --html "$work/two-host.html" \
    "$root/fixtures/generated/multipath_loss_sender.pcap" \
    "$root/fixtures/generated/multipath_loss_receiver.pcap" >/dev/null
"$gen" bulk "$work/bulk.pcap" "$frames" "$connections" 20 64 2>/dev/null
"$analyze" report --max-flows $((connections * 4)) --html "$work/bulk.html" "$work/bulk.pcap" >/dev/null

probe='<script>addEventListener("load",function(){requestAnimationFrame(function(){setTimeout(function(){console.log("render-ms "+performance.now().toFixed(1))},0)})})</script>'

median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

printf '%-28s %10s %12s %10s %12s %12s\n' page bytes svg-elements table-rows render-ms chromium-s
for name in two-host bulk; do
    page="$work/$name.html"
    sed "s#</body>#$probe</body>#" "$page" >"$work/$name.probe.html"
    elements=$(grep -o '<rect\|<line\|<text\|<path\|<title\|<circle' "$page" | wc -l)
    rows=$(grep -o '<tr>' "$page" | wc -l)
    : >"$work/ms"; : >"$work/wall"
    for _ in $(seq "$rounds"); do
        start=$(date +%s.%N)
        chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
            --enable-logging=stderr --v=0 --user-data-dir="$work/profile" \
            --window-size=1280,2000 --screenshot="$work/shot.png" \
            "file://$work/$name.probe.html" 2>"$work/log" >/dev/null
        end=$(date +%s.%N)
        sed -n 's/.*"render-ms \([0-9.]*\)".*/\1/p' "$work/log" >>"$work/ms"
        echo "$end - $start" | bc >>"$work/wall"
    done
    [ -s "$work/ms" ] || { echo "no timing from chromium for $name:" >&2; cat "$work/log" >&2; exit 1; }
    label="$name"
    [ "$name" = bulk ] && label="$connections connections"
    printf '%-28s %10s %12s %10s %12s %12s\n' "$label" "$(stat -c %s "$page")" "$elements" "$rows" \
        "$(median <"$work/ms")" "$(median <"$work/wall")"
done
