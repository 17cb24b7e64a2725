#!/usr/bin/env bash
# Builds the `metaroce` Python package's wheel (python/, maturin, release,
# one abi3 wheel for CPython >= 3.9) unless a wheel of the same sources is
# cached, installs it in the cluster's virtual environment, and packs the
# executors' environment (venv-pack: a venv with pyarrow and the wheel,
# for `--archives` on a cluster). Prints the cache directory, which holds:
#
#   metaroce-*.whl            the wheel
#   executor-env.tar.gz       the executors' packed environment
#
#   scripts/build-wheel.sh            (scripts/setup.sh first: maturin, venv-pack)
#
# The cache (~/.cache/metaroce-wheel/<hash>) is keyed by a hash of every
# source the wheel compiles (python/, analyzer/, proto-parse/, the
# manifests and Cargo.lock), so CI builds it once per change.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${METAROCE_CLUSTER_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/metaroce-cluster-venv}"
for tool in maturin venv-pack; do
    if [ ! -x "$venv/bin/$tool" ]; then
        echo "build-wheel: $venv/bin/$tool is missing: run scripts/setup.sh" >&2
        exit 1
    fi
done

hash="$(find python analyzer/src analyzer/build.rs analyzer/Cargo.toml analyzer/cli/src analyzer/cli/Cargo.toml \
            proto-parse/src proto-parse/Cargo.toml Cargo.toml Cargo.lock cluster/requirements.txt \
            -type f -not -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/metaroce-wheel/$hash"
if ! ls "$cache"/metaroce-*.whl >/dev/null 2>&1 || [ ! -f "$cache/executor-env.tar.gz" ]; then
    tmp="$cache.tmp.$$"
    rm -rf "$tmp" && mkdir -p "$tmp"
    echo "build-wheel: building the metaroce wheel ($hash)" >&2
    "$venv/bin/maturin" build --release --quiet -m python/Cargo.toml -i "$venv/bin/python" -o "$tmp" >&2
    # The executors' environment: pyarrow and pandas (PySpark's mapInArrow)
    # and the wheel; PySpark itself comes with Spark on every node.
    env_dir="$tmp/executor-env"
    python3 -m venv "$env_dir"
    "$env_dir/bin/python" -m pip install -q $(grep -E '^(pyarrow|pandas)==' cluster/requirements.txt) \
        "$tmp"/metaroce-*.whl
    "$venv/bin/venv-pack" -q -p "$env_dir" -o "$tmp/executor-env.tar.gz"
    rm -rf "$env_dir"
    # Another build of the same sources may have finished first.
    mv -T "$tmp" "$cache" 2>/dev/null || rm -rf "$tmp"
fi
wheel="$(ls "$cache"/metaroce-*.whl)"
# Installed in the cluster's environment (the driver's), once per wheel.
if [ "$(cat "$venv/.metaroce-wheel" 2>/dev/null)" != "$wheel" ]; then
    "$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$wheel" >&2
    echo "$wheel" >"$venv/.metaroce-wheel"
fi
echo "$cache"
