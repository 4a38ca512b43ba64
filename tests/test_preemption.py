"""Chunks bounded in wall time and stops within a grace period (`TrainConfig.chunk_seconds`,
`TrainConfig.stop_grace_seconds`): the lengths a chunk may be split into, the state's
bit-identity under any split, a real SIGTERM to a run whose chunks were split (exit 75 within the
grace, resumed bit-exactly), and the one-line warnings on edge values.

The two-process stop (SIGTERM to one process of a jax.distributed run) is in test_devices."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from mjx_pbac import checkpoint, records
from mjx_pbac.build import build
from mjx_pbac.config import TrainConfig, load_profile
from mjx_pbac.hlo import program_stats
from mjx_pbac.schedule import Schedule, edge_warnings

ROOT = Path(__file__).resolve().parent.parent


def _schedule(**train) -> Schedule:
    return Schedule.of(TrainConfig(**train))


# -- lengths ----------------------------------------------------------------------------------


def test_a_chunk_runs_as_many_iterations_as_fit_the_target_before_the_grid():
    schedule = _schedule(chunk_steps=1_000)
    assert schedule.split(1_000, None, 10.0) == 1_000  # not timed yet: whole
    assert schedule.split(1_000, 0.2, 0.0) == 1_000  # chunk_seconds 0: whole
    assert schedule.split(1_000, 0.005, 10.0) == 1_000  # 5 s: fits
    assert schedule.split(1_000, 0.2, 10.0) == 50  # 50 x 0.2 s = 10 s
    assert schedule.split(1_000, 0.3, 10.0) == 33  # any length: 33 x 0.3 s = 9.9 s
    assert schedule.split(1_000, 60.0, 10.0) == 1  # nothing fits: one vector step
    assert schedule.split(40, 0.1, 10.0) == 40  # never past the grid's next boundary


def test_each_program_measures_its_pace_on_a_probe_then_fills_the_target():
    """Pacing with any-length programs: a kind's first chunk is a probe of one vector step; its
    pace sizes the next chunks to the target up to the grid; a slower chunk shortens the next, a
    faster one lengthens it; the warm-up's pace does not stand for training's. Without any-length
    programs (a GPU), a kind's first chunk is whole unless the warm-up's pace already says it
    outlasts the target."""
    from mjx_pbac.pacing import PROBE_ITERATIONS, Pacing

    schedule = _schedule(chunk_steps=100)  # 100 vector steps per chunk
    pacing = Pacing(schedule, 10.0)
    assert pacing.next_length("warmup", 0) == PROBE_ITERATIONS == 1
    assert pacing.timed("warmup", 1, 0.5) is False  # a probe's pace is an upper bound
    assert pacing.next_length("warmup", 1) == 20  # 20 x 0.5 s
    assert pacing.timed("warmup", 20, 20.0) is True  # 1 s per step: the run prints the projection
    assert pacing.timed("warmup", 10, 10.0) is False  # once
    assert pacing.next_length("warmup", 21) == 10
    assert pacing.next_length("warmup", 95) == 5  # the grid's boundary at 100
    assert pacing.next_length("train", 100) == 1  # training's own probe
    pacing.timed("train", 1, 0.01)
    assert pacing.next_length("train", 101) == 99 and pacing.next_length("train", 200) == 100
    assert Pacing(schedule, 0.0).next_length("train", 0) == 100  # chunk_seconds 0: whole, no probe

    fixed = Pacing(schedule, 10.0, probe=False)
    assert fixed.next_length("warmup", 0) == 100
    assert fixed.timed("warmup", 100, 50.0) is True  # no probe: its first chunk's pace stands
    assert fixed.next_length("train", 100) == 20  # the warm-up's pace says a whole chunk outlasts 10 s
    slow_warmup = Pacing(schedule, 10.0, probe=False)
    slow_warmup.timed("warmup", 100, 5.0)
    assert slow_warmup.next_length("train", 100) == 100


# -- warnings -----------------------------------------------------------------------------------


def test_edge_values_are_warned_in_one_line_each():
    issue = TrainConfig(env="chain", batch_size=100_000, buffer_size=2_000, total_steps=2_000, warmup_steps=1_000)
    lines = edge_warnings(issue, Schedule.of(issue))
    assert len(lines) == 2 and all("\n" not in line for line in lines)
    assert lines[0].startswith("batch_size 100,000 is larger than buffer_size 2,000") and "50 times" in lines[0]
    assert "larger than the warm-up" in lines[1] and "1,000 transitions of the warm-up" in lines[1]
    assert "warmup_steps" in lines[1]
    long = TrainConfig(chunk_steps=5_000, total_steps=3_000, warmup_steps=0)
    (line,) = [w for w in edge_warnings(long, Schedule.of(long)) if "chunk_steps" in w]
    assert line.startswith("chunk_steps 5,000 is longer than total_steps 3,000") and "5,000 env steps" in line


@pytest.mark.parametrize("name", ["chain", "quickstart", "ant_delayed", "ant_delayed_fast", "mw_reach"])
def test_the_shipped_profiles_raise_no_warning(name):
    train = load_profile(name).train
    assert edge_warnings(train, Schedule.of(train)) == []


# -- the state under any split --------------------------------------------------------------------


def _key_data(tree):
    return jax.tree.map(lambda x: jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x, tree)


def test_the_state_is_bit_identical_however_a_chunk_is_split():
    """Two chain members, a 20-iteration training chunk run whole by the program of its fixed trip
    count (a GPU's) and in pieces (ten of 2; 1, 7, 5 and 7) by the one any-length program (a
    CPU's every chunk, a GPU's split ones): the training state after it is equal to the bit (a
    split changes only the metrics' grain), every length is one compile, and nothing crosses to
    the host inside a chunk."""
    base = load_profile("chain")
    config = dataclasses.replace(base, train=dataclasses.replace(
        base.train, num_seeds=2, total_steps=200, warmup_steps=100, chunk_steps=20, batch_size=16, progress=False,
    ))
    built = build(config, donate=False, any_length=False)
    trainer = built.trainer
    warm = built.init_state()
    for _ in range(5):
        warm, _ = trainer.warmup_chunk(warm)

    def after(lengths):
        state = warm
        for length in lengths:
            program = trainer.chunk_program("train", length)
            with jax.transfer_guard("disallow"):  # a split chunk stays on the device too
                state, metrics = program(state)
        return jax.device_get(_key_data(state)), metrics

    whole, metrics = after([20])
    whole = jax.tree.leaves(whole)
    for lengths in ([2] * 10, [1, 7, 5, 7]):
        split, last = after(lengths)
        split = jax.tree.leaves(split)
        assert len(split) == len(whole)
        for a, b in zip(whole, split):
            np.testing.assert_array_equal(a, b, err_msg=str(lengths))
    assert trainer.chunk_program("train", 20) is trainer.train_chunk and trainer.train_chunk.name == "train"
    pieces = trainer.chunk_program("train", 7)
    assert pieces.name == "train/any" and pieces.program._cache_size() == 1
    stats = {chunk.name: program_stats(chunk.lower(warm).compile()) for chunk in (trainer.train_chunk, pieces)}
    loops = {name: (each["data_dependent_loops"], each["conditionals"]) for name, each in stats.items()}
    assert loops == {"train": (0, 0), "train/any": (1, 0)}  # the whole chunk's trip count is known, the pieces' an argument
    assert metrics["visit/x_position"].shape == last["visit/x_position"].shape == (2, 20)  # the first `length` written
    assert np.all(metrics["episodes"] >= last["episodes"])  # the whole chunk's episodes, the last 7 steps'
    with pytest.raises(ValueError, match=r"a chunk holds 1..20 iterations, got 21"):
        trainer.chunk_program("train", 21)


# -- a real SIGTERM ---------------------------------------------------------------------------------


def _command(run_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "train.py", "--profile", "chain", "--seeds", "2", "--train.batch-size", "512",
        "--train.chunk-steps", "500", "--train.warmup-steps", "500", "--train.eval-interval", "1000",
        "--train.checkpoint-interval", "100000",
        "--train.run-dir", str(run_dir), *extra,
    ]


def _leaves(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as stored:
        return {k: stored[k] for k in stored.files if k.startswith("leaf_")}


def _records(path: Path) -> list[dict]:
    return [
        {k: v for k, v in json.loads(line).items() if k not in records.TIMING_KEYS}
        for line in path.read_text().splitlines()
    ]


@pytest.mark.slow
def test_a_sigterm_to_a_run_of_split_chunks_stops_within_the_grace_and_resumes_bit_exactly(tmp_path):
    """A chain run whose 500-step training chunks take over a second (512-transition minibatches)
    with a 0.25 s chunk target runs them split. A SIGTERM once split chunks run ends it within the
    grace plus a few seconds, with exit 75 and a checkpoint between two boundaries of the
    schedule (not on the 500-step grid); resumed, it ends where an uninterrupted run ends,
    with equal final states and evaluations. The signal comes once the training probe has
    measured its pace (the chunks after it are split, none compiles); a 30 s grace covers a
    loaded machine (CI's once took over 10 s for a compile and a chunk) and costs nothing when
    the stop is prompt."""
    grace = 30
    run_dir = tmp_path / "stopped"
    process = subprocess.Popen(
        _command(run_dir, "--train.total-steps", "20000", "--train.chunk-seconds", "0.25", "--train.stop-grace-seconds", str(grace)),
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    lines = []
    for line in process.stderr:  # progress lines (one per chunk run, stderr is not a tty)
        lines.append(line)
        if line.startswith("training pace:"):
            break
    assert any(line.startswith("training pace:") for line in lines), "".join(lines)
    signalled = time.perf_counter()
    process.send_signal(signal.SIGTERM)
    rest = process.stderr.read()
    code = process.wait(timeout=120)
    took = time.perf_counter() - signalled
    assert code == 75, "".join(lines) + rest
    assert took < grace + 5, took
    summary = json.loads((run_dir / "summary.json").read_text())
    stopped_at = summary["env_steps"]
    # (The one-chunk warm-up runs in the training program, so its pace already splits the first
    # training chunk: the stop can come from step 500 on.)
    assert summary["status"] == "interrupted" and 500 < stopped_at < 20_000 and stopped_at % 500, summary
    assert checkpoint.latest(run_dir / "checkpoints").name == f"step_{stopped_at:09d}.npz"
    split = [r["env_steps"] for r in _records(run_dir / "metrics.jsonl") if r["env_steps"] > 500]
    assert split and any(steps % 500 for steps in split)  # chunks between the grid's boundaries

    end = -(-stopped_at // 1_000) * 1_000 + 1_000  # an evaluation boundary past the stop
    resumed = subprocess.run(
        [sys.executable, "train.py", "--resume", str(run_dir), "--train.total-steps", str(end), "--train.progress", "False"],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    reference_dir = tmp_path / "reference"
    reference = subprocess.run(
        _command(reference_dir, "--train.total-steps", str(end), "--train.chunk-seconds", "0", "--train.progress", "False"),
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=600,
    )
    assert reference.returncode == 0, reference.stderr[-3000:]
    a = _leaves(checkpoint.latest(run_dir / "checkpoints"))
    b = _leaves(checkpoint.latest(reference_dir / "checkpoints"))
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    assert _records(run_dir / "eval.jsonl") == _records(reference_dir / "eval.jsonl")


def test_profile_refuses_split_lengths_that_do_not_split_the_measured_chunk(capsys):
    """`profile --split-lengths` takes divisors of the measured chunk only (checked before any
    compile): 3 does not divide 20 vector steps."""
    import train as cli

    code = cli.run(["profile", "--profile", "chain", "--split-lengths", "3", "10"])
    err = capsys.readouterr().err
    assert code == 2, err
    (line,) = [line for line in err.splitlines() if line.startswith("error: ")]
    assert "--split-lengths 3 do not split the measured chunk of 20 vector steps" in line
    assert "choose from 1, 2, 4, 5, 10" in line


def test_a_run_probes_each_program_then_prints_its_pace_and_warns_when_too_big(tmp_path, monkeypatch, capsys):
    """The tiny chain run with chunks bounded (0.5 s): the first warm-up chunk is a probe of one
    vector step; each program's pace past its probe is printed with the time left at it, and a
    run whose training would outlast `LONG_RUN_HOURS` (here set to a moment) is warned about
    before its first training chunk of the grid's length; the rows show the probe's chunk."""
    from mjx_pbac import runner
    from tests.test_runner import _tiny_chain

    monkeypatch.setattr(runner, "LONG_RUN_HOURS", 1e-9)
    config = _tiny_chain(tmp_path / "run", chunk_seconds=0.5, progress=True, total_steps=2_000)
    runner.train(config, profile="chain")
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("[")]
    assert any(line.startswith("ran its first warm-up chunk (1 of the schedule's 1000 vector steps) in ") for line in lines), err
    warmup, training, warning = (
        next(line for line in lines if line.startswith(prefix)) for prefix in ("warm-up pace: ", "training pace: ", "warning: at ")
    )
    assert "s per vector step (2 members x 1 envs); its " in warmup and "vector steps left take about " in training
    assert "this run trains for about" in warning and "docs/recipes.md" in warning
    rows = _records(tmp_path / "run" / "metrics.jsonl")
    assert [row["env_steps"] for row in rows[:2]] == [1, 1] and rows[0]["phase"] == "warmup"  # the probe, both members
    assert rows[-1]["env_steps"] == 2_000
