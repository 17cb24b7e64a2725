"""The engine-only benchmark (cluster/engine_bench.py, run by bench.sh)
runs the reduce's engine calls as the job does: on the 8-host scenario
its ``between_captures`` is ``report --json``'s and its figures count
what it matched."""

import json
import sys
from pathlib import Path

from conftest import run

BENCH = Path(__file__).resolve().parents[1] / "engine_bench.py"


def test_engine_bench_matches_as_the_single_process_report(captures8, binaries, tmp_path):
    exports = tmp_path / "exports"
    for capture in captures8["captures"]:
        run([binaries[0], "export", "--no-progress", "--parquet", exports, capture])
    report = tmp_path / "engine.json"
    done = run([sys.executable, BENCH, exports, "--report", report])
    figures = json.loads(done.stdout)
    between = json.loads(report.read_text())["between_captures"]
    assert between == captures8["single"]["between_captures"]
    matched = sum(b["matched_packets"] for b in between)
    assert figures["hosts"] == 8
    assert figures["matched"] == matched > 0
    assert figures["engine s"] > 0
    # The rate is over the unrounded CPU seconds the figure rounds.
    rate = matched / figures["engine s"]
    assert abs(figures["engine matched/s/core"] - rate) <= 0.05 * rate
