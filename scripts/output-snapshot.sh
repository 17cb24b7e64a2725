#!/usr/bin/env bash
# Writes every output of `metaroce-analyze` on every capture of
# fixtures/generated and /work/shared/captures/real (or CAPTURES) into one
# directory, one file per command and capture, so that two builds can be
# compared byte for byte (a refactoring must leave them identical):
#
#   scripts/output-snapshot.sh BIN OUT_DIR     # then: diff -r OLD_DIR OUT_DIR
#
# Per capture: decode (text, --json), report (text, --json, --html), lint
# (text, --json, --junit), trace (--counters); export (CSV) when BIN was
# built with the `export` feature. Also the two-capture runs (report, lint,
# trace) of the multipath-loss sender and receiver captures, and the lint's
# registry (--rules --json). Each command's exit status is written beside
# its output: the analysis exits 2 or 3 on some captures by design.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:?usage: output-snapshot.sh BIN OUT_DIR}")
out=${2:?usage: output-snapshot.sh BIN OUT_DIR}
mkdir -p "$out"
out=$(realpath "$out")
real=${REAL_CAPTURES:-/work/shared/captures/real}
mapfile -t captures < <(ls fixtures/generated/*.pcap "$real"/*.pcap 2>/dev/null)
[ ${#captures[@]} -gt 0 ] || { echo "output-snapshot: no captures found" >&2; exit 1; }

# run NAME CMD...: stdout to NAME.out, exit status to NAME.rc.
run() {
    local name=$1
    shift
    "$@" >"$out/$name.out" 2>/dev/null
    echo $? >"$out/$name.rc"
}

has_export=0
"$bin" export --help >/dev/null 2>&1 && has_export=1

run rules-json "$bin" lint --rules --json
for f in "${captures[@]}"; do
    n=$(basename "$f" .pcap)
    run "$n.decode" "$bin" decode "$f"
    run "$n.decode-json" "$bin" decode --json "$f"
    run "$n.report" "$bin" report --no-progress --color never "$f"
    run "$n.report-json" "$bin" report --no-progress --json "$f"
    run "$n.report-html" "$bin" report --no-progress --html "$out/$n.html" "$f"
    run "$n.lint" "$bin" lint --no-progress "$f"
    run "$n.lint-json" "$bin" lint --no-progress --json --junit "$out/$n.junit.xml" "$f"
    run "$n.trace" "$bin" trace --no-progress --counters -o "$out/$n.trace.json" "$f"
    if [ $has_export = 1 ]; then
        rm -rf "$out/$n.csv"
        run "$n.export" "$bin" export --no-progress --csv "$out/$n.csv" "$f"
    fi
done
pair=(fixtures/generated/multipath_loss_sender.pcap fixtures/generated/multipath_loss_receiver.pcap)
run pair.report "$bin" report --no-progress --color never "${pair[@]}"
run pair.report-json "$bin" report --no-progress --json "${pair[@]}"
run pair.report-html "$bin" report --no-progress --html "$out/pair.html" "${pair[@]}"
run pair.lint-json "$bin" lint --no-progress --json "${pair[@]}"
run pair.trace "$bin" trace --no-progress -o "$out/pair.trace.json" "${pair[@]}"
if [ $has_export = 1 ]; then
    rm -rf "$out/pair.csv"
    run pair.export "$bin" export --no-progress --csv "$out/pair.csv" "${pair[@]}"
fi
echo "output-snapshot: ${#captures[@]} captures -> $out"
