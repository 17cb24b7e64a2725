"""An executor whose engine differs from the driver's: its Python workers
import another ``metaroce`` package (a module of that name first on their
path, as a node with another wheel installed would), and the job stops
with a message naming the executor and both versions instead of mixing
two engines' rules."""

import os
import subprocess

import metaroce
from conftest import POSTMORTEM, generate, run


def test_an_executor_with_another_engine_stops_the_job(binaries, tmp_path):
    captures = generate(binaries, tmp_path / "captures", "4", "--iterations", "2")
    exports = tmp_path / "exports"
    run([binaries[0], "export", "--no-progress", "--parquet", exports, *captures])
    other = tmp_path / "other-engine" / "metaroce"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text('def engine_version():\n    return "0.0.1+0123456789ab"\n')
    done = subprocess.run(
        [str(POSTMORTEM), "--master", "local[2]", "--conf",
         f"spark.executorEnv.PYTHONPATH={other.parent}", "--out", str(tmp_path / "out"), str(exports)],
        capture_output=True, text=True, env=dict(os.environ),
    )
    assert done.returncode != 0, done.stderr[-3000:]
    assert "runs the metaroce engine 0.0.1+0123456789ab" in done.stderr, done.stderr[-3000:]
    assert f"the driver {metaroce.engine_version()}" in done.stderr
    assert not (tmp_path / "out" / "report.json").exists()
