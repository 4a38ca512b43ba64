"""How runs end and what they leave: statuses and exit codes, the run-directory lock, stop
signals, damaged checkpoints and config files, runs that ended before their first checkpoint,
and bad input of every kind as a one-line error (never a traceback)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import train as cli
from mjx_pbac import checkpoint, config as config_module, rundir, runner
from mjx_pbac.report import write_report
from tests.test_checkpoint import _damage
from tests.test_runner import _final_arrays, _records, _tiny_chain, _wrap_train_chunk

ROOT = Path(__file__).resolve().parent.parent


def _cli(argv) -> tuple[int, str]:
    """(exit code, stderr) of `train.py argv` run in this process."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.run(argv)
    return code, err.getvalue()


def _one_line_error(text: str) -> str:
    lines = [line for line in text.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


@pytest.fixture
def finished_run(tiny_chain_run):
    """A finished 4,000-step, two-seed chain run with a checkpoint every 1,000 steps (conftest's,
    shared with test_runner)."""
    return tiny_chain_run


def _copy(run_dir: Path, to: Path) -> Path:
    shutil.copytree(run_dir, to)
    return to


# -- the lock ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_held_run_directory_refuses_a_second_run_and_resume_naming_the_holder(tmp_path, finished_run):
    run_dir = tmp_path / "held"
    run_dir.mkdir()
    with rundir.RunLock(run_dir):
        with pytest.raises(rundir.RunLocked, match=rf"in use by process {os.getpid()} on .*kill -TERM {os.getpid()}"):
            runner.train(_tiny_chain(run_dir), profile="chain")
        assert rundir.is_locked(run_dir)
    assert not (run_dir / "config.json").exists()  # refused before writing anything
    copy = _copy(finished_run, tmp_path / "copy")
    with rundir.RunLock(copy):
        code, err = _cli(["--resume", str(copy)])
    assert code == 4 and "is in use by process" in _one_line_error(err)


def test_a_lock_dies_with_its_process_and_a_killed_run_reads_as_killed(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "summary.json").write_text(json.dumps({"status": "running"}))
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            sys.path.insert(0, {str(ROOT)!r})
            from mjx_pbac.rundir import RunLock
            lock = RunLock({str(run_dir)!r}).acquire()
            print("locked", flush=True)
            time.sleep(120)
        """)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert rundir.is_locked(run_dir) and rundir.read_status(run_dir) == "running"
        with pytest.raises(rundir.RunLocked, match=f"process {holder.pid}"):
            rundir.RunLock(run_dir).acquire()
    finally:
        holder.kill()  # SIGKILL: no clean-up runs
        holder.wait()
    assert not rundir.is_locked(run_dir) and rundir.read_status(run_dir) == "killed"
    lock = rundir.RunLock(run_dir).acquire()  # the stale holder does not block
    assert lock.previous["pid"] == holder.pid
    lock.release()


@pytest.mark.slow
def test_two_runs_started_at_once_in_one_directory_one_is_refused(tmp_path):
    run_dir = tmp_path / "race"
    command = [sys.executable, "train.py", "--profile", "chain", "--train.total-steps", "2000",
               "--train.warmup-steps", "1000", "--train.run-dir", str(run_dir), "--train.progress", "False",
               "--train.chunk-seconds", "0"]  # whole chunks: one row each
    processes = [subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(timeout=600), p.stderr.read()) for p in processes]
    codes = sorted(code for code, _ in results)
    assert codes[0] == 0 and codes[1] in (2, 4), results  # 4: in use; 2: it came after, not empty
    loser = next(err for code, err in results if code != 0)
    # The loser names the holder (it waits up to 1 s for the holder's record, written just after
    # the lock is taken), or came after the winner had started.
    assert "in use by process" in loser or "already exists and is not empty" in loser, loser
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "finished"
    assert len(_records(run_dir / "metrics.jsonl")) == 2  # one run's records, not two interleaved


# -- statuses and exit codes --------------------------------------------------------------------


def _terminate_in_second_chunk(call, state, metrics):
    """A SIGTERM to this process (what a cluster sends before pre-emption) during the second
    training chunk (for `_wrap_train_chunk`)."""
    if call == 2:
        os.kill(os.getpid(), signal.SIGTERM)
    return state, metrics


def _chain_args(run_dir: Path, *extra: str) -> list[str]:
    """`train.py` arguments of a two-seed chain run with a 1,000-step warm-up and no checkpoint
    on the schedule's grid before 20,000 steps (a stop's checkpoint is the only one), its chunks
    whole (so that every training chunk is the one `_wrap_train_chunk` wraps), plus `extra`."""
    return ["--profile", "chain", "--train.run-dir", str(run_dir), "--seeds", "2", "--train.warmup-steps", "1000",
            "--train.checkpoint-interval", "20000", "--train.progress", "False", "--train.chunk-seconds", "0", *extra]


@pytest.mark.slow
def test_sigterm_checkpoints_after_the_chunk_and_exits_75(tmp_path, monkeypatch, finished_run):
    _wrap_train_chunk(monkeypatch, _terminate_in_second_chunk)
    run_dir = tmp_path / "terminated"
    code, err = _cli(_chain_args(run_dir, "--train.total-steps", "4000", "--train.eval-interval", "2000", "--train.keep-checkpoints", "10"))
    assert code == 75, err
    (line,) = [line for line in err.splitlines() if line.startswith("stopped: ")]
    assert "interrupted by SIGTERM at 3,000 env steps; checkpoint step_000003000.npz saved" in line and "error" not in err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["exit_code"], summary["env_steps"]) == ("interrupted", 75, 3000)
    assert checkpoint.latest(run_dir / "checkpoints").name == "step_000003000.npz"  # not on the 20,000 grid
    monkeypatch.undo()
    assert _cli(["--resume", str(run_dir)])[0] == 0
    assert _records(run_dir / "metrics.jsonl") == _records(finished_run / "metrics.jsonl")
    resumed, reference = _final_arrays(run_dir), _final_arrays(finished_run)
    for name in reference:
        np.testing.assert_array_equal(resumed[name], reference[name], err_msg=name)


@pytest.mark.slow
def test_a_stop_checkpoints_first_and_then_evaluates_the_kept_policies(tmp_path, monkeypatch):
    """With evaluations batched (eval_batch 3), the policies kept at 1,000 and 2,000 env steps
    are still unevaluated when a SIGTERM stops the run at 3,000: the stop writes its checkpoint
    and then evaluates them, so eval.jsonl holds them (the one due at 3,000 is left to the
    resumed run)."""
    _wrap_train_chunk(monkeypatch, _terminate_in_second_chunk)
    run_dir = tmp_path / "batched"
    code, err = _cli(_chain_args(run_dir, "--train.total-steps", "6000", "--train.eval-interval", "1000", "--train.eval-batch", "3"))
    assert code == 75, err
    assert "stopped at once" not in err and checkpoint.latest(run_dir / "checkpoints").name == "step_000003000.npz"
    evaluated = sorted({row["env_steps"] for row in _records(run_dir / "eval.jsonl")})
    assert evaluated == [0, 1000, 2000], evaluated


def _stuck_run(run_dir: Path, first_sleep: float, then_sleep: float, *flags: str) -> subprocess.Popen:
    """A chain run in a child process whose training chunks are replaced: the first sleeps
    `first_sleep` s (then trains), every later one prints "in chunk" and sleeps `then_sleep` s.
    Chunks are never split (chunk_seconds 0), so every training chunk is the replaced one."""
    script = textwrap.dedent(f"""
        import dataclasses, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from mjx_pbac import runner
        from tests.test_runner import _tiny_chain
        real = runner.build
        def build(config, donate=True):
            built = real(config, donate)
            calls = []
            def train_chunk(state):
                calls.append(1)
                if len(calls) == 1:
                    time.sleep({first_sleep})
                    return built.trainer.train_chunk(state)
                print("in chunk", flush=True)
                time.sleep({then_sleep})
            return built._replace(trainer=built.trainer._replace(train_chunk=train_chunk))
        runner.build = build
        config = _tiny_chain({str(run_dir)!r})
        config = dataclasses.replace(config, train=dataclasses.replace(config.train, chunk_seconds=0.0, {", ".join(flags)}))
        runner.train(config, profile="chain")
    """)
    return subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_second_signal_5_s_later_stops_at_once_and_the_run_resumes_bit_exactly(tmp_path, finished_run, signum):
    """The first training chunk took 3 s; the second hangs (a 300 s sleep). A SIGTERM (or a
    Ctrl-C's SIGINT) a second into it is within the grace (about 2 s left): it asks for a stop
    after the chunk. The same signal 5 s later, a separate request, ends the process at once with
    128 + signal and status interrupted, keeping the newest checkpoint; resumed with the real
    chunk, the run ends with the uninterrupted run's arrays, bit for bit."""
    run_dir = tmp_path / "stuck"
    process = _stuck_run(run_dir, 3.0, 300.0, "stop_grace_seconds=20.0")
    assert process.stdout.readline().strip() == "in chunk", process.communicate()
    time.sleep(1.0)
    process.send_signal(signum)
    time.sleep(5.0)
    assert process.poll() is None  # the first only asks (the chunk's end was expected within the grace)
    process.send_signal(signum)
    code = process.wait(timeout=30)
    err = process.stderr.read()
    name = signal.Signals(signum).name
    assert code == 128 + signum, err
    assert f"{name} received: stopping with a checkpoint after the current chunk" in err and "Traceback" not in err, err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["exit_code"] == 128 + signum
    assert f"stopped at once by a second {name} after 2,000 env steps" in summary["message"]
    assert "checkpoint step_000002000.npz is kept" in summary["message"]
    assert not rundir.is_locked(run_dir) and rundir.read_status(run_dir) == "interrupted"
    assert _cli(["--resume", str(run_dir)])[0] == 0
    resumed, reference = _final_arrays(run_dir), _final_arrays(finished_run)
    for name in reference:
        np.testing.assert_array_equal(resumed[name], reference[name], err_msg=name)


@pytest.mark.slow
def test_a_sigterm_during_a_chunk_that_outlasts_the_grace_stops_at_once(tmp_path):
    """The first training chunk took 6 s, so the second is expected to take as long; a SIGTERM
    a second into it, with a grace of 2 s, cannot wait for it: the run stops at once (143), says
    why and what was lost, and keeps its newest checkpoint, from which it resumes."""
    run_dir = tmp_path / "graceless"
    process = _stuck_run(run_dir, 6.0, 300.0, "stop_grace_seconds=2.0")
    assert process.stdout.readline().strip() == "in chunk", process.communicate()
    time.sleep(1.0)
    signalled = time.perf_counter()
    process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=60)
    # Far short of the hung chunk's 300 s; the bound leaves a loaded CI machine time to exit
    assert time.perf_counter() - signalled < 30.0
    assert code == 128 + signal.SIGTERM, process.stderr.read()
    message = json.loads((run_dir / "summary.json").read_text())["message"]
    assert "stopped at once by SIGTERM after 2,000 env steps: it came while running a chunk" in message
    assert "beyond the 2 s grace (--train.stop-grace-seconds)" in message
    assert "the chunk in progress was lost (checkpoint step_000002000.npz is kept)" in message
    assert checkpoint.latest(run_dir / "checkpoints").name == "step_000002000.npz"
    assert not rundir.is_locked(run_dir)


@pytest.mark.slow
def test_a_sigterm_during_a_first_chunk_waits_the_grace_then_stops_at_once(tmp_path):
    """The first training chunk, whose length no one knows yet, hangs (a 300 s sleep). A SIGTERM
    during it waits for it up to the grace (3 s), which runs out: the run stops at once (143)
    about 3 s after the signal, says so and which checkpoint a resume starts from."""
    run_dir = tmp_path / "first"
    process = _stuck_run(run_dir, 300.0, 300.0, "stop_grace_seconds=3.0")
    deadline = time.monotonic() + 300
    while not (run_dir / "checkpoints" / "step_000001000.npz").exists():  # the warm-up is done: the hang is next
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.2)
    time.sleep(1.0)
    signalled = time.perf_counter()
    process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=60)
    took = time.perf_counter() - signalled
    err = process.stderr.read()
    assert code == 128 + signal.SIGTERM and 3.0 <= took < 30.0, (code, took, err)  # the grace, not the 300 s hang
    assert "its end is not known yet: waiting for it up to the 3 s grace" in err, err
    message = json.loads((run_dir / "summary.json").read_text())["message"]
    assert "stopped at once by SIGTERM after 1,000 env steps: the chunk it came during did not end within the 3 s grace" in message
    assert "the chunk in progress was lost (checkpoint step_000001000.npz is kept)" in message
    assert "which starts from step_000001000.npz" in message and "Traceback" not in err
    assert not rundir.is_locked(run_dir) and rundir.read_status(run_dir) == "interrupted"


@pytest.mark.slow
def test_an_error_during_training_is_recorded_as_failed_and_reported(tmp_path, monkeypatch, finished_run):
    def out_of_memory(call, state, metrics):
        if call == 2:
            raise MemoryError("planted: out of memory")
        return state, metrics

    _wrap_train_chunk(monkeypatch, out_of_memory)
    run_dir = tmp_path / "failed"
    code, err = _cli(["--profile", "chain", "--train.run-dir", str(run_dir), "--train.total-steps", "4000",
                      "--train.warmup-steps", "1000", "--train.checkpoint-interval", "1000", "--train.progress", "False",
                      "--train.chunk-seconds", "0"])
    line = _one_line_error(err)
    assert code == 1 and "run failed after 2,000 env steps: MemoryError: planted: out of memory" in line
    assert "newest checkpoint step_000002000.npz" in line and "--resume" in line
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["exit_code"], summary["error"]) == ("failed", 1, "MemoryError: planted: out of memory")
    assert "Traceback" in (run_dir / "error.log").read_text()
    written = write_report([str(run_dir)], tmp_path / "report")
    markdown = Path(written["markdown"]).read_text()
    assert "†" in markdown and f"{run_dir} is failed, not finished" in markdown


@pytest.mark.slow
def test_the_exit_code_says_how_a_run_ended(tmp_path, monkeypatch):
    def poison(call, state, metrics):
        return state, dict(metrics, critic_loss=metrics["critic_loss"] * np.nan)

    base = ["--profile", "chain", "--train.total-steps", "2000", "--train.warmup-steps", "1000", "--train.progress", "False",
            "--train.chunk-seconds", "0"]
    assert _cli(base + ["--train.run-dir", str(tmp_path / "ok")])[0] == 0
    _wrap_train_chunk(monkeypatch, poison)
    code, err = _cli(base + ["--train.run-dir", str(tmp_path / "nan")])
    assert code == 3 and "training diverged" in _one_line_error(err)
    assert json.loads((tmp_path / "nan" / "summary.json").read_text())["exit_code"] == 3


# -- resume: damaged checkpoints, damaged or edited config --------------------------------------


@pytest.mark.slow
def test_resume_past_a_damaged_checkpoint_reproduces_the_uninterrupted_run(tmp_path, finished_run):
    run_dir = _copy(finished_run, tmp_path / "damaged")
    _damage(run_dir / "checkpoints" / "step_000004000.npz", "truncated")
    code, err = _cli(["--resume", str(run_dir)])
    assert code == 0, err
    assert "warning: cannot read checkpoint" in err and "resuming" in err and "step_000003000.npz" in err
    assert _records(run_dir / "metrics.jsonl") == _records(finished_run / "metrics.jsonl")
    resumed, reference = _final_arrays(run_dir), _final_arrays(finished_run)
    for name in reference:
        np.testing.assert_array_equal(resumed[name], reference[name], err_msg=name)
    assert (run_dir / "checkpoints" / "step_000004000.npz.damaged").is_file()


@pytest.mark.parametrize("damage, message", [
    (lambda text: text[: len(text) // 2], "is damaged"),
    (lambda text: "", "is damaged"),
    (lambda text: json.dumps({"profile": "chain"}), "has no config record"),
    (lambda text: text.replace('"algo": "pbac"', '"algo": "ppo"'), "holds an invalid config"),
    (lambda text: text.replace('"num_critics": 5', '"num_critics": "five"'), "holds an invalid config"),
    (lambda text: text.replace('"total_steps": 4000', '"total_steps": 8000'), "was edited since the run started"),
])
@pytest.mark.slow
def test_resume_refuses_a_damaged_or_edited_config_in_one_line(tmp_path, finished_run, damage, message):
    run_dir = _copy(finished_run, tmp_path / "edited")
    path = run_dir / "config.json"
    edited = damage(path.read_text())
    assert edited != path.read_text()
    path.write_text(edited)
    before = (run_dir / "summary.json").read_text()
    code, err = _cli(["--resume", str(run_dir)])
    assert code == 2 and message in _one_line_error(err)
    assert (run_dir / "summary.json").read_text() == before  # a refusal changes nothing


@pytest.mark.slow
def test_more_steps_on_resume_only_through_the_option_and_recorded(tmp_path, finished_run):
    run_dir = _copy(finished_run, tmp_path / "longer")
    code, err = _cli(["--resume", str(run_dir), "--train.total-steps", "5000", "--train.progress", "False"])
    assert code == 0, err
    record = json.loads((run_dir / "config.json").read_text())
    assert record["config"]["train"]["total_steps"] == 5000 and record["effective_steps"]["total_steps"] == 5000
    assert record["changes"][0]["at_env_steps"] == 4000 and record["changes"][0]["train.total_steps"] == [4000, 5000]
    assert record["config_sha256"] == rundir.config_digest(record["config"])
    assert [m["env_steps"] for m in _records(run_dir / "metrics.jsonl")][-2:] == [5000, 5000]
    assert json.loads((run_dir / "summary.json").read_text())["final_eval"]["env_steps"] == 5000
    code, err = _cli(["--resume", str(run_dir), "--train.total-steps", "3000"])
    assert code == 2 and "is at 5,000 env steps, beyond this run's 3,000" in _one_line_error(err)
    code, err = _cli(["--resume", str(run_dir), "--train.batch-size", "64"])
    assert code == 2 and "--train.batch-size cannot change on resume (changeable: --train.total-steps" in _one_line_error(err)


@pytest.mark.slow
def test_a_run_directory_from_before_the_recipe_options_resumes_as_it_was(tmp_path, finished_run):
    """config.json without the options added since (normalize_observations, weight_decay,
    layer_norm) and format-2 checkpoints (no leaf paths, no gamma or weight-decay leaves): the
    run resumes with the options off and continues as the uninterrupted run does."""
    from tests.test_checkpoint import _as_format_2

    run_dir = _copy(finished_run, tmp_path / "older")
    record = json.loads((run_dir / "config.json").read_text())
    for section, names in (("train", ("normalize_observations",)), *((algo, ("weight_decay", "layer_norm")) for algo in ("pbac", "sac", "bootdqn_p", "ben", "td3"))):
        for name in names:
            del record["config"][section][name]
    record["config_sha256"] = rundir.config_digest(record["config"])
    (run_dir / "config.json").write_text(json.dumps(record))
    for path in checkpoint.list_checkpoints(run_dir / "checkpoints"):
        _as_format_2(path)
        with np.load(path) as data:
            metadata = json.loads(bytes(data["__metadata__"]).decode())
        assert metadata["format"] == 2
    code, err = _cli(["--resume", str(run_dir), "--train.total-steps", "5000", "--train.progress", "False"])
    assert code == 0, err
    assert "resuming" in err and "step_000004000.npz" in err
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "finished"
    assert checkpoint.read_metadata(checkpoint.latest(run_dir / "checkpoints"))["format"] == checkpoint.FORMAT


@pytest.mark.slow
def test_a_run_directory_written_before_the_module_split_resumes_bit_exactly(tmp_path, finished_run):
    """tests/data/run_dir_f1ba88c.tgz: `finished_run`'s config trained by commit f1ba88c (before the
    run directory, the assembly, evaluation and stop handling left runner.py) to 4,000 env steps,
    its 2,000-step checkpoint alone kept, and the eval rows that run wrote. Resumed by this code,
    it trains the last 2,000 steps again, bit for bit as a directory this code wrote does from the
    same checkpoint (`finished_run` with that checkpoint in place of its own): the same eval rows
    and the same final state. Against f1ba88c's own rows: its rows up to the checkpoint are kept as
    written; the retrained ones equal f1ba88c's where this machine computes as the one that made
    the file did (this code's uninterrupted run gives the recorded rows), and otherwise are within
    1e-3 (XLA's CPU code differs between processors: on an AVX-512 EPYC the retrained returns
    differ from the recorded ones by 4e-5 to 1.4e-4 relative)."""
    import tarfile

    with tarfile.open(ROOT / "tests" / "data" / "run_dir_f1ba88c.tgz") as bundle:
        bundle.extractall(tmp_path, filter="data")
    run_dir = tmp_path / "run"
    same_state = _copy(finished_run, tmp_path / "same_state")
    for path in (same_state / "checkpoints").iterdir():
        path.unlink()
    shutil.copy(run_dir / "checkpoints" / "step_000002000.npz", same_state / "checkpoints")
    for directory in (run_dir, same_state):
        code, err = _cli(["--resume", str(directory), "--train.progress", "False"])
        assert code == 0, err
        assert "resuming" in err and "step_000002000.npz (2,000 env steps" in err, err
    rows, reference = _records(run_dir / "eval.jsonl"), _records(tmp_path / "reference_eval.jsonl")
    retrained = [row for row in rows if row["env_steps"] > 2000]
    assert retrained == [row for row in _records(same_state / "eval.jsonl") if row["env_steps"] > 2000] and retrained
    resumed, same = _final_arrays(run_dir), _final_arrays(same_state)
    assert resumed.keys() == same.keys()
    for name in resumed:
        np.testing.assert_array_equal(resumed[name], same[name], err_msg=name)
    assert [row for row in rows if row["env_steps"] <= 2000] == [row for row in reference if row["env_steps"] <= 2000]
    if _records(finished_run / "eval.jsonl") == reference:  # this machine computes as f1ba88c's did
        assert rows == reference
    else:
        recorded = [row for row in reference if row["env_steps"] > 2000]
        assert [(r["env_steps"], r["member"]) for r in retrained] == [(r["env_steps"], r["member"]) for r in recorded]
        np.testing.assert_allclose([r["returns"] for r in retrained], [r["returns"] for r in recorded], rtol=1e-3)


@pytest.mark.slow
def test_a_checkpoint_of_other_settings_is_refused_on_resume(tmp_path, finished_run):
    run_dir = _copy(finished_run, tmp_path / "swapped")
    for name in ("config.json",):
        record = json.loads((run_dir / name).read_text())
        record["config"]["pbac"]["bootstrap_rate"] = 0.5  # a valid config with its own digest
        record["config_sha256"] = rundir.config_digest(record["config"])
        (run_dir / name).write_text(json.dumps(record))
    code, err = _cli(["--resume", str(run_dir)])
    assert code == 2 and "was written with other settings than" in _one_line_error(err) and "pbac.bootstrap_rate" in err


@pytest.mark.slow
def test_a_run_that_failed_before_its_first_checkpoint_starts_again_on_resume(tmp_path, monkeypatch, finished_run):
    def fail_at_once(call, state, metrics):
        raise RuntimeError("planted: failed in set-up")

    _wrap_train_chunk(monkeypatch, fail_at_once)
    run_dir = tmp_path / "early"
    with pytest.raises(runner.RunFailed):
        runner.train(_tiny_chain(run_dir, total_steps=2_000, checkpoint_interval=2_000), profile="chain")
    assert not checkpoint.list_checkpoints(run_dir / "checkpoints")
    code, err = _cli(["--profile", "chain", "--train.run-dir", str(run_dir)])
    assert code == 2 and "already exists and is not empty; continue it with `python train.py --resume" in err
    monkeypatch.undo()
    code, err = _cli(["--resume", str(run_dir)])
    assert code == 0, err
    assert "no usable checkpoint" in err and "again from step 0" in err and "attempts/1" in err
    assert (run_dir / "attempts" / "1" / "summary.json").is_file()
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "finished"


# -- bad input: one line, an exit code, nothing written ------------------------------------------


def test_profiles_only_by_name_and_files_only_through_profile_file(tmp_path, monkeypatch):
    for name in ("../profiles/chain", str(ROOT / "profiles" / "chain"), "chain/../chain"):
        code, err = _cli(["--profile", name])
        assert code == 2 and "--profile-file" in _one_line_error(err), name
    code, err = _cli(["--profile-file", str(tmp_path / "missing.toml")])
    assert code == 2 and "missing.toml" in _one_line_error(err)
    custom = tmp_path / "my chain.toml"
    custom.write_text((ROOT / "profiles" / "chain.toml").read_text())
    monkeypatch.chdir(tmp_path)
    code, err = _cli(["--profile-file", str(custom), "--train.total-steps", "2000", "--train.warmup-steps", "1000", "--train.progress", "False"])
    assert code == 0, err
    (run_dir,) = (tmp_path / "runs").iterdir()  # under runs/, named after the file
    assert run_dir.name.startswith("file-my_chain-chain-s0-")
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "finished"


def test_a_broken_profile_is_listed_as_broken_not_fatal(tmp_path, monkeypatch, capsys):
    for name in ("chain.toml", "quickstart.toml"):
        shutil.copy(ROOT / "profiles" / name, tmp_path / name)
    (tmp_path / "broken.toml").write_text("[train\ntotal_steps = 1")
    (tmp_path / "invalid.toml").write_text("[train]\ntotal_steps = -5\n")
    monkeypatch.setattr(config_module, "PROFILES_DIR", tmp_path)
    assert cli.run(["--list-profiles"]) == 0
    out = capsys.readouterr().out
    assert "chain " in out and "quickstart " in out
    assert "broken " in out and "BROKEN:" in out.split("broken ")[1].splitlines()[0]
    assert "BROKEN:" in out.split("invalid ")[1].splitlines()[0] and "total_steps" in out.split("invalid ")[1].splitlines()[0]


@pytest.mark.parametrize("make, message", [
    (lambda tmp: (tmp / "file").write_text("x") and tmp / "file", "is an existing file, not a directory"),
    (lambda tmp: Path("/dev/null"), "is an existing file, not a directory"),
    (lambda tmp: (tmp / "file").write_text("x") and tmp / "file" / "run", "Not a directory"),
    (lambda tmp: tmp / ("x" * 300), "File name too long"),
])
def test_os_errors_on_the_run_directory_are_one_line(tmp_path, make, message):
    run_dir = make(tmp_path)
    code, err = _cli(["--profile", "chain", "--train.run-dir", str(run_dir)])
    assert code == 2 and message in _one_line_error(err)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_parent_is_one_line(tmp_path):
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    code, err = _cli(["--profile", "chain", "--train.run-dir", str(parent / "run")])
    assert code == 2 and "Permission denied" in _one_line_error(err)


@pytest.mark.slow
def test_report_out_an_existing_file_and_resume_of_a_file_are_one_line(tmp_path, finished_run):
    (tmp_path / "file").write_text("x")
    code, err = _cli(["report", str(finished_run), "--out", str(tmp_path / "file")])
    assert code != 0 and "file" in _one_line_error(err)
    code, err = _cli(["--resume", str(tmp_path / "file")])
    assert code == 2 and "is a file, not a run directory" in _one_line_error(err)
    code, err = _cli(["--resume", str(tmp_path / "nowhere")])
    assert code == 2 and "no run directory" in _one_line_error(err)


@pytest.mark.parametrize("args, message", [
    (["--sweep", "bootstrap_rate=0.1,0.1"], "0.1 twice"),
    (["--pbac.critic-lr", "inf"], "critic_lr"),
    (["--pbac.prior-variance", "inf"], "prior_variance"),
    (["--pbac.init-log-alpha", "nan"], "init_log_alpha"),
    (["--sweep", "critic_lr=1e999"], "critic_lr"),
    (["--train.seed", str(2**31)], "seed"),
    (["--train.seed", str(2**31 - 1), "--seeds", "2"], "seed"),
    (["--train.buffer-size", str(2**30), "--seeds", "1000"], "needs about"),
    (["--train.buffer-size", str(2**31 - 1)], "replay"),
    (["--seeds", "1000000"], "needs about"),
    (["--train.eval-episodes", str(10**9)], "needs about"),
    (["--pbac.hidden-sizes", "100000", "100000"], "needs about"),
    (["--train.env-overrides", "horizon=2000000"], "a run accepts at most 1,000,000"),
])
def test_out_of_range_and_non_finite_values_are_refused_before_anything_is_written(tmp_path, args, message):
    run_dir = tmp_path / "run"
    code, err = _cli(["--profile", "chain", "--train.run-dir", str(run_dir), *args])
    assert code == 2 and message in _one_line_error(err)
    assert not run_dir.exists()


@pytest.mark.slow
def test_a_full_disk_fails_the_run_cleanly_and_keeps_the_earlier_checkpoints(tmp_path, monkeypatch):
    import errno

    real_save = checkpoint.save

    def save(directory, state, env_steps, metadata, keep=2):
        if env_steps >= 2000:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(directory))
        return real_save(directory, state, env_steps, metadata, keep)

    monkeypatch.setattr(checkpoint, "save", save)
    run_dir = tmp_path / "full"
    code, err = _cli(["--profile", "chain", "--train.run-dir", str(run_dir), "--train.total-steps", "3000",
                      "--train.warmup-steps", "1000", "--train.checkpoint-interval", "1000", "--train.progress", "False",
                      "--train.chunk-seconds", "0"])
    assert code == 1 and "OSError: [Errno 28] No space left on device" in _one_line_error(err)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["checkpoints"] == ["step_000001000.npz"]
    monkeypatch.undo()
    assert _cli(["--resume", str(run_dir)])[0] == 0  # space freed: it continues from 1,000


def test_a_run_whose_checkpoints_cannot_fit_on_the_disk_is_refused(tmp_path, monkeypatch):
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda path: real(path)._replace(free=1000))
    code, err = _cli(["--profile", "chain", "--train.run-dir", str(tmp_path / "run")])
    assert code == 2 and "the checkpoints of this run need about" in _one_line_error(err) and "GiB free" in err
    assert not (tmp_path / "run").exists()  # refused before anything was made


@pytest.mark.parametrize("argv, message", [
    (["profile", "--profile", "chain", "--seeds", "1000000"], "needs about"),
    (["bench-seeds", "--profile", "chain", "--seed-counts", "1", "1000000"], "needs about"),
    (["report", "/nonexistent-run"], "not run directories: /nonexistent-run has no config.json; /nonexistent-run has no eval.jsonl"),
])
def test_measurements_and_reports_refuse_in_one_line(tmp_path, argv, message):
    code, err = _cli([*argv, "--out", str(tmp_path / "out")])
    assert code == 2 and message in _one_line_error(err)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("timed", [False, True])
def test_a_stop_says_when_the_checkpoint_it_will_write_is_not_timed_yet(tmp_path, timed):
    """A first SIGTERM during a timed chunk promises a stop with a checkpoint in about the chunk's
    rest plus a checkpoint's write; before this process has written one, that write is unknown and
    the promise says so (on the H200 three runs said "about 10 s" and their 2.6 GB checkpoints
    outran the 20 s grace: docs/evidence/h200-20261129.md)."""
    from mjx_pbac.lifecycle import Stopping

    said = []
    stopping = Stopping(tmp_path, grace=60.0, say=said.append, newest=lambda: "none", record=lambda message, code: None)
    if timed:
        stopping.save_seconds = 3.0
    stopping.doing("running a chunk", 5.0)
    try:
        assert stopping.on_first_signal(signal.SIGTERM) is False  # stops after the chunk, not at once
    finally:
        stopping.stopped.set()  # the grace's timer then finds the run stopped and does nothing
    assert len(said) == 1 and said[0].startswith("SIGTERM received: stopping with a checkpoint after the current chunk (in about ")
    assert ("in about 8 s, within" if timed else "s plus a checkpoint's write, not timed yet, within the 60 s grace") in said[0], said
