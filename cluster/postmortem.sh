#!/usr/bin/env bash
# Post-mortem of a whole job on Spark: runs the map step (metaroce-analyze
# export, one Spark task per capture) and the reduce (PySpark) and writes
# DIR/report.json and DIR/tables/*.
#
#   cluster/postmortem.sh [--master URL] [--analyzer BIN] [--executor-env TAR] --out DIR INPUT...
#
# INPUT: capture files or export directories (table=.../host=...). Without
# --master, Spark runs in local mode on this machine. Any other option
# before --out (e.g. --conf k=v, --executor-memory 4g) goes to spark-submit.
# The binary must be reachable on every executor: a path on shared storage,
# or it is shipped with --files when it is a local file and a cluster is used.
# The engine (the metaroce package) must be importable by the driver and
# every executor: installed on the nodes, or shipped as a packed virtual
# environment with --executor-env (scripts/build-wheel.sh makes one).
set -euo pipefail
# The job reports its fixed cost from here (spark-submit's start).
export METAROCE_SUBMIT_EPOCH="$(date +%s.%N)"
here="$(cd "$(dirname "$0")" && pwd)"

master="local[*]"
analyzer="${METAROCE_ANALYZE:-}"
submit_args=()
executor_env=""
job_args=()
while (($#)); do
    case "$1" in
    --master) master="$2"; shift 2 ;;
    --analyzer) analyzer="$2"; shift 2 ;;
    --executor-env) executor_env="$2"; shift 2 ;;
    --out) job_args+=(--out "$2"); shift 2 ;;
    --conf|--executor-memory|--driver-memory|--num-executors|--executor-cores|--total-executor-cores|--deploy-mode|--packages|--jars|--archives)
        submit_args+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; job_args+=("$@"); break ;;
    *) job_args+=("$1"); shift ;;
    esac
done

if [ -z "$analyzer" ]; then
    # The workspace's debug or release build, else one on PATH.
    for candidate in "$here/../target/release/metaroce-analyze" "$here/../target/debug/metaroce-analyze"; do
        if [ -x "$candidate" ]; then analyzer="$candidate"; break; fi
    done
    analyzer="${analyzer:-metaroce-analyze}"
fi

spark_submit="${SPARK_SUBMIT:-}"
if [ -z "$spark_submit" ]; then
    venv="${METAROCE_CLUSTER_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/metaroce-cluster-venv}"
    if [ -x "$venv/bin/spark-submit" ]; then
        spark_submit="$venv/bin/spark-submit"
        export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$venv/bin/python}"
    elif command -v spark-submit >/dev/null; then
        spark_submit="spark-submit"
    else
        echo "postmortem: spark-submit not found: run scripts/setup.sh (PySpark in $venv) or set SPARK_SUBMIT" >&2
        exit 1
    fi
fi

# The package travels to the executors as a zip.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$here" && python3 -m zipfile -c "$work/metaroce_cluster.zip" metaroce_cluster >/dev/null)

case "$master" in
# A handful of shuffle partitions for one machine (200 by default). In
# local mode the driver's JVM is the executor too: its JIT's first tier
# and the serial collector halve its start on a small machine, and its
# work here (moving a few large blobs) needs no more (a user's own
# --conf spark.driver.extraJavaOptions, given after, replaces this).
local*) submit_args=(--conf "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
                     "${submit_args[@]}" --conf spark.sql.shuffle.partitions=8) ;;
*) if [ -f "$analyzer" ]; then submit_args+=(--files "$analyzer"); analyzer="$(basename "$analyzer")"; fi ;;
esac

export PYSPARK_PYTHON="${PYSPARK_PYTHON:-python3}"
if [ -n "$executor_env" ]; then
    # Unpacked in each executor's working directory; the driver keeps its
    # own Python (which has the same wheel installed).
    submit_args+=(--archives "$executor_env#metaroce-env"
                  --conf spark.pyspark.python=./metaroce-env/bin/python
                  --conf "spark.pyspark.driver.python=$PYSPARK_PYTHON")
fi
# What the job needs of Spark and no more: no web UI, Python workers
# reused between tasks, Arrow between the JVM and Python, a bucket's
# partials (a few MB) returned with its task's status rather than
# fetched from the executor afterwards.
"$spark_submit" --master "$master" \
    --conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false --conf spark.log.level=WARN \
    --conf spark.python.worker.reuse=true --conf spark.sql.execution.arrow.pyspark.enabled=true \
    --conf spark.task.maxDirectResultSize=64m \
    --py-files "$work/metaroce_cluster.zip" "${submit_args[@]}" \
    "$here/main.py" --analyzer "$analyzer" "${job_args[@]}"
