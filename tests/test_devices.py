"""Members over devices and processes (mjx_pbac.devices).

The test session has one CPU device. Several devices need
XLA_FLAGS=--xla_force_host_platform_device_count=N before JAX starts, so the sharded runs happen
in processes of their own: `tests/sharded_programs.py` (the programs, 4 devices) and `train.py`
itself (4 devices in one process, or 2 processes of 2 devices joined by jax.distributed on a
localhost coordinator).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from mjx_pbac import checkpoint, config as run_config, devices, records, runner
from mjx_pbac.build import build

ROOT = Path(__file__).resolve().parents[1]
TIMING = records.TIMING_KEYS


def _env(device_count: int, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COORDINATOR", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "SLURM_", "OMPI_"))}
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={device_count}".strip()
    env.update(extra)
    return env


# -- one device (the test session) ----------------------------------------------------------


def test_a_run_on_one_device_has_no_mesh_and_refuses_devices_it_does_not_see():
    layout = devices.layout(5, 0)
    assert layout.mesh is None and layout.devices == 1 and layout.padded == 5
    assert layout.describe() == "5 members on one device"
    with pytest.raises(ValueError, match=r"train.devices is 3 but 1 device is visible \(cpu\); use at most 1, or 0 for all"):
        devices.layout(5, 3)
    with pytest.raises(ValueError, match="must be >= 0"):
        devices.layout(5, -1)


def test_a_device_count_that_is_not_there_is_refused_before_a_run_directory_is_made(tmp_path):
    config = run_config.load_profile("chain")
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, devices=2, run_dir=str(tmp_path / "run")))
    with pytest.raises(runner.RunError, match=r"train.devices is 2 but 1 device is visible"):
        runner.train(config, profile="chain")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("environ, message", [
    ({"JAX_COORDINATOR_ADDRESS": "localhost:1234"}, "set but not JAX_NUM_PROCESSES, JAX_PROCESS_ID"),
    ({"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "two", "JAX_PROCESS_ID": "0"}, "must be integers"),
    ({"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "2"}, r"must lie in \[0, JAX_NUM_PROCESSES\) = \[0, 2\), got 2"),
])
def test_an_incomplete_or_malformed_process_environment_is_refused(environ, message):
    with pytest.raises(ValueError, match=message):
        devices.initialize_distributed(environ)


def test_one_process_joins_nothing():
    assert devices.initialize_distributed({}) is False
    assert devices.initialize_distributed({"SLURM_NTASKS": "1", "OMPI_COMM_WORLD_SIZE": "1"}) is False
    assert devices.agree(15, 2.5) == (15, 2.5) and devices.agree(None, 0.0) == (None, 0.0)
    assert devices.broadcast_text("runs/x") == "runs/x"


def test_the_host_cpu_is_described_with_a_digest_of_its_instruction_set():
    """Two hosts whose flags differ (here AVX-512 present or not) get different digests; the
    order of the flags does not matter; a host without /proc/cpuinfo's fields still names a CPU."""
    text = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx2{}\n\nprocessor\t: 1\nmodel name\t: other\n"
    plain, wide = devices.host_description(text.format("")), devices.host_description(text.format(" avx512f"))
    assert plain["cpu"] == wide["cpu"] == "AMD EPYC" and plain["cores"] == os.cpu_count()
    assert plain["cpu_flags"] != wide["cpu_flags"] and len(plain["cpu_flags"]) == 12
    assert devices.host_description(text.format("").replace("sse2 avx2", "avx2 sse2"))["cpu_flags"] == plain["cpu_flags"]
    bare = devices.host_description("")
    assert bare["cpu"] and bare["cpu_flags"] is None
    assert devices.device_description()["host"] == devices.host_description()


def test_how_many_devices_a_run_uses():
    assert devices.devices_used(members=10, devices=0, available=8) == 8
    assert devices.devices_used(members=3, devices=0, available=8) == 3  # never more than members
    assert devices.devices_used(members=10, devices=2, available=8) == 2
    assert devices.devices_used(members=3, devices=0, available=8, processes=2) == 8  # every device of every process


def test_the_processes_agree_on_a_stop_a_chunk_time_and_process_0s_text(monkeypatch):
    """As two processes see them (the collectives replaced by what they return): a signal on any
    process stops all, and all size their chunks from the slowest one's time; process 0's text,
    any length and script, reaches the others whole."""
    from jax.experimental import multihost_utils

    monkeypatch.setattr(devices.jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "process_allgather", lambda value: np.asarray([[0, 1.5], [15, 3.25]]))
    assert devices.agree(None, 1.5) == (15, 3.25)
    monkeypatch.setattr(multihost_utils, "process_allgather", lambda value: np.asarray([[0, 0.5], [0, 0.25]]))
    assert devices.agree(None, 0.25) == (None, 0.5)
    monkeypatch.setattr(multihost_utils, "broadcast_one_to_all", lambda data: data)
    for text in ("runs/chain-s0-20261127", "\0process 0: run directory exists, überall", ""):
        assert devices.broadcast_text(text) == text
    assert len(devices.broadcast_text("x" * 10_000).encode()) == 4092  # cut to the buffer


def test_bench_seeds_refuses_device_counts_that_are_not_there(capsys):
    import train

    assert train.run(["bench-seeds", "--profile", "chain", "--device-counts", "1", "2", "--out", "/nonexistent/x.json"]) == 2
    assert "device counts must lie in [1, 1] (1 visible), got (1, 2)" in capsys.readouterr().err


def test_gather_and_restore_are_inverse_and_keys_survive():
    """What a checkpoint holds (`gather`: host arrays, keys as key data) and what a resume puts
    back (`restore`) are the same state."""
    config = run_config.load_profile("chain")
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, num_seeds=2, buffer_size=64, batch_size=8))
    built = build(config, donate=False)
    state = built.init_state()
    host = built.layout.gather(state)
    template = built.layout.host_template(state)
    assert jax.tree.structure(host) == jax.tree.structure(template)
    for leaf, shape in zip(jax.tree.leaves(host), jax.tree.leaves(template)):
        assert isinstance(leaf, np.ndarray) and leaf.shape == shape.shape and leaf.dtype == shape.dtype
    assert host.key.dtype == np.uint32
    back = built.layout.restore(host, like=state)
    assert jax.dtypes.issubdtype(back.key.dtype, jax.dtypes.prng_key)
    for a, b in zip(jax.tree.leaves(built.layout.gather(back)), jax.tree.leaves(host)):
        np.testing.assert_array_equal(a, b)


# -- four devices (a process of its own) ----------------------------------------------------


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    out = tmp_path_factory.mktemp("sharded") / "report.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "sharded_programs.py"), str(out)],
        env=_env(4), cwd=ROOT, capture_output=True, text=True, check=False, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.parametrize("members, padded, tolerance", [(4, 4, 1e-2), (6, 8, 1e-3), (8, 8, 1e-4)])
def test_members_over_four_devices_train_as_on_one(sharded, members, padded, tolerance):
    """4, 6 (padded to 8) and 8 chain members, 2 training chunks of 100 gradient steps: each
    member's state, metrics and evaluation on 4 devices equal those of the same member on one
    device (one 8-member run, the reference of all three) to float32 rounding (relative to the
    value, or absolute below 1). They are not bit-identical: XLA's CPU programs for one member or
    two per device round their matrix products differently from the 8-member program; with one
    member per device (the unbatched program) the rounding grows most over the 200 updates."""
    row = sharded[f"members_{members}"]
    one_device, used, padded_to, _ = row["layout"]
    assert (one_device, used, padded_to) == (1, 4, padded)
    assert row["gathered_members"] == members
    for part in ("state", "metrics", "evaluation"):
        assert row[part]["max_relative_difference"] < tolerance, (part, row[part])
        assert row[part]["identical"] >= 1  # counters, seeds, env steps agree exactly
    assert sharded["device_count"] == 4


@pytest.mark.slow
@pytest.mark.heavy
def test_the_state_is_laid_out_over_the_devices(sharded):
    """Every array of the 8-member state is split along its member axis, two members on each of
    the four devices; device 1's members (seeds 2 and 3) match the same two trained alone."""
    assert len(sharded["shardings"]) == sharded["device_1_vs_alone"]["leaves"]
    for leaf in sharded["shardings"]:
        assert leaf["spec"].startswith("P('members'") and leaf["devices"] == 4 and leaf["members_per_shard"] == [2], leaf
    assert sharded["device_1_vs_alone"]["max_relative_difference"] < 1e-4


@pytest.mark.slow
@pytest.mark.heavy
def test_the_sharded_chunk_stays_on_device_compiles_once_and_exchanges_nothing(sharded):
    assert sharded["train_chunk"] == {
        "compiles_in_steady_state": 0, "data_dependent_loops": 0, "conditionals": 0, "collectives": [],
    }


@pytest.mark.slow
@pytest.mark.heavy
def test_a_checkpoint_of_the_members_resumes_on_any_layout(sharded):
    """Restored onto its own layout the state continues bit for bit; onto one device, to float32 rounding."""
    assert sharded["resume_same_layout"]["identical"] == sharded["resume_same_layout"]["leaves"]
    assert sharded["resume_one_device"]["max_relative_difference"] < 1e-4


@pytest.mark.slow
@pytest.mark.heavy
def test_bench_seeds_times_each_seed_count_on_each_device_count(sharded):
    rows = sharded["bench_seeds"]
    assert [(r["seeds"], r["devices"], r["devices_used"], r["padded_members"]) for r in rows] == [(1, 1, 1, 1), (2, 1, 1, 2), (2, 2, 2, 2)]
    assert rows[1]["speedup_vs_one_device"] == 1.0
    assert rows[2]["speedup_vs_one_device"] == pytest.approx(rows[1]["vmapped_seconds_per_chunk"] / rows[2]["vmapped_seconds_per_chunk"])


# -- train.py: two processes, then a resume in one --------------------------------------------


def _records(run_dir: Path, name: str) -> list[dict]:
    records = [json.loads(line) for line in (run_dir / name).read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _two_processes(args: list[str], device_count: int, timeout: int = 600) -> list[tuple[int, str]]:
    """`train.py args` as processes 0 and 1 of a jax.distributed run (coordinator on localhost,
    `device_count` CPU devices each): [(exit code, stderr)] per process. A process still waiting
    for its peer at the end (a failed start) is killed, not left behind."""
    port = _free_port()
    processes = [
        subprocess.Popen(
            [sys.executable, "train.py", *args],
            env=_env(device_count, JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", JAX_NUM_PROCESSES="2", JAX_PROCESS_ID=str(index)),
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for index in range(2)
    ]
    try:
        outputs = [process.communicate(timeout=timeout) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    return [(process.returncode, err) for process, (_, err) in zip(processes, outputs)]


CHAIN = ["--profile", "chain", "--seeds", "6", "--train.chunk-steps", "500", "--train.warmup-steps", "500",
         "--train.checkpoint-interval", "1000", "--train.eval-interval", "1000", "--train.progress", "False",
         "--train.chunk-seconds", "0"]  # whole chunks: the runs' rows compare whatever each process's pace


@pytest.mark.slow
@pytest.mark.heavy
def test_two_processes_write_one_run_that_resumes_in_one(tmp_path):
    """Two processes of 2 CPU devices each (jax.distributed, coordinator on localhost) train 6
    chain members to 2,000 steps: one run directory, written by process 0, bit-identical to the
    same run in one process of 4 devices. Resumed in one process on 2 devices to 3,000 steps, it
    continues where it stood: the records to 2,000 steps are kept as they were, and the rest
    equal the uninterrupted 4-device run's to float32 rounding."""
    shared = tmp_path / "two"
    for code, err in _two_processes([*CHAIN, "--train.total-steps", "2000", "--train.run-dir", str(shared)], device_count=2):
        assert code == 0, err[-3000:]
    one = tmp_path / "one"
    done = subprocess.run(
        [sys.executable, "train.py", *CHAIN, "--train.total-steps", "3000", "--train.run-dir", str(one)],
        env=_env(4), cwd=ROOT, capture_output=True, text=True, check=False, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    record = json.loads((shared / "config.json").read_text())
    assert record["device"]["process_count"] == 2 and record["device"]["devices_used"] == 4 and record["device"]["padded_members"] == 8
    assert sorted(p.name for p in shared.iterdir()) == sorted(p.name for p in one.iterdir())
    assert sorted(p.name for p in (shared / "checkpoints").iterdir()) == ["step_000001000.npz", "step_000002000.npz"]
    for name in ("metrics.jsonl", "eval.jsonl", "visits.jsonl"):
        two_processes = _records(shared, name)
        assert two_processes and two_processes == [r for r in _records(one, name) if r["env_steps"] <= 2000], name
    with np.load(shared / "checkpoints" / "step_000002000.npz") as a, np.load(one / "checkpoints" / "step_000002000.npz") as b:
        assert all(np.array_equal(a[k], b[k]) for k in a.files if k.startswith("leaf_"))

    resumed = subprocess.run(
        [sys.executable, "train.py", "--resume", str(shared), "--train.total-steps", "3000", "--devices", "2"],
        env=_env(4), cwd=ROOT, capture_output=True, text=True, check=False, timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "6 members over 2 devices (3 per device)" in resumed.stderr
    after, uninterrupted = _records(shared, "eval.jsonl"), _records(one, "eval.jsonl")
    assert [r["env_steps"] for r in after] == [r["env_steps"] for r in uninterrupted]
    for a, b in zip(after, uninterrupted):
        np.testing.assert_allclose(a["returns"], b["returns"], rtol=1e-3, err_msg=str(a["env_steps"]))
    changes = json.loads((shared / "config.json").read_text())["changes"]
    assert changes[-1]["train.devices"] == [0, 2] and changes[-1]["at_env_steps"] == 2000


@pytest.mark.slow
@pytest.mark.heavy
def test_table_refuses_a_multi_process_launch(tmp_path):
    """table plans each run from what the previous ones left on disk, which one process does
    consistently; launched as two processes, both refuse in one line instead of diverging."""
    for code, err in _two_processes(["table", "--tasks", "chain", "--out", str(tmp_path / "table")], device_count=1, timeout=300):
        assert code == 2 and "train.py table runs in one process" in err, err[-2000:]
    assert not (tmp_path / "table").exists()


def _start_two(args: list[str], device_count: int) -> list[subprocess.Popen]:
    """`train.py args` started as processes 0 and 1 of a jax.distributed run (see `_two_processes`)."""
    port = _free_port()
    return [
        subprocess.Popen(
            [sys.executable, "train.py", *args],
            env=_env(device_count, JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", JAX_NUM_PROCESSES="2", JAX_PROCESS_ID=str(index)),
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        for index in range(2)
    ]


def _signal_process_1_while_training(processes: list[subprocess.Popen], timeout: int = 300) -> tuple[list[tuple[int, str]], str]:
    """Waits for process 0's progress line of a timed training chunk, sends SIGTERM to process 1
    only, and returns ([(exit code, stderr)] per process, process 0's stderr before the signal)."""
    seen = []
    try:
        for line in processes[0].stderr:
            seen.append(line)
            if "env steps/s" in line and "(warm-up)" not in line:
                break
        processes[1].send_signal(signal.SIGTERM)
        outputs = [process.communicate(timeout=timeout) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    return [(process.returncode, err) for process, (_, err) in zip(processes, outputs)], "".join(seen)


@pytest.mark.slow
@pytest.mark.heavy
def test_a_sigterm_to_one_process_stops_every_process_together(tmp_path):
    """SIGTERM to process 1 only of a two-process run: both processes stop after the same chunk
    with exit 75 and one checkpoint. Resumed with no grace (--train.stop-grace-seconds 0), a
    SIGTERM to process 1 stops both at once (143), process 0 saying why. Resumed in one process,
    the run ends with the final state and evaluations of an uninterrupted run."""
    shared = tmp_path / "shared"
    args = ["--profile", "chain", "--seeds", "6", "--train.chunk-steps", "500", "--train.warmup-steps", "500",
            "--train.eval-interval", "1000", "--train.checkpoint-interval", "1000000", "--train.total-steps", "1000000"]
    results, _before = _signal_process_1_while_training(_start_two([*args, "--train.run-dir", str(shared)], device_count=2))
    assert [code for code, _ in results] == [75, 75], [err[-2000:] for _, err in results]
    summary = json.loads((shared / "summary.json").read_text())
    stopped_at = summary["env_steps"]
    assert summary["status"] == "interrupted" and "interrupted by SIGTERM" in summary["message"]
    assert [p.name for p in (shared / "checkpoints").iterdir()] == [f"step_{stopped_at:09d}.npz"]
    assert "stopped: interrupted by SIGTERM" in results[0][1]

    results, _ = _signal_process_1_while_training(
        _start_two(["--resume", str(shared), "--train.stop-grace-seconds", "0"], device_count=2)
    )
    assert [code for code, _ in results] == [143, 143], [err[-2000:] for _, err in results]
    summary = json.loads((shared / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["exit_code"] == 143
    assert summary["message"].startswith("process 1 stopped at once by SIGTERM after ")
    assert "the run has no grace (--train.stop-grace-seconds 0)" in summary["message"]

    end = -(-stopped_at // 1000) * 1000 + 1000
    resumed = subprocess.run(
        [sys.executable, "train.py", "--resume", str(shared), "--train.total-steps", str(end), "--train.progress", "False"],
        env=_env(4), cwd=ROOT, capture_output=True, text=True, check=False, timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    one = tmp_path / "one"
    uninterrupted = subprocess.run(
        [sys.executable, "train.py", *args[:-1], str(end), "--train.run-dir", str(one), "--train.progress", "False"],
        env=_env(4), cwd=ROOT, capture_output=True, text=True, check=False, timeout=600,
    )
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]
    with np.load(checkpoint.latest(shared / "checkpoints")) as a, np.load(checkpoint.latest(one / "checkpoints")) as b:
        assert all(np.array_equal(a[k], b[k]) for k in a.files if k.startswith("leaf_"))
    assert _records(shared, "eval.jsonl") == _records(one, "eval.jsonl")
