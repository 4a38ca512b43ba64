"""Stops sent the way real tools send them (docs/preemption.md "What each tool sends"): GNU
`timeout`, a shell that runs the job in the background and is signalled as a process group,
Ctrl-C's SIGINT, and a signal while the run compiles. Each run is `train.py` in a process of its
own; each test asserts the exit code, the status, the checkpoint at the step the run stopped,
that nothing beyond the chunk in progress was lost, and that the run resumes bit for bit: its
checkpoint equals an uninterrupted run's at that step, and resumed to the next evaluation it
ends with that run's arrays and evaluations there.

The same request sent twice at once (as `timeout` and a group signal do) counts once; a signal
repeated later stops at once (tests/test_lifecycle.py, with a chunk made to hang)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from mjx_pbac import checkpoint, lifecycle, records, rundir

ROOT = Path(__file__).resolve().parent.parent

CHAIN = [
    "--profile", "chain", "--seeds", "2", "--train.warmup-steps", "1000", "--train.eval-interval", "2000",
    "--train.keep-checkpoints", "100", "--train.chunk-seconds", "0",
]
"""The chain probe with two members: whole 1,000-step chunks of about a second on a 2-core CPU
(no one-step probe, so a stop lands on the grid)."""


def _train(*args: str) -> list[str]:
    return [sys.executable, "train.py", *CHAIN, *args]


class _Lines:
    """A child's stderr read line by line on a thread, so a test can wait for a line with a
    timeout (and read everything said once the child is gone)."""

    def __init__(self, stream):
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, text: str, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                raise AssertionError(f"the run ended before saying {text!r}:\n" + "".join(self.lines))
            self.lines.append(line)
            if text in line:
                return
        raise AssertionError(f"no {text!r} within {timeout:.0f} s:\n" + "".join(self.lines))

    def rest(self, timeout: float = 120.0) -> str:
        self._thread.join(timeout)
        while not self._queue.empty():
            line = self._queue.get()
            if line is not None:
                self.lines.append(line)
        return "".join(self.lines)


def _start(command: list[str]) -> tuple[subprocess.Popen, _Lines]:
    """Starts `command` in a session (and process group) of its own, so a group signal reaches it
    and its children only."""
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    return process, _Lines(process.stderr)


def _leaves(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as stored:
        return {k: stored[k] for k in stored.files if k.startswith("leaf_")}


def _rows(path: Path, upto: int) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{k: v for k, v in row.items() if k not in records.TIMING_KEYS} for row in rows if row["env_steps"] <= upto]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run of the same settings with a checkpoint every 1,000 env steps,
    continued (`--resume --train.total-steps`) as far as a test needs: `reach(steps)` returns its
    run directory holding the checkpoint at `steps`."""
    run_dir = tmp_path_factory.mktemp("signals") / "reference"
    reached = [0]

    def reach(steps: int) -> Path:
        if steps > reached[0]:
            total = max(-(-steps // 2_000) * 2_000, 8_000)  # on the evaluation grid: its final evaluation is one of the grid's
            start = ["--resume", str(run_dir)] if reached[0] else [*CHAIN, "--train.run-dir", str(run_dir)]
            done = subprocess.run(
                [sys.executable, "train.py", *start, "--train.total-steps", str(total), "--train.checkpoint-interval", "1000",
                 "--train.progress", "False"],
                cwd=ROOT, capture_output=True, text=True, check=False, timeout=900,
            )
            assert done.returncode == 0, done.stderr[-3000:]
            reached[0] = total
        return run_dir

    return reach


def _assert_stopped_whole_and_resumes_bit_exactly(run_dir: Path, said: str, reference, exit_code: int = 75) -> int:
    """The run stopped with status interrupted and `exit_code`, no traceback, its lock released;
    its newest checkpoint is at the step it stopped, after the last chunk it logged (nothing but
    the chunk in progress lost), equal to the uninterrupted run's there; resumed to the next
    evaluation it ends with that run's arrays and evaluations. Returns the step it stopped at."""
    assert "Traceback" not in said, said
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["exit_code"]) == ("interrupted", exit_code), summary
    assert not rundir.is_locked(run_dir) and rundir.read_status(run_dir) == "interrupted"
    stopped = summary["env_steps"]
    newest = checkpoint.latest(run_dir / "checkpoints")
    assert stopped > 0 and newest.name == f"step_{stopped:09d}.npz", (stopped, newest)
    logged = max(row["env_steps"] for row in _rows(run_dir / "metrics.jsonl", upto=10**12))
    assert logged == stopped, (logged, stopped)
    reference_dir = reference(stopped)
    ours, theirs = _leaves(newest), _leaves(reference_dir / "checkpoints" / newest.name)
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)

    end = (stopped // 2_000 + 1) * 2_000  # the next evaluation
    resumed = subprocess.run(
        [sys.executable, "train.py", "--resume", str(run_dir), "--train.total-steps", str(end), "--train.progress", "False"],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    reference_dir = reference(end)
    ours = _leaves(checkpoint.latest(run_dir / "checkpoints"))
    theirs = _leaves(reference_dir / "checkpoints" / f"step_{end:09d}.npz")
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    assert _rows(run_dir / "eval.jsonl", end) == _rows(reference_dir / "eval.jsonl", end)
    return stopped


@pytest.mark.slow
def test_timeout_stops_with_a_checkpoint_though_it_signals_twice(tmp_path, reference):
    """`timeout -s TERM 15 python train.py ...`: at 15 s timeout sends SIGTERM to the run and then
    to its whole process group, so the run gets it twice at once (or once, when the kernel merges
    the two while the first is pending). That is one request: the run checkpoints after the chunk
    in progress and ends with 75 (timeout itself returns 124)."""
    reference(2_000)  # its programs compiled into the persistent cache before the clock starts
    run_dir = tmp_path / "timeout"
    process, lines = _start(["timeout", "-s", "TERM", "15", *_train("--train.total-steps", "2000000", "--train.run-dir", str(run_dir))])
    code = process.wait(timeout=300)
    said = lines.rest()
    assert code == 124, said
    assert "SIGTERM received: stopping with a checkpoint" in said and "stopped at once" not in said, said
    _assert_stopped_whole_and_resumes_bit_exactly(run_dir, said, reference)


@pytest.mark.slow
def test_a_shell_running_the_job_in_the_background_signalled_as_a_group(tmp_path, reference):
    """`bash -c 'python train.py ... & wait'` and SIGTERM to its process group (what a launcher
    that signals a shell and its children does): the shell dies, the run checkpoints after its
    chunk and ends with 75."""
    run_dir = tmp_path / "group"
    command = " ".join(_train("--train.total-steps", "2000000", "--train.run-dir", str(run_dir)))
    process, lines = _start(["bash", "-c", f"{command} & echo $!; wait"])
    child = int(process.stdout.readline())
    lines.wait_for("env steps/s")  # training chunks are running
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the run is the shell's orphan now: wait for it to end
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        os.kill(child, signal.SIGKILL)
        raise AssertionError("the run did not end within 60 s of the signal:\n" + lines.rest())
    said = lines.rest()
    assert "SIGTERM received: stopping with a checkpoint" in said, said
    _assert_stopped_whole_and_resumes_bit_exactly(run_dir, said, reference)


@pytest.mark.slow
def test_ctrl_c_once_stops_with_a_checkpoint_and_twice_at_once_counts_once(tmp_path, reference):
    """A Ctrl-C (SIGINT) is a graceful stop like SIGTERM: the run checkpoints after its chunk and
    ends with 75. A second Ctrl-C in the same instant (a terminal sends one to the whole
    foreground group, and a wrapper may pass it on) is the same request, not a stop at once."""
    run_dir = tmp_path / "ctrl_c"
    process, lines = _start(_train("--train.total-steps", "2000000", "--train.run-dir", str(run_dir)))
    lines.wait_for("env steps/s")
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGINT)
    code = process.wait(timeout=60)
    said = lines.rest()
    assert code == 75, said
    assert "SIGINT received: stopping with a checkpoint" in said, said
    assert "stopped at once" not in said, said
    _assert_stopped_whole_and_resumes_bit_exactly(run_dir, said, reference)


@pytest.mark.slow
def test_a_signal_while_compiling_waits_for_the_compile_and_loses_nothing(tmp_path, reference):
    """A SIGTERM while a resumed run compiles its programs (a chunk whose end is not known): the
    run waits for it within the grace, then stops with a checkpoint (exit 75) instead of
    stopping at once."""
    run_dir = tmp_path / "compiling"
    first = subprocess.run(
        _train("--train.total-steps", "2000", "--train.run-dir", str(run_dir), "--train.progress", "False"),
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=600,
    )
    assert first.returncode == 0, first.stderr[-3000:]
    process, lines = _start([sys.executable, "train.py", "--resume", str(run_dir), "--train.total-steps", "2000000"])
    lines.wait_for("resuming ")  # the programs compile next
    process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=120)
    said = lines.rest()
    assert code == 75, said
    assert "its end is not known yet: waiting for it up to the 20 s grace" in said or "(in about" in said, said
    assert "stopped at once" not in said, said
    _assert_stopped_whole_and_resumes_bit_exactly(run_dir, said, reference)


def test_signals_at_once_are_one_request_and_a_later_one_is_another(monkeypatch):
    """In process: two SIGTERMs sent together reach `on_first` once and `on_repeat` once (the
    second within SAME_REQUEST_SECONDS); `on_stop_now`, which would end the process, is not called."""
    seen = []
    with lifecycle.StopSignals(
        on_first=lambda s: seen.append(("first", s)),
        on_stop_now=lambda s: seen.append(("now", s)),
        on_repeat=lambda s, after: seen.append(("repeat", s, after < lifecycle.SAME_REQUEST_SECONDS)),
    ) as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 5
        while len(seen) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stop.requested == signal.SIGTERM
    assert seen == [("first", signal.SIGTERM), ("repeat", signal.SIGTERM, True)], seen
