"""The scripts a lent GPU runs (benchmarks/gpu/), dry-run here on the CPU at tiny sizes through the
same commands, so that none can rot between the rare sessions that have a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _dry_run(script: str, out: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "DRY_RUN": "1", "OUT": str(out), **env}
    return subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu" / script)], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=900
    )


def _what_comes_back(out: Path) -> list[Path]:
    """The files under OUT, as the device tool would return them (at most 8, 2 folders down)."""
    return [path for path in out.rglob("*") if path.is_file()]


@pytest.mark.slow
def test_fast_script_dry_run_trains_reports_and_bundles(tmp_path):
    out = tmp_path / "out"
    done = _dry_run("fast.sh", out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    device = (out / "device.txt").read_text()
    assert "jax: " in device and "device: cpu" in device and "commit: " in device and "dry_run: 1" in device
    log = (out / "log.txt").read_text()
    assert "== cartpole_swingup_sparse: cartpole_swingup_sparse_fast, 2 seeds" in log and "exit 0" in log
    # The time-to-score table against the paper's score, from the run's clocks.
    (row,) = json.loads((out / "time_to_score.json").read_text())
    assert (row["task"], row["method"], row["seeds"], row["score"]) == ("cartpole_swingup_sparse", "pbac", 2, 785.0)
    assert row["final_wall_s"] > 0 and "## Time to score" in (out / "results.md").read_text()
    # One bundle holds the logs and the figures; no checkpoint travels back.
    with tarfile.open(out / "fast_runs.tgz") as bundle:
        names = bundle.getnames()
        evaluations = bundle.extractfile("runs/cartpole_swingup_sparse/eval.jsonl").read().decode().splitlines()
    assert "report/curves_wall_cartpole_swingup_sparse.png" in names and not any("checkpoints" in n for n in names)
    assert all("wall_s" in json.loads(line) and "train_s" in json.loads(line) for line in evaluations)
    returned = _what_comes_back(out)
    assert len(returned) <= 8 and all(len(path.relative_to(out).parts) <= 3 for path in returned), returned
