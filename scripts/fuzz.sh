#!/usr/bin/env bash
# Runs every cargo-fuzz target of proto-parse for SECONDS each (default 60)
# and prints the executions and crashes of each. cargo-fuzz needs nightly
# features; this machine has one stable toolchain, so RUSTC_BOOTSTRAP=1
# enables them (libFuzzer + ASan).
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../proto-parse"
seconds="${1:-60}"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
export RUSTC_BOOTSTRAP=1
targets=$(cargo fuzz list)
cargo fuzz build -O
status=0
for target in $targets; do
    log=$(mktemp)
    if cargo fuzz run -O "$target" -- -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1; then
        result="0 crashes"
    else
        result="FAILED (see fuzz/artifacts/$target)"
        status=1
    fi
    execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
    printf '%-16s %12s executions in %ss: %s\n' "$target" "$execs" "$seconds" "$result"
    rm -f "$log"
done
exit $status
