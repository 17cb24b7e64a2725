"""Shared fixtures: the workspace's binaries (built here with cargo, so a
missing build fails loudly instead of skipping), the `metaroce` wheel
(scripts/build-wheel.sh: built once per source change, installed in this
environment, with the executors' packed environment), the job-scale
scenario written by the fixtures generator, and runs of
cluster/postmortem.sh in Spark local mode (local[2])."""

import importlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
POSTMORTEM = ROOT / "cluster" / "postmortem.sh"


_WHEEL_CACHE = []


def pytest_configure(config):
    """Builds and installs the wheel before the tests are collected: a test
    module imports ``metaroce`` when it is collected, and must find the
    wheel of these sources (not an older one installed by an earlier run,
    nor none on a fresh machine)."""
    done = run([ROOT / "scripts" / "build-wheel.sh"], cwd=ROOT)
    cache = Path(done.stdout.strip().splitlines()[-1])
    assert list(cache.glob("metaroce-*.whl")) and (cache / "executor-env.tar.gz").is_file(), cache
    _WHEEL_CACHE.append(cache)
    importlib.invalidate_caches()


@pytest.fixture(scope="session")
def wheel():
    """The cache directory of the wheel and of the executors' packed
    environment (``executor-env.tar.gz``), made by ``pytest_configure``."""
    return _WHEEL_CACHE[-1]


def run(cmd, **kw):
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-6000:]}")
    return done


@pytest.fixture(scope="session")
def binaries():
    """``(metaroce-analyze, fixtures-generator)``, the debug builds cargo
    test makes (the analyzer with its default features: export included)."""
    if shutil.which("java") is None:
        raise AssertionError("java is missing: run scripts/setup.sh (Java 17 for Spark)")
    run(["cargo", "build", "-q", "-p", "metaroce-analyze", "--bin", "metaroce-analyze",
         "-p", "fixtures-generator", "--bin", "fixtures-generator"], cwd=ROOT)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug"
    return target / "metaroce-analyze", target / "fixtures-generator"


def generate(binaries, out, hosts, *extra):
    run([binaries[1], "job-allreduce", "--hosts", hosts, *extra, out])
    return sorted(Path(out).glob("host-*.pcap"))


def postmortem(binaries, out, inputs, *options):
    done = run([POSTMORTEM, "--master", "local[2]", "--analyzer", binaries[0], "--out", out, *options, *inputs])
    report = json.loads((Path(out) / "report.json").read_text())
    return report, done.stdout + done.stderr


@pytest.fixture(scope="session")
def captures8(binaries, tmp_path_factory):
    """The 8-host scenario's captures and the single-machine ``report
    --json`` of all of them (given in host-name order, the job's capture
    indexes)."""
    d = tmp_path_factory.mktemp("job8")
    captures = generate(binaries, d / "captures", 8)
    single = json.loads(run([binaries[0], "report", "--json", "--no-progress", *captures]).stdout)
    expected = json.loads((d / "captures" / "job.expected.json").read_text())
    return {"dir": d, "captures": captures, "single": single, "expected": expected}


@pytest.fixture(scope="session")
def job8(binaries, captures8):
    """The 8-host scenario and the Spark job's report in local mode."""
    report, stderr = postmortem(binaries, captures8["dir"] / "out", captures8["captures"], "--tables")
    return {**captures8, "report": report, "stderr": stderr}
