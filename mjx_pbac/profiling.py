"""Throughput of the training loop (`python train.py profile --profile NAME`).

Builds the same jitted chunks a run uses, with the chunk length set to `measure_steps`, and
reports:
- compile time of each program (training chunk, warm-up chunk, gradient steps alone, evaluation,
  and with `eval_batch` > 1 the batched evaluation; ahead-of-time, so compilation is timed apart
  from execution), in turn (each alone on the machine) or together as a run compiles them
  (`compile_threads`), and the wall-clock of all of them;
- what each compiled program does (`mjx_pbac.hlo.program_stats`): loops with a data-dependent
  trip count and branches (each a device-to-host round trip per trip on a GPU; the training chunk
  should have none) and executed ops per vector step (about one kernel launch each on a GPU);
- steady state: the median over `timed_chunks` training chunks (after one untimed training chunk)
  of env steps/s and gradient updates/s, summed over the run's members (seeds x sweep points);
- the phases of a training step, per vector step: the env step (a warm-up chunk: env step with
  uniform actions, buffer insert), the gradient steps (the chunk's updates alone) and the rest
  (the policy's forward pass, and whatever running them together saves or costs);
- optionally a baseline with other env overrides, measured the same way in the same process;
- optionally (`split_lengths`) the training chunk run split into shorter chunks, each followed
  by its metrics' transfer as in a run, timed in turn with the whole chunk: the throughput a
  split costs and the seconds each chunk adds (`TrainConfig.chunk_seconds`);
- peak memory: the device allocator's peak where the backend reports it (GPU), and the process's
  peak resident memory (host);
- the device, the jax version and the resolved config.
The report is rewritten after every stage, so an interrupted measurement keeps what it measured,
and each stage is announced as it starts and ends (`measure`'s `progress`), so a large profile on a
small machine shows its figures as they come (its throughput before its evaluation).
"""

from __future__ import annotations

import dataclasses
import json
import platform
import resource
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from mjx_pbac.build import build
from mjx_pbac.compiling import compile_together
from mjx_pbac.config import RunConfig, config_to_dict
from mjx_pbac.devices import device_description
from mjx_pbac.hlo import program_stats


@dataclasses.dataclass(frozen=True)
class ProfileSettings:
    measure_steps: int = 0
    """Env steps per timed chunk (rounded up to whole vector steps); 0 picks 20 vector steps, or
    on a CPU as many as a one-step probe says end within `TrainConfig.chunk_seconds` (`_sized`)."""
    timed_chunks: int = 3
    """Training chunks timed (median reported), after one untimed one."""
    phases: bool = True
    """Also compile and time the warm-up chunk and the gradient steps alone (the per-phase
    breakdown); False measures the training chunk only (one compile fewer each)."""
    evaluate: bool = True
    """Also compile and time evaluation."""
    split_lengths: tuple[int, ...] = ()
    """Also time the training chunk run split into chunks of these many iterations (each a
    divisor of the chunk, from 1), as a run does under `TrainConfig.chunk_seconds`: the
    throughput it costs and the seconds each extra chunk adds (every length runs one program,
    compiled once)."""
    compile_threads: int = 1
    """Programs compiled at once: 1 in turn (each compile timed alone), 0 as a run compiles them
    (`mjx_pbac.compiling`: at most half the machine's cores at once), N at most N at once."""

    def __post_init__(self) -> None:
        if self.measure_steps < 0:
            raise ValueError(f"measure_steps must be >= 0, got {self.measure_steps}")
        if self.timed_chunks < 1:
            raise ValueError(f"timed_chunks must be >= 1, got {self.timed_chunks}")
        if self.compile_threads < 0:
            raise ValueError(f"compile_threads must be >= 0 (0: as a run compiles them), got {self.compile_threads}")


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


def _timed(program, state, calls: int) -> tuple[Any, list[float]]:
    """Runs `program` (state -> (state, metrics)) `calls` times; the state and each call's seconds."""
    seconds = []
    for _ in range(calls):
        tick = time.perf_counter()
        state, metrics = program(state)
        jax.block_until_ready((state, metrics))
        seconds.append(time.perf_counter() - tick)
    return state, seconds


Progress = Callable[[str, dict[str, Any]], None]
"""progress(stage, info): `measure` is at `stage` of one configuration's measurement. At "compiled",
"sized" (the timed chunks' length from a probe, `_sized`), "measured" (steady state and phases),
"split" and "evaluated", `info` is that configuration's report so far (the report, or its
"baseline"); at "compiling", {"programs": names}; at "evaluating", {"members", "episodes",
"episode_length", "points"} of the evaluation about to run."""


def _measure_one(config: RunConfig, settings: ProfileSettings, report: dict[str, Any], write, progress: Progress) -> None:
    """Compiles and times one configuration's programs into `report` (see `measure`)."""
    measured = measurement_config(config, settings)
    train = measured.train
    tick = time.perf_counter()
    built = build(measured, fuse_warmup=False)  # the warm-up program times the env step alone
    env, trainer = built.env, built.trainer
    members = len(built.members)
    iterations = trainer.schedule.iterations_per_chunk
    report["members"] = members
    state = jax.block_until_ready(built.init_state())
    report["init_s"] = time.perf_counter() - tick

    names = ["train_chunk"] + (["warmup_chunk", "update_chunk"] if settings.phases else []) + (["evaluate"] if settings.evaluate else [])
    wanted = {name: (getattr(trainer, name), (state,)) for name in names}
    snapshots = None
    if settings.evaluate and train.eval_batch > 1:
        snapshots = jax.block_until_ready(trainer.init_snapshots(state))
        wanted["evaluate_snapshots"] = (trainer.evaluate_snapshots, (snapshots,))
    shared = "warmup_chunk" in wanted and getattr(trainer.warmup_chunk, "program", None) is getattr(trainer.train_chunk, "program", 0)
    if shared:  # one program for both (a CPU's): compiled once, the warm-up its learning switched off
        del wanted["warmup_chunk"]
    progress("compiling", {"programs": [name.removesuffix("_chunk") for name in wanted]})
    seconds, programs = compile_together(wanted, threads=settings.compile_threads or None)
    if shared:
        programs["warmup_chunk"] = programs["train_chunk"]
        wanted = {name: (getattr(trainer, name), (state,)) for name in names} | wanted  # the order as asked
    report["any_length"] = bool(getattr(trainer, "any_length", False))
    for name in wanted:
        report["compile_s"][name.removesuffix("_chunk")] = 0.0 if shared and name == "warmup_chunk" else seconds[name]
        function = wanted[name][0]
        any_length = getattr(function, "arguments", ())  # its loop's trip count is an argument: count it as the measured chunk's
        stats = program_stats(programs[name], data_trips=iterations if any_length else 1)
        if not name.startswith("evaluate"):
            stats["executed_ops_per_vector_step"] = stats["executed_ops"] / iterations
        report["programs"][name] = stats
    compiled = dict(programs)
    for name, (function, _) in wanted.items():  # a chunk's compiled program, called as the chunk is
        if hasattr(function, "calling"):
            programs[name] = function.calling(programs[name])
    report["compile_wall_s"] = {
        "all": seconds["all"], "lower": seconds["lower"], "threads": settings.compile_threads, "at_once": seconds["threads"],
    }
    write()
    progress("compiled", report)

    warmup = programs.get("warmup_chunk")
    if warmup is None:  # phases off: the compiled training program where it is the warm-up's too (a CPU's)
        same = getattr(trainer.warmup_chunk, "program", None) is getattr(trainer.train_chunk, "program", 0)
        warmup = trainer.warmup_chunk.calling(compiled["train_chunk"]) if same else trainer.warmup_chunk
    state, _ = jax.block_until_ready(warmup(state))  # data in the buffer
    if settings.measure_steps == 0 and report["any_length"] and train.chunk_seconds > 0 and iterations > 1 and not settings.split_lengths:
        state, iterations = _sized(trainer, compiled, programs, state, train.chunk_seconds, report, progress)
    state, _ = jax.block_until_ready(programs["train_chunk"](state))  # first run: allocation, caches
    state, train_seconds = _timed(programs["train_chunk"], state, settings.timed_chunks)
    median = statistics.median(train_seconds)
    report["chunk_seconds"] = train_seconds
    report["steady_state"] = {  # all members together
        "env_steps_per_s": members * iterations * train.num_envs / median,
        "updates_per_s": members * iterations * train.updates_per_step / median,
        "seconds_per_chunk": median,
    }
    per_step = {"total": median / iterations}
    if settings.phases:
        state, env_seconds = _timed(programs["warmup_chunk"], state, settings.timed_chunks)
        state, update_seconds = _timed(programs["update_chunk"], state, settings.timed_chunks)
        per_step["env_step"] = statistics.median(env_seconds) / iterations
        per_step["gradient_steps"] = statistics.median(update_seconds) / iterations
        per_step["rest"] = per_step["total"] - per_step["env_step"] - per_step["gradient_steps"]
        report["phases_note"] = (
            "per vector step of all members: env_step = a warm-up chunk (env step with uniform actions, "
            "buffer insert, head draws); gradient_steps = the chunk's gradient steps alone; rest = the "
            "training chunk minus both (the policy's forward pass and what overlapping saves or costs)"
        )
    report["phases_ms_per_vector_step"] = {name: 1e3 * value for name, value in per_step.items()}
    write()
    progress("measured", report)
    if settings.split_lengths:
        state = _measure_splits(trainer, programs["train_chunk"], state, settings, members * train.num_envs, report, write)
        progress("split", report)
    if not settings.evaluate:
        return
    progress("evaluating", {
        "members": members, "episodes": train.eval_episodes, "episode_length": env.episode_length, "points": train.eval_batch,
    })
    tick = time.perf_counter()
    result = jax.block_until_ready(programs["evaluate"](state))
    eval_seconds = time.perf_counter() - tick
    # Every member's episodes step together until the last has ended (at most the episode length).
    steps = int(jax.device_get(result["steps"]).max())
    eval_steps = members * train.eval_episodes * steps
    report["evaluation"] = {
        "episodes": train.eval_episodes,
        "steps": steps,
        "env_steps": eval_steps,
        "seconds": eval_seconds,
        "env_steps_per_s": eval_steps / eval_seconds,
    }
    if snapshots is not None:  # the same evaluation, eval_batch points in one program
        tick = time.perf_counter()
        jax.block_until_ready(programs["evaluate_snapshots"](snapshots))
        batch_seconds = time.perf_counter() - tick
        report["evaluation"]["batched"] = {
            "points": train.eval_batch,
            "seconds": batch_seconds,
            "seconds_per_point": batch_seconds / train.eval_batch,
            "speedup_per_point": eval_seconds * train.eval_batch / batch_seconds,
        }
    write()
    progress("evaluated", report)


def _sized(trainer, compiled: dict, programs: dict, state, chunk_seconds: float, report: dict[str, Any], progress: Progress):
    """On an any-length trainer (a CPU's) with `measure_steps` 0: one vector step of training
    times the pace, and the timed chunks (training, and the phases') hold as many vector steps as
    end within `chunk_seconds`, at most the default 20, at least one, so a profile far too big for
    the machine prints its figures within minutes instead of after 20 slow vector steps a chunk.
    Every length runs the compiled programs: nothing compiles. Returns (state, vector steps)."""
    probe = trainer.chunk_program("train", 1).calling(compiled["train_chunk"])
    state, _ = jax.block_until_ready(probe(state))  # first run: allocation, caches
    state, seconds = _timed(probe, state, 1)
    whole = trainer.schedule.iterations_per_chunk
    length = max(1, min(whole, int(chunk_seconds / seconds[0])))
    report["sized"] = {"probe_seconds_per_vector_step": seconds[0], "chunk_seconds": chunk_seconds, "vector_steps": length}
    if length < whole:
        for name, kind in (("train_chunk", "train"), ("warmup_chunk", "warmup"), ("update_chunk", "update")):
            if name in compiled:
                programs[name] = trainer.chunk_program(kind, length).calling(compiled[name])
        if "measure" in report:  # the report's own (a baseline's is in its "sized")
            steps_per_vector_step = report["measure"]["chunk_env_steps"] // report["measure"]["vector_steps_per_chunk"]
            updates_per_vector_step = report["measure"]["updates_per_chunk"] // report["measure"]["vector_steps_per_chunk"]
            report["measure"].update(
                chunk_env_steps=length * steps_per_vector_step, vector_steps_per_chunk=length, updates_per_chunk=length * updates_per_vector_step,
            )
    progress("sized", report)
    return state, length


def split_choices(iterations: int) -> list[int]:
    """The lengths a measured chunk of `iterations` splits into evenly: its divisors below it."""
    return [n for n in range(1, iterations) if iterations % n == 0]


def _measure_splits(trainer, whole, state, settings: ProfileSettings, steps_per_iteration: int, report, write):
    """Times a training chunk of the schedule run whole and split into `settings.split_lengths`
    (in turn, `timed_chunks` rounds, so drift hits all alike), each chunk followed by the host
    transfer of its metrics as in a run; records throughput relative to whole and the seconds each
    extra chunk run adds."""
    iterations = trainer.schedule.iterations_per_chunk
    allowed = split_choices(iterations)
    bad = [n for n in settings.split_lengths if n not in allowed]
    if bad:
        raise ValueError(
            f"split lengths {bad} do not split the measured chunk of {iterations} iterations; "
            f"choose from {', '.join(map(str, allowed)) or 'none (it has one iteration)'}"
        )
    variants = {iterations: whole}
    compiled: dict[str, Any] = {}
    for length in settings.split_lengths:
        chunk = trainer.chunk_program("train", length)
        if chunk.name not in compiled:  # one program for every length
            tick = time.perf_counter()
            compiled[chunk.name] = chunk.program.lower(state, *chunk.arguments).compile()
            report["compile_s"][chunk.name] = time.perf_counter() - tick
        variants[length] = chunk.calling(compiled[chunk.name])
    seconds: dict[int, list[float]] = {length: [] for length in variants}
    for round_ in range(settings.timed_chunks + 1):  # round 0 untimed: the first run of each
        for length, program in variants.items():
            tick = time.perf_counter()
            for _ in range(iterations // length):
                state, metrics = program(state)
                jax.device_get(metrics)  # what a run fetches after every chunk (it also waits for it)
            if round_:
                seconds[length].append(time.perf_counter() - tick)
    base = statistics.median(seconds[iterations])
    rows = []
    for length, times in seconds.items():
        median = statistics.median(times)
        calls = iterations // length
        rows.append({
            "length": length,
            "chunks_per_schedule_chunk": calls,
            "seconds_per_schedule_chunk": median,
            "seconds_per_chunk": median / calls,
            "env_steps_per_s": steps_per_iteration * iterations / median,
            "throughput_vs_whole": base / median,
            "added_seconds_per_extra_chunk": (median - base) / (calls - 1) if calls > 1 else 0.0,
            "times": times,
        })
    report["splits"] = rows
    write()
    return state


def measure(
    config: RunConfig,
    profile: str,
    settings: ProfileSettings,
    out: str | Path | None = None,
    baseline_env_overrides: tuple[str, ...] = (),
    progress: Callable[[str, str, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """The throughput report of `config` (see the module docstring); with
    `baseline_env_overrides`, the same measurement of the config with those env overrides added
    (e.g. MJX's own while-loop solver and 8 line-search iterations) goes under "baseline", with
    the speed-up, so a change is measured side by side in one process. `progress(which, stage,
    part)` hears each stage (`Progress`) as it comes, `which` "measured" or "baseline"."""
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
        "programs": {},
    }

    def write():
        if out is not None:
            Path(out).write_text(json.dumps(report, indent=2) + "\n")

    def heard(which: str) -> Progress:
        return (lambda stage, part: progress(which, stage, part)) if progress else (lambda stage, part: None)

    _measure_one(config, settings, report, write, heard("measured"))
    if baseline_env_overrides:
        overrides = (*config.train.env_overrides, *baseline_env_overrides)
        baseline_config = dataclasses.replace(config, train=dataclasses.replace(config.train, env_overrides=overrides))
        baseline: dict[str, Any] = {"env_overrides": list(overrides), "compile_s": {}, "programs": {}}
        report["baseline"] = baseline
        _measure_one(baseline_config, settings, baseline, write, heard("baseline"))
        report["speedup_vs_baseline"] = {
            name: baseline["phases_ms_per_vector_step"][name] / report["phases_ms_per_vector_step"][name]
            for name in ("total", "env_step", "gradient_steps")
            if name in report["phases_ms_per_vector_step"]
        }
    report["memory"] = _peak_memory()
    write()
    return report


def _program_bytes(compiled) -> int | None:
    """Bytes the compiled program needs on the device (arguments + outputs + temporaries,
    less what donation lets outputs reuse), from XLA's own analysis; None if unavailable."""
    try:
        analysis = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - some backends do not implement it
        return None
    if analysis is None:
        return None
    return int(
        analysis.argument_size_in_bytes
        + analysis.output_size_in_bytes
        + analysis.temp_size_in_bytes
        - analysis.alias_size_in_bytes
    )


def device_counts_up_to(available: int) -> tuple[int, ...]:
    """1, 2, 4, ... and `available` itself: bench-seeds' default device counts."""
    counts, count = [], 1
    while count < available:
        counts.append(count)
        count *= 2
    return (*counts, available)


def measure_seed_scaling(
    config: RunConfig,
    profile: str,
    seed_counts: tuple[int, ...],
    settings: ProfileSettings,
    out: str | Path | None = None,
    device_counts: tuple[int, ...] = (1,),
) -> dict[str, Any]:
    """N seeds as one vmapped program against N sequential one-seed runs, for each N, on each
    number of devices D (the members sharded over D devices, `mjx_pbac.devices`).

    For each (N, D): compile time of the N-member chunk program, its footprint per device (XLA's
    memory analysis), and the median time of a training chunk. N sequential runs take N times the
    one-seed, one-device chunk time (N = 1 and D = 1 are always measured) and need one seed's
    memory at a time; `speedup_vs_one_device` compares with the same N on one device. The report
    is rewritten after every row.
    """
    counts = sorted(set(seed_counts) | {1})
    spreads = sorted(set(device_counts) | {1})
    report: dict[str, Any] = {
        "profile": profile,
        "device": device_description(),
        "config": config_to_dict(config),
        "timed_chunks": settings.timed_chunks,
        "device_counts": spreads,
        "rows": [],
    }

    def write():
        if out is not None:
            Path(out).write_text(json.dumps(report, indent=2) + "\n")

    for count in counts:
        for spread in spreads:
            if spread > count:  # a run never uses more devices than it has members
                continue
            seeded = dataclasses.replace(config, train=dataclasses.replace(config.train, num_seeds=count, sweep=(), devices=spread))
            measured = measurement_config(seeded, settings)
            built = build(measured)
            state = jax.block_until_ready(built.init_state())
            tick = time.perf_counter()
            compiled = built.trainer.train_chunk.lower(state).compile()
            chunk = built.trainer.train_chunk.calling(compiled)
            compile_s = time.perf_counter() - tick
            state, _ = jax.block_until_ready(built.trainer.warmup_chunk(state))
            state, _ = jax.block_until_ready(chunk(state))
            state, seconds = _timed(chunk, state, settings.timed_chunks)
            median = statistics.median(seconds)
            chunk_steps = measured.train.chunk_steps
            row = {
                "seeds": count,
                "devices": spread,
                "devices_used": built.layout.devices,
                "padded_members": built.layout.padded,
                "compile_s": compile_s,
                "chunk_seconds": seconds,
                "vmapped_seconds_per_chunk": median,
                "vmapped_env_steps_per_s": count * chunk_steps / median,
                "program_bytes": _program_bytes(compiled),
            }
            one = report["rows"][0] if report["rows"] else row
            same_seeds = next((r for r in report["rows"] if r["seeds"] == count and r["devices"] == 1), row)
            row["sequential_seconds_per_chunk"] = count * one["vmapped_seconds_per_chunk"]
            row["speedup_vs_sequential"] = row["sequential_seconds_per_chunk"] / median
            row["speedup_vs_one_device"] = same_seeds["vmapped_seconds_per_chunk"] / median
            row["sequential_program_bytes"] = one["program_bytes"]
            report["rows"].append(row)
            report["chunk_env_steps"] = chunk_steps
            report["updates_per_chunk"] = chunk_steps // measured.train.num_envs * measured.train.updates_per_step
            write()
            del state, chunk, built
    report["memory"] = _peak_memory()
    write()
    return report
