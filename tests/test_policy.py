"""A trained policy back from its run directory (`mjx_pbac.load_policy`, mjx_pbac/policy.py) and
`train.py evaluate`: a finished PBAC chain run's checkpoint evaluated again reproduces its logged
evaluation; more episodes and env overrides; every bad input a one-line error that changes
nothing in the run directory. (Every algorithm's `load_policy` round trip is in test_algos, on
the chain run it trains there.)"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
from pathlib import Path

import jax
import pytest

import train as cli
from mjx_pbac import load_policy, rundir
from tests.policy_checks import logged_row, replayed_returns


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """PBAC on the chain, 2 seeds, 2,000 env steps, its final checkpoint at 2,000 (test_algos'
    settings: its compiled programs come back from the persistent cache)."""
    run_dir = tmp_path_factory.mktemp("policy") / "pbac"
    cli.main([
        "--profile", "chain", "--algo", "pbac", "--seeds", "2", "--train.total-steps", "2000",
        "--train.eval-interval", "1000", "--train.run-dir", str(run_dir), "--train.progress", "False",
        "--train.tensorboard", "False",
    ])
    return run_dir


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.run(argv)
    return code, out.getvalue(), err.getvalue()


def _fingerprint(run_dir: Path) -> dict[str, str]:
    """Every file of the run directory but evaluate's reports, with its contents' hash."""
    return {
        str(path.relative_to(run_dir)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(run_dir.rglob("*"))
        if path.is_file() and rundir.EVALUATIONS not in path.parts
    }


@pytest.mark.slow
def test_evaluate_reproduces_the_runs_final_evaluation_and_touches_none_of_its_files(finished):
    before = _fingerprint(finished)
    code, out, err = _run(["evaluate", str(finished)])
    assert code == 0, err
    written = finished / rundir.EVALUATIONS / "step_000002000_4ep.json"
    assert f"wrote {written}" in out and "| 1 | pbac | 1 | chain | " in out, out
    report = json.loads(written.read_text())
    assert (report["checkpoint"], report["env_steps"], report["episodes"]) == ("step_000002000.npz", 2000, 4)
    for row in report["members"]:
        logged = logged_row(finished, row["member"], 2000)
        assert row["returns"] == logged["returns"] and row["lengths"] == logged["lengths"], row
        assert row["return_mean"] == pytest.approx(logged["return_mean"], rel=1e-6)
    assert _fingerprint(finished) == before


@pytest.mark.slow
def test_evaluate_takes_more_episodes_an_env_override_a_checkpoint_and_a_member(finished, tmp_path):
    out = tmp_path / "long.json"
    code, text, err = _run([
        "evaluate", str(finished), "--episodes", "6", "--set", "horizon=30", "--checkpoint", "2000",
        "--member", "0", "--out", str(out),
    ])
    assert code == 0, err
    report = json.loads(out.read_text())
    assert report["env_overrides"] == ["horizon=30"] and report["episodes"] == 6
    (row,) = report["members"]
    assert row["member"] == 0 and len(row["returns"]) == 6 and row["lengths"] == [30] * 6
    assert "env overrides horizon=30" in text


@pytest.mark.slow
def test_load_policy_acts_as_the_run_evaluated_for_each_member(finished):
    for member in (0, 1):
        loaded = load_policy(finished, member=member, checkpoint="step_000002000.npz")
        assert loaded.member.index == member and loaded.config.algo == "pbac"
        row = logged_row(finished, member, 2000)
        assert replayed_returns(loaded, len(row["returns"])) == row["returns"]
    single = loaded.act(loaded.env.reset(jax.random.key(0)).obs)
    assert single.shape == (loaded.env.action_size,)
    explored = loaded.act(jax.numpy.zeros((3, loaded.env.observation_size)), jax.random.key(1))
    assert explored.shape == (3, loaded.env.action_size) and bool((abs(explored) <= 1).all())
    greedy = loaded.act(jax.numpy.zeros((3, loaded.env.observation_size)))
    assert not bool((explored == greedy).all())  # a key explores: sampled, not the evaluation rule
    assert bool((loaded.act(jax.numpy.zeros((3, loaded.env.observation_size))) == greedy).all())


def _damaged_copy(finished: Path, tmp_path: Path) -> Path:
    copy = shutil.copytree(finished, tmp_path / "damaged")
    path = copy / "checkpoints" / "step_000002000.npz"
    path.write_bytes(path.read_bytes()[:1000])
    return copy


def _unknown_algorithm(finished: Path, tmp_path: Path) -> Path:
    copy = shutil.copytree(finished, tmp_path / "unknown")
    record = json.loads((copy / "config.json").read_text())
    record["config"]["algo"] = "ppo"
    (copy / "config.json").write_text(json.dumps(record))
    return copy


@pytest.mark.slow
@pytest.mark.parametrize("where, options, message", [
    ("missing", [], "no run directory"),
    ("run", ["--member", "2"], r"--member 2 is out of range: .* has 2 member\(s\), 0..1"),
    ("run", ["--checkpoint", "999"], r"no checkpoint .*step_000000999.npz; the checkpoints of .*: step_000002000.npz"),
    ("damaged", [], r"step_000002000.npz"),
    ("unknown algorithm", [], r"invalid config.*ppo"),
    ("run", ["--episodes", "0"], r"--episodes must be >= 1, got 0"),
    ("run", ["--set", "colour=red"], r"colour"),
    ("run", ["--set", "horizon"], r"horizon"),
])
def test_bad_input_is_one_line_and_changes_nothing(finished, tmp_path, where, options, message):
    import re

    if where == "run":
        target = finished
    elif where == "missing":
        target = tmp_path / "nothing_here"
    elif where == "damaged":
        target = _damaged_copy(finished, tmp_path)
    else:
        target = _unknown_algorithm(finished, tmp_path)
    before = _fingerprint(target) if target.exists() else None
    code, _, err = _run(["evaluate", str(target), *options])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (where, options, err)
    assert re.search(message, lines[0]), lines[0]
    if before is not None:
        assert _fingerprint(target) == before  # a damaged checkpoint is reported, not renamed


@pytest.mark.slow
def test_load_policy_refuses_a_member_out_of_range_and_a_run_without_checkpoints(finished, tmp_path):
    """A member out of range is named before the checkpoints are looked at; a run without any
    checkpoint says so."""
    with pytest.raises(rundir.RunError, match=r"member 5 is out of range: .* has 2 member\(s\), 0..1: 0 \(pbac, seed 0, chain\)"):
        load_policy(finished, member=5)
    empty = shutil.copytree(finished, tmp_path / "empty")
    shutil.rmtree(empty / "checkpoints")
    with pytest.raises(rundir.RunError, match="has no checkpoint"):
        load_policy(empty)
    # The member is checked from the config before anything is built or read: no checkpoint needed
    with pytest.raises(rundir.RunError, match=r"member 2 is out of range"):
        load_policy(empty, member=2)
