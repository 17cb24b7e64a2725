"""The job on a real standalone Spark cluster on this machine: one master
and two workers (each its own JVM, with its own Python workers) from the
pip-installed PySpark, bound to 127.0.0.1. The engine reaches the
executors the way a real cluster needs it: the packed virtual environment
of scripts/build-wheel.sh, unpacked by Spark from --archives (a wheel on
--py-files would not do: Python cannot import an extension module from a
zip). One of the matcher's tasks fails on its first attempt (fault
injection): Spark retries it, and the result is still equal to the
single-machine report (no double counting)."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import POSTMORTEM, run



def spark_home():
    import pyspark

    return Path(pyspark.__file__).parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(path, text, proc, seconds=90):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise AssertionError(f"{path.name}: exited {proc.returncode}:\n{path.read_text()[-3000:]}")
        time.sleep(0.5)
    raise AssertionError(f"{path.name}: no {text!r} after {seconds} s:\n{path.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``spark://127.0.0.1:PORT`` of a running master with two registered
    workers (1 core, 1 GiB each); stopped after the module, also when a
    test fails."""
    logs = tmp_path_factory.mktemp("standalone")
    env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1",
               SPARK_WORKER_DIR=str(logs / "work"), SPARK_LOG_DIR=str(logs))
    spark_class = spark_home() / "bin" / "spark-class"
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = []

    def start(name, *args):
        log = logs / f"{name}.log"
        p = subprocess.Popen([str(spark_class), *args], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                             start_new_session=True)
        procs.append(p)
        return p, log

    try:
        master, master_log = start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(port), "--webui-port", str(free_port()))
        wait_for(master_log, "I have been elected leader", master)
        for i in range(2):
            w, w_log = start(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                             "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()), url)
            wait_for(w_log, "Successfully registered with master", w)
        yield url, logs
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, 15)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)


def test_standalone_cluster_equals_the_single_machine_report(cluster, captures8, binaries, wheel):
    url, logs = cluster
    out = captures8["dir"] / "standalone"
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    done = run([POSTMORTEM, "--master", url, "--analyzer", binaries[0], "--executor-env",
                wheel / "executor-env.tar.gz", "--total-executor-cores", "2",
                "--conf", "spark.executorEnv.METAROCE_TEST_FAIL_FIRST_ATTEMPT=1",
                "--conf", "spark.sql.shuffle.partitions=4",
                "--out", out, *captures8["captures"]], env=env)
    import json

    report = json.loads((out / "report.json").read_text())
    between = [{k: v for k, v in b.items() if k not in ("host_a", "host_b")} for b in report["between_captures"]]
    assert between == captures8["single"]["between_captures"]
    assert report["messages"] == []
    # Both workers ran executors, and the injected failure was retried.
    apps = list((logs / "work").glob("app-*/*"))
    assert len({p.name for p in apps}) >= 2, apps
    stderr = done.stderr
    assert "partition 0 fails on its first attempt" in stderr or any(
        "partition 0 fails on its first attempt" in (p / "stderr").read_text(errors="replace")
        for p in apps if (p / "stderr").exists()
    )
