#!/usr/bin/env bash
# `cargo xtask build-rev` (xtask/src/builds.rs): another version's
# metaroce-analyze, plugin and `walk` example; prints their folder.
#   scripts/build-rev.sh REV [--revert COMMIT]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo xtask build-rev "$@"
