#!/usr/bin/env bash
# Builds another version's `metaroce-analyze` (release, without the export
# and plot features) and its Wireshark plugin, for the benchmarks that set
# an older version beside the current one in the same run
# (scripts/bench-analyzer.sh and scripts/bench-connections.sh, BEFORE=REV).
#
#   scripts/build-rev.sh REV [--revert COMMIT]
#
# REV is any git revision. With --revert, the version built is REV with
# COMMIT's change undone (`git revert --no-commit -X ours`: hunks that
# later commits changed again keep REV's text): the way to measure one
# change alone, or to build a change's "before" when the commit before it
# does not build. A revision can be named by its message, without an id:
# ':/keeps its first 128 samples' is the youngest commit whose message
# holds those words (gitrevisions(7)).
#
# Prints the folder holding both (metaroce-analyze,
# libmetaroce_dissector.so, and the benchmark's `walk` example when the
# version has it): target/bench/rev-<commit>[-revert-<commit>]/,
# kept for the next run. The version is checked out in a temporary git
# worktree and built in a temporary target dir (its dependencies may differ
# from the work tree's), both removed afterwards; about 3 minutes on the
# 2-core machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() { echo "usage: scripts/build-rev.sh REV [--revert COMMIT]" >&2; exit 2; }
commit() {
    local sha
    # `:/TEXT^{commit}` would search for TEXT^{commit}: resolve, then peel.
    sha="$(git -C "$root" rev-parse --verify --quiet "$1")" \
        && git -C "$root" rev-parse --verify --quiet "$sha^{commit}" \
        || { echo "build-rev: $1 is not a commit" >&2; exit 2; }
}
[ $# -eq 1 ] || [ $# -eq 3 ] || usage
rev="$(commit "$1")"
name="rev-$rev"
revert=
if [ $# -eq 3 ]; then
    [ "$2" = --revert ] || usage
    revert="$(commit "$3")"
    name="$name-revert-$revert"
fi
target_dir="$(cd "$root" && cargo metadata --format-version 1 --no-deps \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
out="$target_dir/bench/$name"
has_walk=
git -C "$root" cat-file -e "$rev:analyzer/cli/examples/walk.rs" 2>/dev/null && has_walk=1
if [ -x "$out/metaroce-analyze" ] && [ -f "$out/libmetaroce_dissector.so" ] \
    && { [ -z "$has_walk" ] || [ -x "$out/walk" ]; }; then
    echo "$out"
    exit 0
fi

tmp="$(mktemp -d)"
cleanup() {
    git -C "$root" worktree remove --force "$tmp/src" 2>/dev/null || true
    git -C "$root" worktree prune
    rm -rf "$tmp"
}
trap cleanup EXIT
git -C "$root" worktree add --detach --quiet "$tmp/src" "$rev"
if [ -n "$revert" ]; then
    # Where later commits touched the same lines, REV's text stays (-X ours):
    # the diff printed below shows what was undone.
    git -C "$tmp/src" revert --no-commit -X ours "$revert" >/dev/null \
        || { echo "build-rev: $3 does not revert on $1" >&2; exit 1; }
    git -C "$tmp/src" diff --cached --stat >&2
fi
echo "build-rev: building $name" >&2
(
    cd "$tmp/src"
    export CARGO_TARGET_DIR="$tmp/target"
    cargo build --release --quiet -p metaroce-analyze --no-default-features --bin metaroce-analyze \
        ${has_walk:+--example walk}
    cargo build --release --quiet -p metaroce-dissector --lib
) >&2
mkdir -p "$out"
cp "$tmp/target/release/metaroce-analyze" "$tmp/target/release/libmetaroce_dissector.so" "$out/"
[ -z "$has_walk" ] || cp "$tmp/target/release/examples/walk" "$out/"
echo "$out"
