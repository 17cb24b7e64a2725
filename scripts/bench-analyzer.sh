#!/usr/bin/env bash
# End-to-end throughput of `metaroce-analyze report --json` against tshark
# and against a bare walk (capture records + the analysis' own decode of
# every frame into an observation, no engine: the `walk` example of
# analyzer/cli), in one run, with peak RSS from /usr/bin/time -v
# for a small and a large capture (RSS must stay flat). The issue's own
# reference walk (proto-parse/examples/reference_walk.rs: mmap +
# pcap-parser + etherparse, no code of ours) runs beside them: it calibrates
# this host against the one the issue's figures were measured on.
#
#   scripts/bench-analyzer.sh [SMALL_PACKETS] [LARGE_PACKETS] [TSHARK_PACKETS]
#
# The analyzer runs in two builds, the plain release build and the
# profile-guided one (scripts/build-pgo.sh, trained on other captures). A
# round runs the two builds, the bare walk and the reference walk in turn;
# ROUNDS rounds (default 3). Each row shows the median of its program's
# runs, and each ratio the median of the ratios within a round (the host's
# speed moves between rounds, far less within one). The PGO build must
# print the same JSON as the plain one (checked here).
#
# Defaults: 1,000,000 and 10,000,000 packets; tshark runs on the small
# capture only (about 80k packets/s: 10M packets would take minutes), set
# TSHARK_PACKETS to the large count to run it on both. Captures are written
# by `fixtures-generator bulk` under target/bench/ (not in git), 8
# connections over 16 evs, 0.5 % DATA loss, 158-byte frames.
#
# tshark decodes UDP 4794 as `data`, or with the MetaRoCE plugin when
# target/release/libmetaroce_dissector.so exists (as root tshark ignores
# WIRESHARK_PLUGIN_DIR, so it then runs as uid 65534 through setpriv).
# Wall times depend on what else runs on the machine: the CPU seconds
# (user + sys) are printed beside them.
#
# BEFORE=REV sets another version's plain build beside the current one
# (built by scripts/build-rev.sh; BEFORE_REVERT=COMMIT: REV with COMMIT's
# change undone): each round runs the two back to back, in alternating
# order, and the bench prints the median and the range of their per-round
# ratios, and both builds' instructions per packet (`report`'s, and the
# one-thread analysis' when that version has the `walk` example).
set -euo pipefail
cd "$(dirname "$0")/.."
small=${1:-1000000}
large=${2:-10000000}
tshark_max=${3:-$small}
dir=target/bench
mkdir -p "$dir"

cargo build --quiet --release -p metaroce-analyze --no-default-features \
    --bin metaroce-analyze --example walk --example thread-stats
cargo build --quiet --release -p fixtures-generator
cargo build --quiet --release -p proto-parse --example reference_walk
bin=target/release/metaroce-analyze
walk=target/release/examples/walk
thread_stats=target/release/examples/thread-stats
pgo=$(scripts/build-pgo.sh --no-default-features)
pgo_walk=$(dirname "$pgo")/examples/walk
rounds=${ROUNDS:-3}
before=
if [ -n "${BEFORE:-}" ]; then
    before="$(scripts/build-rev.sh "$BEFORE" ${BEFORE_REVERT:+--revert "$BEFORE_REVERT"})/metaroce-analyze"
fi
# The issue's own floor, without this project's code (mmap + pcap-parser +
# etherparse; the issue measured it at about 23 M packets/s): it tells how
# fast this host is compared with the one the issue's figures come from.
reference=target/release/examples/reference_walk

capture() {
    local n=$1 f="$dir/bench-$1.pcap"
    if [ ! -s "$f" ]; then
        target/release/fixtures-generator bulk "$f" "$n" >&2
    fi
    echo "$f"
}

# Runs "$@" under /usr/bin/time -v with stdout to /dev/null; prints
# "wall_s cpu_s max_rss_kib". The wall time comes from the nanosecond
# clock (time(1) rounds it to 10 ms, a fifth of a bare walk of 1M packets).
measure() {
    local log t0 t1
    log=$(mktemp)
    t0=$(date +%s%N)
    /usr/bin/time -v "$@" >/dev/null 2>"$log" || { cat "$log" >&2; rm -f "$log"; return 1; }
    t1=$(date +%s%N)
    awk -F': ' -v ns=$((t1 - t0)) '
        /User time/ { u = $2 } /System time/ { s = $2 }
        /Maximum resident set size/ { r = $2 }
        END { printf "%.4f %.3f %d\n", ns / 1e9, u + s, r }' "$log"
    rm -f "$log"
}

plugin=target/release/libmetaroce_dissector.so
# The `thread-stats` example's lines of the current capture, one per round.
threads_log=$(mktemp)
tmpdirs=("$threads_log")
trap 'rm -rf "${tmpdirs[@]}"' EXIT
# The tshark command line (without the file) in the array `tshark_run`.
if [ -f "$plugin" ]; then
    pdir=$(mktemp -d); home=$(mktemp -d); tmpdirs+=("$pdir" "$home")
    chmod 755 "$pdir"; chmod 777 "$home"
    mm=$(tshark --version 2>/dev/null | head -1 | grep -oE '[0-9]+\.[0-9]+' | head -1)
    mkdir -p "$pdir/$mm/epan"; cp "$plugin" "$pdir/$mm/epan/"; chmod -R a+rX "$pdir"
    tshark_run=(env HOME="$home" WIRESHARK_PLUGIN_DIR="$pdir" tshark -T fields
        -e frame.number -e udp.srcport -e metaroce.psn)
    [ "$(id -u)" = 0 ] && tshark_run=(setpriv --reuid=65534 --regid=65534 --clear-groups "${tshark_run[@]}")
else
    tshark_run=(tshark -T fields -e frame.number -e udp.srcport -d udp.port==4794,data)
fi

# Median of the numbers on standard input.
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# The programs compared, run in turn on "$1", $rounds times: the four runs
# of a round see the same phase of this noisy host, so the ratios are taken
# within each round (then their median). One line per round:
#   analyzer(wall cpu rss) PGO(...) bare-walk(...) reference-walk(...) lint(...) [BEFORE(...)]
# where lint is `metaroce-analyze lint` (docs/lint.md) on the same capture.
# With BEFORE, the analyzer and the other version run back to back, the
# other one first in every second round. Each round also runs the analysis
# once more, untimed, to record how its two threads shared the work (the
# `thread-stats` example).
rounds_on() {
    local i now old=
    for ((i = 0; i < rounds; i++)); do
        if [ -n "$before" ] && ((i % 2)); then
            old=$(measure "$before" report --json --no-progress "$1")
        fi
        now=$(measure "$bin" report --json --no-progress "$1")
        lint=$(measure "$bin" lint --json --no-progress "$1")
        if [ -n "$before" ] && ! ((i % 2)); then
            old=$(measure "$before" report --json --no-progress "$1")
        fi
        echo "$now" \
            "$(measure "$pgo" report --json --no-progress "$1")" \
            "$(measure "$walk" "$1")" \
            "$(measure "$reference" "$1")" "$lint" $old
        "$thread_stats" "$1" >>"$threads_log"
    done
}

# Program $2 (1-6, in the order of rounds_on) over the rounds in $1: its
# median wall and CPU times and its largest RSS.
program_stats() {
    local c=$((3 * $2 - 2))
    echo "$(cut -d' ' -f"$c" <<<"$1" | median)" \
        "$(cut -d' ' -f"$((c + 1))" <<<"$1" | median)" \
        "$(cut -d' ' -f"$((c + 2))" <<<"$1" | sort -g | tail -1)"
}

# The median over the rounds in $1 of column $2 divided by column $3.
ratio() {
    awk -v a="$2" -v b="$3" '{ print $a / $b }' <<<"$1" | median
}

# "min-max" over the rounds in $1 of column $2 divided by column $3.
ratio_range() {
    awk -v a="$2" -v b="$3" '{ print $a / $b }' <<<"$1" | sort -g | awk '
        NR == 1 { lo = $1 } { hi = $1 } END { printf "%.3f-%.3f", lo, hi }'
}

rate() { awk -v n="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", n / s; else print "inf" }'; }

# One row of the table: row WHAT PACKETS WALL_S CPU_S MAX_RSS_KIB.
row() {
    printf '%-46s %11d %9.3f %9.3f %13s %13s %8dKiB\n' "$1" "$2" "$3" "$4" "$(rate "$2" "$3")" "$(rate "$2" "$4")" "$5"
}

printf '%-46s %11s %9s %9s %13s %13s %10s\n' \
    "what" "packets" "wall s" "cpu s" "packets/s" "pkts/cpu-s" "max RSS"
rss=()  # "packets max_rss_kib" of `report`, per capture
for n in "$small" "$large"; do
    f=$(capture "$n")
    chmod a+r "$f"; chmod a+rx "$dir"
    # Warm the page cache as reading a capture from disk leaves it: drop the
    # file's cached pages (the generator's writes leave them in 4 KiB pages)
    # and read it back, so readahead caches it in large folios. Reading or
    # mapping those costs far less kernel time (docs/performance.md); every
    # program below reads the same cached file.
    dd if="$f" iflag=nocache count=0 status=none
    cat "$f" >/dev/null
    if ! cmp -s <("$bin" report --json --no-progress "$f") <("$pgo" report --json --no-progress "$f"); then
        echo "the PGO build's report differs from the plain build's on $f" >&2
        exit 1
    fi
    if [ -n "$before" ]; then
        if cmp -s <("$bin" report --json --no-progress "$f") <("$before" report --json --no-progress "$f"); then
            echo "  BEFORE's report is identical to this build's on $f"
        else
            echo "  BEFORE's report differs from this build's on $f"
        fi
    fi
    runs=$(rounds_on "$f")
    read -r aw ac ar <<<"$(program_stats "$runs" 1)"
    read -r pw pc pr <<<"$(program_stats "$runs" 2)"
    read -r ww wc wr <<<"$(program_stats "$runs" 3)"
    read -r rw rc rr <<<"$(program_stats "$runs" 4)"
    row "metaroce-analyze report --json" "$n" "$aw" "$ac" "$ar"
    row "metaroce-analyze report --json (PGO build)" "$n" "$pw" "$pc" "$pr"
    row "bare walk (records + decode)" "$n" "$ww" "$wc" "$wr"
    row "reference walk (mmap+pcap-parser+etherparse)" "$n" "$rw" "$rc" "$rr"
    awk -v n="$n" -v aw="$(ratio "$runs" 1 7)" -v ar="$(ratio "$runs" 1 10)" \
        -v pw="$(ratio "$runs" 4 7)" -v pr="$(ratio "$runs" 4 10)" -v r="$rw" 'BEGIN {
        printf "  ratios (wall, medians of the per-round ratios): analyzer takes %.2fx the bare walk time, %.2fx the reference walk time (PGO build: %.2fx and %.2fx); the reference walks at %.0f%% of the 23 M/s the issue measured\n", aw, ar, pw, pr, 100 * n / r / 23e6 }'
    rss+=("$n $ar")
    read -r lw lc lr <<<"$(program_stats "$runs" 5)"
    row "metaroce-analyze lint --json" "$n" "$lw" "$lc" "$lr"
    echo "  lint / report, per-round ratios over $rounds rounds: wall x$(ratio "$runs" 13 1) (range $(ratio_range "$runs" 13 1)), CPU x$(ratio "$runs" 14 2) (range $(ratio_range "$runs" 14 2)); the budget is x1.25"
    if [ -n "$before" ]; then
        read -r bw bc br <<<"$(program_stats "$runs" 6)"
        row "report --json, BEFORE=$BEFORE${BEFORE_REVERT:+ less $BEFORE_REVERT}" "$n" "$bw" "$bc" "$br"
        echo "  this build's time / BEFORE's, per-round ratios over $rounds rounds: wall x$(ratio "$runs" 1 16) (range $(ratio_range "$runs" 1 16)), CPU x$(ratio "$runs" 2 17) (range $(ratio_range "$runs" 2 17)), peak RSS x$(ratio "$runs" 3 18)"
    fi
    # Which thread set the wall time, round by round: the one that did not
    # wait for the other (the host's phases move it; docs/performance.md).
    # From the untimed run of each round, in the same phase of the host.
    awk '{ for (i = 1; i < NF; i++) v[$i] = $(i + 1)
           raw = raw sep sprintf("%.0f%%", 100 * v["raw"] / v["batches"])
           pw = pw sep sprintf("%.2f", v["parser_wait_ns"] / 1e9)
           ew = ew sep sprintf("%.2f", v["engine_wait_ns"] / 1e9); sep = " " }
         END { printf "  threads of the analysis, per round: raw batches %s; the parsing thread waited %s s, the engine thread %s s\n", raw, pw, ew }' "$threads_log"
    : >"$threads_log"
    if [ "$n" -le "$tshark_max" ] && command -v tshark >/dev/null; then
        read -r tw tc tr < <(measure "${tshark_run[@]}" -r "$f")
        row "tshark -T fields" "$n" "$tw" "$tc" "$tr"
        awk -v a="$aw" -v p="$pw" -v t="$tw" 'BEGIN {
            printf "  ratios (wall): analyzer is %.1fx faster than tshark (PGO build: %.1fx)\n", t / a, t / p }'
        echo "  tshark: ${tshark_run[*]} -r $f"
    fi
done
read -r n1 r1 <<<"${rss[0]}"
read -r n2 r2 <<<"${rss[1]}"
awk -v n1="$n1" -v r1="$r1" -v n2="$n2" -v r2="$r2" 'BEGIN {
    printf "peak RSS of report: %d KiB at %d packets, %d KiB at %d packets (x%.2f for x%.0f packets)\n", r1, n1, r2, n2, r2 / r1, n2 / n1 }'

# Instructions per packet (valgrind's cachegrind, counted, not timed): the
# one figure this noisy 2-core machine cannot disturb. The two threads run
# serialised under valgrind; the count is their sum, and it moves by about
# 1 % between runs with how the threads happened to share the decoding.
# `walk --engine` (the same analysis on one thread, no batches) is exact.
if command -v valgrind >/dev/null; then
    f=$(capture "$small")
    instr() {
        valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
            awk '/I *refs:/ { gsub(",", "", $NF); print $NF }'
    }
    ai=$(instr "$bin" report --json --no-progress "$f")
    li=$(instr "$bin" lint --json --no-progress "$f")
    ei=$(instr "$walk" "$f" --engine)
    wi=$(instr "$walk" "$f")
    pi=$(instr "$pgo_walk" "$f" --engine)
    awk -v n="$small" -v a="$ai" -v e="$ei" -v w="$wi" -v p="$pi" 'BEGIN {
        printf "instructions per packet (%d packets): report %.0f, one-thread analysis %.0f (PGO build %.0f), bare walk %.0f (report x%.2f)\n", n, a / n, e / n, p / n, w / n, a / w }'
    awk -v n="$small" -v a="$ai" -v l="$li" 'BEGIN {
        printf "instructions per packet of lint: %.0f (report x%.3f; the budget is x1.25)\n", l / n, l / a }'
    if [ -n "$before" ]; then
        bi=$(instr "$before" report --json --no-progress "$f")
        awk -v n="$small" -v a="$ai" -v b="$bi" 'BEGIN {
            printf "instructions per packet of report, BEFORE: %.0f (this build x%.3f of it)\n", b / n, a / b }'
        before_walk="$(dirname "$before")/walk"
        if [ -x "$before_walk" ]; then
            bei=$(instr "$before_walk" "$f" --engine)
            awk -v n="$small" -v e="$ei" -v b="$bei" 'BEGIN {
                printf "instructions per packet of the one-thread analysis (exact), BEFORE: %.0f (this build x%.3f of it)\n", b / n, e / b }'
        fi
    fi
else
    echo "instructions per packet: skipped (valgrind is not installed: apt-get install valgrind)"
fi
