"""Throughput of the training loop (`python train.py profile --profile NAME`).

Builds the same jitted chunks a run uses, with the chunk length set to `measure_steps`, and
reports:
- compile time of the chunk program (warm-up and training share it) and of evaluation (ahead-of-time
  `lower().compile()`, so compilation is timed apart from execution);
- steady state: the median over `timed_chunks` training chunks (after one untimed training chunk)
  of env steps/s and gradient updates/s, summed over the run's members (seeds x sweep points);
- peak memory: the device allocator's peak where the backend reports it (GPU), and the process's
  peak resident memory (host);
- the device, the jax version and the resolved config.
The report is rewritten after every stage, so an interrupted measurement keeps what it measured.
"""

from __future__ import annotations

import dataclasses
import json
import platform
import resource
import statistics
import time
from pathlib import Path
from typing import Any

import jax

from mjx_pbac.config import RunConfig, config_to_dict
from mjx_pbac.runner import build, device_description


@dataclasses.dataclass(frozen=True)
class ProfileSettings:
    measure_steps: int = 0
    """Env steps per timed chunk (rounded up to whole vector steps); 0 picks 20 vector steps."""
    timed_chunks: int = 3
    """Training chunks timed (median reported), after one untimed one."""

    def __post_init__(self) -> None:
        if self.measure_steps < 0:
            raise ValueError(f"measure_steps must be >= 0, got {self.measure_steps}")
        if self.timed_chunks < 1:
            raise ValueError(f"timed_chunks must be >= 1, got {self.timed_chunks}")


def measurement_config(config: RunConfig, settings: ProfileSettings) -> RunConfig:
    """`config` with chunks of `measure_steps` and one warm-up chunk (to put data in the buffer)."""
    train = config.train
    steps = -(-(settings.measure_steps or 20 * train.num_envs) // train.num_envs) * train.num_envs
    chunks = settings.timed_chunks + 2
    measured = dataclasses.replace(
        train,
        chunk_steps=steps,
        warmup_steps=steps,
        total_steps=steps * chunks,
        eval_interval=steps * chunks,
        checkpoint_interval=steps * chunks,
    )
    return dataclasses.replace(config, train=measured)


def _peak_memory() -> dict[str, Any]:
    device = jax.devices()[0]
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    peak = {"host_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if stats and "peak_bytes_in_use" in stats:
        peak["device_peak_mib"] = stats["peak_bytes_in_use"] / 2**20
        peak["device_limit_mib"] = stats.get("bytes_limit", 0) / 2**20
    else:
        peak["device_peak_mib"] = None  # the CPU backend keeps no allocator statistics
    return peak


def measure(config: RunConfig, profile: str, settings: ProfileSettings, out: str | Path | None = None) -> dict[str, Any]:
    measured = measurement_config(config, settings)
    train = measured.train
    report: dict[str, Any] = {
        "profile": profile,
        "device": device_description(),
        "host": {"machine": platform.machine(), "processor": platform.processor() or platform.machine()},
        "config": config_to_dict(config),
        "measure": {
            "chunk_env_steps": train.chunk_steps,
            "vector_steps_per_chunk": train.chunk_steps // train.num_envs,
            "updates_per_chunk": train.chunk_steps // train.num_envs * train.updates_per_step,
            "timed_chunks": settings.timed_chunks,
        },
        "compile_s": {},
    }

    def write():
        if out is not None:
            Path(out).write_text(json.dumps(report, indent=2) + "\n")

    tick = time.perf_counter()
    built = build(measured)
    env, trainer = built.env, built.trainer
    members = len(built.members)
    report["members"] = members
    state = jax.block_until_ready(built.init_state())
    report["init_s"] = time.perf_counter() - tick

    explore, warmup = jax.device_put(True), jax.device_put(False)
    tick = time.perf_counter()
    chunk = trainer.chunk.lower(state, explore).compile()  # warm-up and training share it
    report["compile_s"]["chunk"] = time.perf_counter() - tick
    write()
    tick = time.perf_counter()
    evaluate = trainer.evaluate.lower(state).compile()
    report["compile_s"]["evaluate"] = time.perf_counter() - tick
    write()

    state, _ = jax.block_until_ready(chunk(state, warmup))
    state, _ = jax.block_until_ready(chunk(state, explore))  # first run: allocation, caches
    seconds = []
    for _ in range(settings.timed_chunks):
        tick = time.perf_counter()
        state, metrics = chunk(state, explore)
        jax.block_until_ready((state, metrics))
        seconds.append(time.perf_counter() - tick)
    median = statistics.median(seconds)
    report["chunk_seconds"] = seconds
    report["steady_state"] = {  # all members together
        "env_steps_per_s": members * train.chunk_steps / median,
        "updates_per_s": members * report["measure"]["updates_per_chunk"] / median,
        "seconds_per_chunk": median,
    }
    tick = time.perf_counter()
    jax.block_until_ready(evaluate(state))
    eval_seconds = time.perf_counter() - tick
    eval_steps = members * train.eval_episodes * env.episode_length
    report["evaluation"] = {
        "episodes": train.eval_episodes,
        "env_steps": eval_steps,
        "seconds": eval_seconds,
        "env_steps_per_s": eval_steps / eval_seconds,
    }
    report["memory"] = _peak_memory()
    write()
    return report


def _program_bytes(compiled) -> int | None:
    """Bytes the compiled program needs on the device (arguments + outputs + temporaries,
    less what donation lets outputs reuse), from XLA's own analysis; None if unavailable."""
    try:
        analysis = compiled.memory_analysis()
    except Exception:  # some backends do not implement it
        return None
    if analysis is None:
        return None
    return int(
        analysis.argument_size_in_bytes
        + analysis.output_size_in_bytes
        + analysis.temp_size_in_bytes
        - analysis.alias_size_in_bytes
    )


def measure_seed_scaling(
    config: RunConfig, profile: str, seed_counts: tuple[int, ...], settings: ProfileSettings, out: str | Path | None = None
) -> dict[str, Any]:
    """N seeds as one vmapped program against N sequential one-seed runs, for each N.

    For each N: compile time of the N-member chunk program, its device footprint (XLA's memory
    analysis), and the median time of a training chunk. N sequential runs take N times the
    one-seed chunk time (measured in the same report, N = 1 is always included) and need one
    seed's memory at a time. The report is rewritten after every N.
    """
    counts = sorted(set(seed_counts) | {1})
    report: dict[str, Any] = {
        "profile": profile,
        "device": device_description(),
        "config": config_to_dict(config),
        "timed_chunks": settings.timed_chunks,
        "rows": [],
    }

    def write():
        if out is not None:
            Path(out).write_text(json.dumps(report, indent=2) + "\n")

    explore, warmup = jax.device_put(True), jax.device_put(False)
    for count in counts:
        seeded = dataclasses.replace(config, train=dataclasses.replace(config.train, num_seeds=count, sweep=()))
        measured = measurement_config(seeded, settings)
        built = build(measured)
        state = jax.block_until_ready(built.init_state())
        tick = time.perf_counter()
        chunk = built.trainer.chunk.lower(state, explore).compile()
        compile_s = time.perf_counter() - tick
        state, _ = jax.block_until_ready(chunk(state, warmup))
        state, _ = jax.block_until_ready(chunk(state, explore))
        seconds = []
        for _ in range(settings.timed_chunks):
            tick = time.perf_counter()
            state = jax.block_until_ready(chunk(state, explore))[0]
            seconds.append(time.perf_counter() - tick)
        median = statistics.median(seconds)
        chunk_steps = measured.train.chunk_steps
        row = {
            "seeds": count,
            "compile_s": compile_s,
            "chunk_seconds": seconds,
            "vmapped_seconds_per_chunk": median,
            "vmapped_env_steps_per_s": count * chunk_steps / median,
            "program_bytes": _program_bytes(chunk),
        }
        one = report["rows"][0] if report["rows"] else row
        row["sequential_seconds_per_chunk"] = count * one["vmapped_seconds_per_chunk"]
        row["speedup_vs_sequential"] = row["sequential_seconds_per_chunk"] / median
        row["sequential_program_bytes"] = one["program_bytes"]
        report["rows"].append(row)
        report["chunk_env_steps"] = chunk_steps
        report["updates_per_chunk"] = chunk_steps // measured.train.num_envs * measured.train.updates_per_step
        write()
        del state, chunk, built
    report["memory"] = _peak_memory()
    write()
    return report
