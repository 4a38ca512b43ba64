"""`train.py profile --profile NAME`: the training loop's throughput for a profile
(mjx_pbac/profiling.py measures it), printed and written as a JSON report."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import tyro

from mjx_pbac.commands import _common
from mjx_pbac.config import RunConfig

SUMMARY = (
    "throughput of the training loop (compile time, env steps/s, gradient updates/s, peak memory) "
    "for a profile, written as a JSON report naming the device."
)


@dataclasses.dataclass(frozen=True)
class Args:
    """Throughput of the training loop for a profile: compile time, env steps/s and gradient
    updates/s in steady state, peak memory; JSON report naming the device."""

    run: Annotated[RunConfig, tyro.conf.arg(name="")]
    measure_steps: int = 0
    """Env steps per timed chunk; 0 picks 20 vector steps, or on a CPU as many as a one-step probe
    says end within --train.chunk-seconds (a big profile prints its figures within minutes)."""
    timed_chunks: int = 3
    """Chunks timed after an untimed one (the median is reported)."""
    baseline: tuple[str, ...] = ()
    """Env overrides KEY=VALUE of a baseline measured the same way in the same process, e.g.
    `--baseline solver_loop=while ls_iterations=8` (MJX's own solve, the earlier line search)."""
    phases: bool = True
    """Also time the env step and the gradient steps alone (two more programs to compile)."""
    evaluate: bool = True
    """Also compile and time evaluation."""
    split_lengths: tuple[int, ...] = ()
    """Also time the training chunk split into chunks of these many iterations (divisors of the
    measured chunk), as --train.chunk-seconds splits a run's: the throughput it costs."""
    compile_threads: int = 1
    """Programs compiled at once: 1 in turn (each compile timed alone), 0 as a run compiles them
    (at most half the machine's cores at once), N at most N at once."""
    out: str = "profile.json"
    """Where the JSON report goes."""


def main(argv: list[str]) -> None:
    """Measures the profile `argv` names, prints the summary and writes the report."""
    from mjx_pbac.profiling import ProfileSettings, measure, measurement_config, split_choices
    from mjx_pbac.schedule import Schedule

    profile, args = _common.measurement(Args, "profile", argv)
    _common.check_memory(args.run)
    try:
        settings = ProfileSettings(
            measure_steps=args.measure_steps, timed_chunks=args.timed_chunks, phases=args.phases, evaluate=args.evaluate,
            split_lengths=args.split_lengths, compile_threads=args.compile_threads,
        )
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    baseline = tuple(f"{key}={value}" for key, value in _common.parse_overrides(args.baseline))
    if baseline:
        _common.check_env(dataclasses.replace(args.run, train=dataclasses.replace(args.run.train, env_overrides=args.run.train.env_overrides + baseline)))
    if settings.split_lengths:
        measured = Schedule.of(measurement_config(args.run, settings).train)
        allowed = split_choices(measured.iterations_per_chunk)
        bad = [n for n in settings.split_lengths if n not in allowed]
        if bad:
            choices = ", ".join(map(str, allowed)) or "none: it has one vector step"
            raise SystemExit(
                f"error: --split-lengths {' '.join(map(str, bad))} do not split the measured chunk of "
                f"{measured.iterations_per_chunk} vector steps (--measure-steps / num_envs); choose from {choices}"
            )
    report = measure(args.run, profile, settings, out=args.out, baseline_env_overrides=baseline, progress=_Printer(profile, baseline))
    if baseline:
        print(f"  speed-up per vector step over the baseline: {report['speedup_vs_baseline']['total']:.2f}x")
    print(f"wrote {args.out}")


class _Printer:
    """Prints each stage of the measurement as it comes (`profiling.Progress`): what is compiling,
    the compile seconds, the throughput, the chunk splits, then the evaluation (the longest stage
    of a large profile on a small machine), so no figure waits for a later stage."""

    def __init__(self, profile: str, baseline: tuple[str, ...]):
        self.profile, self.baseline, self.started = profile, baseline, False

    def __call__(self, which: str, stage: str, info: dict) -> None:
        name = "  measured" if which == "measured" else f"  baseline ({' '.join(self.baseline)})"
        if not self.started:
            import jax

            print(f"{self.profile} on {jax.devices()[0].device_kind}", flush=True)
            self.started = True
        if stage == "compiling":
            print(f"{name}: compiling {', '.join(info['programs'])} ...", flush=True)
        elif stage == "compiled":
            print(f"{name}: {compile_line(info)}", flush=True)
        elif stage == "sized":
            sized = info["sized"]
            print(
                f"{name}: a vector step of training took {sized['probe_seconds_per_vector_step']:.3f} s: timed chunks of "
                f"{sized['vector_steps']} vector steps (--train.chunk-seconds {sized['chunk_seconds']:g}; --measure-steps sets them)",
                flush=True,
            )
        elif stage == "measured":
            print(_throughput_line(name, info), flush=True)
        elif stage == "split":
            for row in info.get("splits", []):
                print(
                    f"{name}: chunks of {row['length']} vector steps ({row['chunks_per_schedule_chunk']} per measured chunk, "
                    f"{row['seconds_per_chunk']:.3f} s each): {row['throughput_vs_whole']:.3f}x the whole chunk's throughput, "
                    f"{1e3 * row['added_seconds_per_extra_chunk']:+.2f} ms per extra chunk", flush=True,
                )
        elif stage == "evaluating":
            points = f", then {info['points']} points in one program" if info["points"] > 1 else ""
            print(
                f"{name}: evaluating {info['episodes']} episodes of up to {info['episode_length']:,} steps for each of "
                f"{info['members']} members{points} ...", flush=True,
            )
        elif stage == "evaluated":
            evaluation = info["evaluation"]
            batched = evaluation.get("batched")
            print(
                f"{name}: evaluation: {evaluation['episodes']} episodes per member, {evaluation['steps']:,} steps, in {evaluation['seconds']:.2f} s"
                + (
                    f"; {batched['points']} points in one program {batched['seconds']:.2f} s, {batched['seconds_per_point']:.2f} s "
                    f"per point ({batched['speedup_per_point']:.2f}x)" if batched else ""
                ), flush=True,
            )


def _throughput_line(name: str, part: dict) -> str:
    """One measured program's line: steady-state throughput, time per vector step (and its
    phases), what the compiled chunk executes, its compile time."""
    steady, phases = part["steady_state"], part["phases_ms_per_vector_step"]
    stats = part["programs"]["train_chunk"]
    split = (
        f" = env {phases['env_step']:.2f} + gradient steps {phases['gradient_steps']:.2f} + rest {phases['rest']:.2f}"
        if "env_step" in phases else ""
    )
    return (
        f"{name}: {steady['env_steps_per_s']:,.1f} env steps/s, {steady['updates_per_s']:,.1f} gradient updates/s; "
        f"per vector step {phases['total']:.2f} ms{split}; {stats['executed_ops_per_vector_step']:,.0f} ops "
        f"per vector step, {stats['data_dependent_loops']} data-dependent loops, {stats['conditionals']} branches; "
        f"compile {part['compile_s']['train']:.1f} s"
    )


def compile_line(report: dict) -> str:
    """The profile's compile seconds, one program after another, and their wall-clock."""
    each = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in report["compile_s"].items())
    wall = report.get("compile_wall_s")
    if not wall:
        return f"compile: {each}"
    at_once = wall.get("at_once", wall["threads"])
    how = "in turn" if at_once == 1 else f"{at_once} at a time"
    return f"compile: {each}; all {wall['all']:.1f} s of wall-clock compiled {how} (tracing {wall['lower']:.1f} s)"
