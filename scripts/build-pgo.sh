#!/usr/bin/env bash
# `cargo xtask pgo` (xtask/src/builds.rs): metaroce-analyze built with
# profile-guided optimisation; prints the binary's path.
#   [PGO_RUSTFLAGS=...] scripts/build-pgo.sh [CARGO_BUILD_ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo xtask pgo "$@"
