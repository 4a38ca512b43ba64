"""Whole runs through the runner and the command line: outputs on disk, learning on the chain,
resume after an interrupt or a crash equals the uninterrupted run, divergence stops cleanly,
and bad input gets a clear error."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import itertools
import json
import os
import re
import signal
import struct

import jax
import numpy as np
import pytest

import envs
import train as cli
from mjx_pbac import checkpoint, records, runner
from mjx_pbac.config import RunConfig, load_profile

TIMING = records.TIMING_KEYS


def _tiny_chain(run_dir, **train_overrides) -> RunConfig:
    base = load_profile("chain")
    settings = dict(
        num_seeds=2,  # two members, so resume and divergence are checked across the member axis
        total_steps=4_000,
        warmup_steps=1_000,
        eval_interval=2_000,
        checkpoint_interval=1_000,
        keep_checkpoints=10,
        run_dir=str(run_dir),
        progress=False,
        chunk_seconds=0.0,  # every chunk whole, so rows compare with the reference's however loaded the machine is
    )
    train = dataclasses.replace(base.train, **{**settings, **train_overrides})
    return dataclasses.replace(base, train=train)


def _records(path):
    with open(path) as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return [{k: v for k, v in row.items() if k not in TIMING} for row in rows]


def _tensorboard_scalars(tb_dir):
    """{tag: [steps]} read from the TFRecord event files tensorboardX wrote."""
    from tensorboardX.proto import event_pb2

    found = {}
    for path in tb_dir.iterdir():
        data, i = path.read_bytes(), 0
        while i < len(data):
            (length,) = struct.unpack("<Q", data[i : i + 8])
            event = event_pb2.Event.FromString(data[i + 12 : i + 12 + length])
            i += 12 + length + 4  # length, its crc, the record, its crc
            for value in event.summary.value:
                found.setdefault(value.tag, []).append(event.step)
    return found


def _final_arrays(run_dir):
    path = checkpoint.latest(run_dir / "checkpoints")
    with np.load(path) as data:
        return {name: data[name] for name in data.files if name != "__metadata__"}


def _wrap_train_chunk(monkeypatch, action):
    """Makes runner.build return trainers whose train_chunk calls action(call_number, state, metrics)."""
    original_build = runner.build

    def build(config, donate=True):
        built = original_build(config, donate)
        calls = {"n": 0}

        def train_chunk(state):
            calls["n"] += 1
            state, metrics = built.trainer.train_chunk(state)
            return action(calls["n"], state, metrics)

        return built._replace(trainer=built.trainer._replace(train_chunk=train_chunk))

    monkeypatch.setattr(runner, "build", build)


@pytest.fixture
def reference_run(tiny_chain_run):
    """The uninterrupted 4,000-step, two-seed chain run that resumed runs must reproduce
    (conftest's, shared with test_lifecycle)."""
    return tiny_chain_run


@pytest.mark.slow
def test_run_writes_config_logs_tensorboard_checkpoints_and_summary(reference_run):
    config = json.loads((reference_run / "config.json").read_text())
    assert config["profile"] == "chain" and config["config"]["train"]["total_steps"] == 4_000
    assert config["env_config"]["horizon"] == 100 and config["device"]["platform"] and config["device"]["host"]["cores"] >= 1
    assert [(m["seed"], m["label"]) for m in config["members"]] == [(0, "pbac"), (1, "pbac")]
    metrics = _records(reference_run / "metrics.jsonl")
    assert [(m["env_steps"], m["member"]) for m in metrics] == [(s, i) for s in (1000, 2000, 3000, 4000) for i in (0, 1)]
    assert [m["phase"] for m in metrics] == ["warmup"] * 2 + ["train"] * 6
    assert {"critic_loss", "actor_loss", "alpha", "critic_q_spread", "episode_return"} <= set(metrics[-1])
    evaluations = _records(reference_run / "eval.jsonl")
    assert [(e["env_steps"], e["seed"]) for e in evaluations] == [(s, i) for s in (0, 2000, 4000) for i in (0, 1)]
    assert all(len(e["returns"]) == 4 for e in evaluations)
    assert sorted(p.name for p in (reference_run / "tb").iterdir()) == ["pbac_s0", "pbac_s1"]  # one per member
    scalars = _tensorboard_scalars(reference_run / "tb" / "pbac_s0")
    for tag in ("eval/return_mean", "train/episode_return", "loss/critic_loss", "loss/actor_loss",
                "loss/critic_q_spread", "policy/alpha", "perf/env_steps_per_s", "perf/updates_per_s"):
        assert tag in scalars, (tag, sorted(scalars))
    assert scalars["eval/return_mean"] == [0, 2000, 4000]
    assert scalars["loss/critic_loss"] == [2000, 3000, 4000]  # none during warm-up
    names = [p.name for p in checkpoint.list_checkpoints(reference_run / "checkpoints")]
    assert names == [f"step_{s:09d}.npz" for s in (1000, 2000, 3000, 4000)]
    summary = json.loads((reference_run / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["final_eval"]["env_steps"] == 4000
    # The clocks: every evaluation row carries the wall-clock (everything) and the training time
    # (training chunks only; compiles, evaluations and checkpoints excluded) when its policy existed.
    with open(reference_run / "eval.jsonl") as handle:
        rows = [json.loads(line) for line in handle]
    walls, trains = [row["wall_s"] for row in rows[::2]], [row["train_s"] for row in rows[::2]]
    assert trains[0] == 0.0 and walls[0] > 0 and all(a < b for a, b in itertools.pairwise(walls))
    assert all(a < b for a, b in itertools.pairwise(trains)) and all(t < w for t, w in zip(trains, walls))
    assert [row["wall_s"] for row in rows[1::2]] == walls  # the members of one program share them
    assert summary["train_s"] == pytest.approx(trains[-1]) and summary["elapsed_s"] > walls[-1]
    assert summary["compile_s"] > 0 and summary["train_s"] + summary["compile_s"] < summary["elapsed_s"]
    # Each program's compile (compiled ahead together: tracing and their wall-clock beside them).
    compiles = summary["compiles"]
    assert {"chunk", "evaluate", "tracing", "ahead"} <= set(compiles) and all(v > 0 for v in compiles.values()), compiles
    assert compiles["ahead"] >= compiles["tracing"] and compiles["ahead"] <= summary["compile_s"] + 1e-3, compiles


@pytest.mark.slow
def test_batched_evaluation_logs_what_evaluating_each_point_at_once_logs(tmp_path, reference_run):
    """eval_batch 2 with one checkpoint at the end: the policies at 0 and 2,000 env steps are
    evaluated together when the second is taken, the one at 4,000 alone before the final
    checkpoint; every row as the reference run's (one evaluation per point), clocks aside, each
    row's clocks those of its own point, and the training itself untouched."""
    run_dir = tmp_path / "batched"
    runner.train(_tiny_chain(run_dir, eval_batch=2, checkpoint_interval=4_000), profile="chain")
    assert _records(run_dir / "eval.jsonl") == _records(reference_run / "eval.jsonl")
    assert _records(run_dir / "metrics.jsonl") == _records(reference_run / "metrics.jsonl")
    with open(run_dir / "eval.jsonl") as handle:
        rows = [json.loads(line) for line in handle]
    trains = [row["train_s"] for row in rows[::2]]
    assert trains[0] == 0.0 and all(a < b for a, b in itertools.pairwise(trains))
    final = _final_arrays(run_dir)
    reference = _final_arrays(reference_run)
    for name in reference:
        np.testing.assert_array_equal(final[name], reference[name], err_msg=name)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["final_eval"]["env_steps"] == 4000 and summary["eval_s"] > 0


@pytest.mark.slow
def test_resume_after_interrupt_equals_uninterrupted_run(tmp_path, monkeypatch, reference_run):
    def interrupt_after_second(call, state, metrics):
        if call == 2:
            os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C does: honoured after this chunk
        return state, metrics

    _wrap_train_chunk(monkeypatch, interrupt_after_second)
    run_dir = tmp_path / "interrupted"
    with pytest.raises(runner.RunInterrupted, match="interrupted by SIGINT at 3,000 env steps") as raised:
        runner.train(_tiny_chain(run_dir), profile="chain")
    assert raised.value.exit_code == 75
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted" and "--resume" in summary["message"] and summary["exit_code"] == 75
    assert checkpoint.latest(run_dir / "checkpoints").name == "step_000003000.npz"

    clocks = checkpoint.read_metadata(checkpoint.latest(run_dir / "checkpoints"))
    with open(run_dir / "eval.jsonl") as handle:
        before = [json.loads(line) for line in handle]

    monkeypatch.undo()
    runner.train(None, resume_dir=run_dir)
    assert _records(run_dir / "metrics.jsonl") == _records(reference_run / "metrics.jsonl")
    assert _records(run_dir / "eval.jsonl") == _records(reference_run / "eval.jsonl")
    # Both clocks continue from the checkpoint's: the evaluation after the resume counts the first
    # process's time too (its rows before the checkpoint are kept as they were).
    with open(run_dir / "eval.jsonl") as handle:
        after = [json.loads(line) for line in handle]
    assert [(r["wall_s"], r["train_s"]) for r in after[:4]] == [(r["wall_s"], r["train_s"]) for r in before]
    final = after[-1]
    assert final["env_steps"] == 4000 and final["wall_s"] > clocks["elapsed_s"] > before[-1]["wall_s"]
    assert final["train_s"] > clocks["train_s"] > before[-1]["train_s"]
    resumed, reference = _final_arrays(run_dir), _final_arrays(reference_run)
    assert resumed.keys() == reference.keys()
    for name in reference:
        np.testing.assert_array_equal(resumed[name], reference[name], err_msg=name)


@pytest.mark.slow
def test_resume_after_crash_repeats_nothing_and_loses_nothing(tmp_path, monkeypatch, reference_run):
    def crash_in_third(call, state, metrics):
        if call == 3:
            raise RuntimeError("simulated crash")
        return state, metrics

    _wrap_train_chunk(monkeypatch, crash_in_third)
    run_dir = tmp_path / "crashed"
    config = _tiny_chain(run_dir, checkpoint_interval=2_000)  # the crash loses the 3,000 chunk
    with pytest.raises(runner.RunFailed, match="run failed after 3,000 env steps: RuntimeError: simulated crash"):
        runner.train(config, profile="chain")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["exit_code"], summary["error"]) == ("failed", 1, "RuntimeError: simulated crash")
    assert "simulated crash" in (run_dir / "error.log").read_text()
    assert checkpoint.latest(run_dir / "checkpoints").name == "step_000002000.npz"
    assert [m["env_steps"] for m in _records(run_dir / "metrics.jsonl")] == [1000, 1000, 2000, 2000, 3000, 3000]

    monkeypatch.undo()
    runner.train(None, resume_dir=run_dir)  # cuts the logs back to 2,000 and redoes the rest
    assert _records(run_dir / "metrics.jsonl") == _records(reference_run / "metrics.jsonl")
    assert _records(run_dir / "eval.jsonl") == _records(reference_run / "eval.jsonl")
    resumed, reference = _final_arrays(run_dir), _final_arrays(reference_run)
    for name in reference:
        np.testing.assert_array_equal(resumed[name], reference[name], err_msg=name)


@pytest.mark.slow
def test_nan_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    def poison_second(call, state, metrics):
        if call == 2:
            metrics = dict(metrics, critic_loss=metrics["critic_loss"] * np.nan)
        return state, metrics

    _wrap_train_chunk(monkeypatch, poison_second)
    run_dir = tmp_path / "diverged"
    with pytest.raises(runner.TrainingDiverged, match=r"3,000 env steps: non-finite critic_loss in pbac seed 0, pbac seed 1\..*step_000002000"):
        runner.train(_tiny_chain(run_dir), profile="chain")
    assert checkpoint.latest(run_dir / "checkpoints").name == "step_000002000.npz"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "diverged" and "critic_loss" in summary["message"]
    assert [m["env_steps"] for m in _records(run_dir / "metrics.jsonl")] == [1000, 1000, 2000, 2000]


@pytest.mark.slow
def test_run_directory_is_never_overwritten(reference_run):
    before = (reference_run / "metrics.jsonl").read_text()
    with pytest.raises(runner.RunError, match=r"already exists.*--resume"):
        runner.train(_tiny_chain(reference_run), profile="chain")
    assert (reference_run / "metrics.jsonl").read_text() == before


@pytest.mark.slow
def test_pbac_reaches_the_far_reward_on_the_chain(tmp_path):
    """The chain profile (K=5, 32-wide networks, one env, 1 update per step), seed 0: the greedy
    policy walks to the goal (return ~91) rather than staying at the distractor (return 10)."""
    chain = envs.make("chain")
    config = _tiny_chain(tmp_path / "chain", num_seeds=1, total_steps=12_000, eval_interval=4_000, checkpoint_interval=12_000)
    runner.train(config, profile="chain")
    final = json.loads((tmp_path / "chain" / "summary.json").read_text())["final_eval"]
    assert final["return_mean"] > 0.95 * chain.goal_return() > 8 * chain.distractor_return()


# -- the command line -------------------------------------------------------------------------


def _fails(argv, code=2):
    """The one-line error `train.py argv` prints, checking its exit code."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert cli.run(argv) == code
    text = err.getvalue()
    assert text.startswith("error: ") and "Traceback" not in text, text
    return text


def test_cli_errors_name_what_was_wrong_and_what_is_valid(tmp_path):
    assert "unknown profile 'chian' (did you mean chain?)" in _fails(["--profile", "chian"])
    assert "--profile NAME is required; available:" in _fails(["--train.seed", "1"])
    assert "not a run directory" in _fails(["--resume", str(tmp_path)])
    assert "--train.seed cannot change on resume" in _fails(["--resume", str(tmp_path), "--train.seed", "2"])
    assert "unknown environment 'chainn'" in _fails(["--profile", "chain", "--train.env", "chainn"])
    unknown_key = _fails(["--profile", "chain", "--train.env-overrides", "horizn=5"])
    assert "horizn" in unknown_key and "horizon" in unknown_key  # names the valid keys
    assert "unknown command" in _fails(["trian"])


def test_cli_bad_values_are_refused_before_anything_runs(tmp_path):
    errors = [
        _fails(argv + ["--train.run-dir", str(tmp_path / "x")])
        for argv in (
            ["--profile", "chain", "--train.warmup-steps", "20000"],
            ["--profile", "chain", "--pbac.loss-form", "printed"],
            ["--profile", "chain", "--pbac.bootstrap-rate", "1.5"],
            ["--profile", "chain", "--train.env-overrides", "horizon"],
        )
    ]
    assert "warmup_steps (20000) must be < total_steps (20000)" in errors[0] and "printed" in errors[1]
    assert "bootstrap_rate must lie in [0, 1)" in errors[2] and "malformed override 'horizon'" in errors[3]
    assert not (tmp_path / "x").exists()


def test_cli_help_lists_every_option_with_the_profile_values(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--profile", "chain", "--help"])
    text = capsys.readouterr().out
    for field in dataclasses.fields(RunConfig().train):
        assert "--train." + field.name.replace("_", "-") in text
    for field in dataclasses.fields(RunConfig().pbac):
        assert "--pbac." + field.name.replace("_", "-") in text
    assert "20000" in text.replace(",", "").replace("_", "")  # the chain profile's total_steps


@pytest.mark.slow
def test_profile_command_writes_a_throughput_report(tmp_path, capsys):
    out = tmp_path / "profile.json"
    cli.main(["profile", "--profile", "chain", "--measure-steps", "50", "--timed-chunks", "2", "--out", str(out),
              "--baseline", "step_size=0.5"])
    report = json.loads(out.read_text())
    printed = capsys.readouterr().out
    # Every program's compile, in turn (each timed alone), and their wall-clock, printed and in the report.
    compiled = re.search(r"compile: train (\S+) s, warmup (\S+) s, update (\S+) s, evaluate (\S+) s; all (\S+) s of wall-clock compiled in turn", printed)
    assert compiled, printed
    assert [float(x) for x in compiled.groups()[:4]] == [round(report["compile_s"][n], 1) for n in ("train", "warmup", "update", "evaluate")]
    assert report["compile_wall_s"]["all"] >= sum(report["compile_s"].values()) and report["compile_wall_s"]["threads"] == 1
    assert re.search(r"evaluation: 4 episodes per member, [\d,]+ steps, in \S+ s", printed)
    evaluation, length = report["evaluation"], re.search(r"evaluating 4 episodes of up to ([\d,]+) steps", printed)
    assert evaluation["steps"] == int(length.group(1).replace(",", "")) > 1  # the chain's episodes never end early
    assert evaluation["env_steps"] == 4 * evaluation["steps"]
    assert report["device"]["platform"] == jax.devices()[0].platform
    assert report["measure"] == {"chunk_env_steps": 50, "vector_steps_per_chunk": 50, "updates_per_chunk": 50, "timed_chunks": 2}
    assert set(report["compile_s"]) == {"train", "warmup", "update", "evaluate"}
    train = report["programs"]["train_chunk"]
    if report["any_length"]:  # a CPU's one chunk program, warm-up and training: its own loop and warm-up branch
        assert train["data_dependent_loops"] == train["conditionals"] == 1 and report["compile_s"]["warmup"] == 0.0
        assert train == report["programs"]["warmup_chunk"]
    else:
        assert train["data_dependent_loops"] == 0 and train["conditionals"] == 0
        assert train["executed_ops_per_vector_step"] > report["programs"]["warmup_chunk"]["executed_ops_per_vector_step"]
    phases = report["phases_ms_per_vector_step"]
    assert phases["total"] == pytest.approx(phases["env_step"] + phases["gradient_steps"] + phases["rest"])
    assert phases["env_step"] > 0 and phases["gradient_steps"] > 0
    steady = report["steady_state"]
    assert steady["updates_per_s"] == pytest.approx(steady["env_steps_per_s"])  # 1 update per env step
    # The baseline (another env setting) is measured the same way in the same process.
    assert report["baseline"]["env_overrides"] == ["step_size=0.5"]
    assert set(report["baseline"]["phases_ms_per_vector_step"]) == set(phases)
    assert report["speedup_vs_baseline"]["total"] > 0
    assert len(report["chunk_seconds"]) == 2 and report["memory"]["host_peak_rss_mib"] > 0
    # The training chunk alone (what benchmarks/gpu/latency.sh asks for to save compiles).
    cli.main(["profile", "--profile", "chain", "--measure-steps", "50", "--timed-chunks", "1", "--out", str(out),
              "--phases", "False", "--evaluate", "False", "--seeds", "2"])
    report = json.loads(out.read_text())
    assert set(report["compile_s"]) == {"train"} and set(report["programs"]) == {"train_chunk"}
    assert set(report["phases_ms_per_vector_step"]) == {"total"} and "evaluation" not in report
    assert report["members"] == 2
    # Batched evaluation and programs compiled together, as a run compiles them.
    cli.main(["profile", "--profile", "chain", "--measure-steps", "50", "--timed-chunks", "1", "--out", str(out),
              "--phases", "False", "--train.eval-batch", "3", "--compile-threads", "0"])
    report = json.loads(out.read_text())
    assert set(report["compile_s"]) == {"train", "evaluate", "evaluate_snapshots"} and report["compile_wall_s"]["threads"] == 0
    batched = report["evaluation"]["batched"]
    assert batched["points"] == 3 and batched["seconds_per_point"] == pytest.approx(batched["seconds"] / 3)
    assert "3 points in one program" in capsys.readouterr().out
    # The measured chunk's default size: on a CPU a one-step probe sizes it to end within
    # --train.chunk-seconds (here any step outlasts it: one vector step), the phases too, with
    # nothing compiled for it; each stage is printed as it ends, the throughput before the evaluation.
    cli.main(["profile", "--profile", "chain", "--timed-chunks", "1", "--out", str(out), "--train.chunk-seconds", "1e-6"])
    report, printed = json.loads(out.read_text()), capsys.readouterr().out
    lines = printed.splitlines()
    assert lines[0].startswith("device: ") and lines[1].startswith("chain on ") and lines[2] == "  measured: compiling train, update, evaluate ..."
    throughput = next(i for i, line in enumerate(lines) if " env steps/s, " in line)
    assert throughput < next(i for i, line in enumerate(lines) if line.startswith("  measured: evaluating 4 episodes of "))
    assert lines[-1] == f"wrote {out}" and "  measured: evaluation: 4 episodes per member, " in lines[-2]
    if report["any_length"]:
        num_envs = report["config"]["train"]["num_envs"]
        assert report["sized"]["vector_steps"] == 1 and report["sized"]["probe_seconds_per_vector_step"] > 0
        assert report["measure"] == {"chunk_env_steps": num_envs, "vector_steps_per_chunk": 1, "updates_per_chunk": 1, "timed_chunks": 1}
        assert "timed chunks of 1 vector steps (--train.chunk-seconds 1e-06" in printed
        assert report["steady_state"]["seconds_per_chunk"] == report["chunk_seconds"][0]
        assert report["phases_ms_per_vector_step"]["gradient_steps"] > 0 and report["compile_s"]["warmup"] == 0.0
    else:  # a GPU's fixed-length chunks: the default 20 vector steps
        assert "sized" not in report and report["measure"]["vector_steps_per_chunk"] == 20
