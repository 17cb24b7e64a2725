#!/usr/bin/env bash
# `metaroce-analyze lint` against `report`, side by side on the analyzer
# benchmark's bulk capture (fixtures-generator bulk: 8-packet WRITEs over
# 16 evs, ACKs, losses NACKed and retransmitted), the issue's budget being
# lint <= 1.25 x report per packet:
# - instructions per packet of the one-thread analysis, the `walk`
#   example of analyzer/cli with `--engine` against `--lint` (cachegrind;
#   exact: the same decoding and engine as report and lint, without the
#   two threads' sharing of the decoding, which moves the next figure by
#   about 1 % between runs);
# - instructions per packet of `report` and `lint` themselves
#   (cachegrind, both threads);
# - CPU time (perf's task-clock, every thread) over ROUNDS rounds, report
#   then lint in each round (they see the same phase of a noisy host), the
#   median of the per-round ratios.
# The bulk capture's connections start mid-stream, so the rules that need
# a captured handshake are not judged; HANDSHAKE=1 measures a capture whose
# connections open with CONNECT and ACCEPT (`bulk --handshake`: FRAMES
# DATA and feedback frames plus 2 CTRL frames per connection), where they are.
# Usage: [HANDSHAKE=1] scripts/bench-lint.sh [FRAMES]   (default 1000000; ROUNDS=5)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
rounds=${ROUNDS:-5}
target=${CARGO_TARGET_DIR:-target}
dir=$target/bench
mkdir -p "$dir"
for tool in valgrind perf; do
    command -v "$tool" >/dev/null || { echo "bench-lint: $tool is needed (scripts/setup.sh)" >&2; exit 1; }
done
cargo build --quiet --release -p metaroce-analyze --no-default-features --bin metaroce-analyze \
    --example walk
cargo build --quiet --release -p fixtures-generator
bin=$target/release/metaroce-analyze
if [ "${HANDSHAKE:-0}" = 1 ]; then
    f="$dir/bench-hs-$n.pcap"
    [ -s "$f" ] || "$target/release/fixtures-generator" bulk "$f" "$n" --handshake >&2
else
    f="$dir/bench-$n.pcap"
    [ -s "$f" ] || "$target/release/fixtures-generator" bulk "$f" "$n" >&2
fi
echo "capture: $f"

# Instructions of "$@" (stdout discarded).
instructions() {
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
        awk '/ I +refs:/ { gsub(",", "", $NF); print $NF }'
}
# CPU milliseconds of "$@", every thread.
cpu() {
    perf stat -x, -e task-clock "$@" 2>&1 >/dev/null | awk -F, '/task-clock/ { print $1 }'
}

walk=$target/release/examples/walk
engine_ir=$(instructions "$walk" "$f" --engine)
walk_lint_ir=$(instructions "$walk" "$f" --lint)
awk -v r="$engine_ir" -v l="$walk_lint_ir" -v n="$n" 'BEGIN {
    printf "instructions per packet, one thread (%d frames): analysis %.0f, with the lint %.0f, ratio %.3f\n",
        n, r / n, l / n, l / r }'
report_ir=$(instructions "$bin" report --json --no-progress "$f")
lint_ir=$(instructions "$bin" lint --json --no-progress "$f")
awk -v r="$report_ir" -v l="$lint_ir" -v n="$n" 'BEGIN {
    printf "instructions per packet, two threads (%d frames): report %.0f, lint %.0f, lint/report %.3f\n",
        n, r / n, l / n, l / r }'

ratios=()
for ((i = 0; i < rounds; i++)); do
    r=$(cpu "$bin" report --json --no-progress "$f")
    l=$(cpu "$bin" lint --json --no-progress "$f")
    echo "round $((i + 1)): CPU ms report $r, lint $l"
    ratios+=("$(awk -v r="$r" -v l="$l" 'BEGIN { print (r > 0) ? l / r : 0 }')")
done
printf '%s\n' "${ratios[@]}" | sort -g |
    awk '{ v[NR] = $1 } END { printf "CPU lint/report, median of %d rounds: %.3f\n", NR, (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
