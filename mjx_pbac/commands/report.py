"""`train.py report RUN_DIR ...`: the paper's tables, reward curves and exploration pictures from
finished runs (mjx_pbac/report/), or a probe directory's own report. It reads files only: it
computes on the CPU and joins no job."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Literal

import tyro

from mjx_pbac import cli

SUMMARY = (
    "the paper's tables (Markdown, LaTeX) and reward curves from finished runs, and exploration "
    "pictures from their visited states."
)

JOINS_JOB = False
"""A report reads files, alone: it joins no jax.distributed job (a SLURM batch step names several tasks)."""


@dataclasses.dataclass(frozen=True)
class Args:
    """The paper's tables (final episode reward and AULC, IQM [lower, upper] over seeds, bold by a
    one-sided paired t-test) as Markdown and LaTeX, and reward-curve PNGs, from finished runs."""

    run_dirs: tyro.conf.Positional[tuple[str, ...]]
    """Run directories; their members are grouped by task (env) and method (label), seeds paired by seed."""
    out: str = "report"
    """Directory for results.md, results.tex and the figures."""
    explore: Annotated[tuple[tuple[str, ...], ...], tyro.conf.arg(metavar="RUN_DIR,X_KEY,Y_KEY"), tyro.conf.UseAppendAction] = ()
    """Exploration pictures RUN_DIR,X_KEY,Y_KEY (e.g. runs/x,x_position,y_position; Y_KEY may be env_steps)."""
    phases: int = 5
    """Training phases (panels) per exploration picture."""
    member: int | None = None
    """Draw only this member in the exploration pictures (default: all, coloured by member)."""
    x: tuple[Literal["steps", "vector", "wall", "train"], ...] = ("steps",)
    """The curves' x axes, one figure per task each: env steps, vector steps per seed (env steps /
    envs per seed: runs with other env counts at equal GPU cost), the run's wall-clock (compiles
    and evaluations included) or its training time, in minutes; e.g. `--x steps wall`."""
    score: tuple[str, ...] = ()
    """Scores of the time-to-score table: NUMBER for every task, or TASK=NUMBER (repeatable in one
    list); default: the paper's PBAC final value on each task (`mjx_pbac/paper.py`)."""
    score_fraction: tuple[float, ...] = (1.0,)
    """Fractions of the score to time, one table row each, e.g. `--score-fraction 0.9 1.0`."""
    by_run: bool = False
    """Name each method after its run directory too, RUN/LABEL (e.g. u8/pbac): runs of the same task
    and algorithm with other options are then compared side by side, not taken as seeds of one method."""
    frames: bool = False
    """Add frames_<task>.png: six moments of an evaluation episode of each task's final policy (its first
    method's first seed), drawn by MuJoCo (as the `video` command draws); rolls the policy out, so it compiles (minutes on a CPU)."""


def main(argv: list[str]) -> None:
    """Writes the report of the run directories (or probe directories) `argv` names."""
    from mjx_pbac.report import ExplorationPlot, parse_scores, write_report

    _report_on_cpu()
    args = cli.parse(Args, argv, f"{cli.program()} report")
    plots = []
    for entry in (entry for entries in args.explore for entry in entries):
        parts = entry.split(",")
        if len(parts) != 3:
            raise SystemExit(f"error: --explore {entry!r}: expected RUN_DIR,X_KEY,Y_KEY, e.g. runs/a,x_position,y_position")
        plots.append(ExplorationPlot(parts[0], parts[1], parts[2], phases=args.phases, member=args.member))
    if not args.run_dirs:
        raise SystemExit("error: give at least one run directory")
    probes = [d for d in args.run_dirs if (Path(d) / "probe_plan.json").is_file()]
    if probes:  # a probe directory: its own report, written back into it
        if len(probes) != len(args.run_dirs):
            raise SystemExit("error: give either probe directories or run directories, not both")
        _probe_reports(probes)
        return
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise SystemExit(f"error: --out {args.out} is an existing file; give a directory for the report")
    try:
        scores = parse_scores(args.score)
        written = write_report(
            list(args.run_dirs), args.out, exploration=plots or None, x=args.x, scores=scores,
            score_fractions=args.score_fraction, by_run=args.by_run, frames=args.frames,
        )
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    for row in json.loads(Path(written["time_to_score"]).read_text()):
        if row["score"] is None:
            continue
        where = (
            f"reached at {row['env_steps']:,} env steps, "
            + (f"{row['wall_s'] / 60:.1f} min wall-clock" if row["wall_s"] is not None else "no wall-clock in the logs")
            if row["reached"] else f"not reached (best {row['best']:.4g} at {row['best_env_steps']:,} env steps)"
        )
        print(f"{row['task']} / {row['method']}: score {row['score']:.4g} ({row['score_source']}) {where}")
    strips = f" and {len(written['frames'])} frame strip(s)" if args.frames else ""
    print(f"wrote {written['markdown']}, {written['latex']}, {written['time_to_score']} and "
          f"{len(written['curves'])} curve figure(s){strips} in {args.out}")


def _probe_reports(directories: list[str]) -> None:
    """Each probe directory's report, written back into it and printed."""
    from mjx_pbac.probe import write_probe_report

    for directory in directories:
        written = write_probe_report(directory)
        print(Path(written["markdown"]).read_text())
        print(f"wrote {written['markdown']}, {written['json']} and the figures in {directory}")


def _report_on_cpu() -> None:
    """Keeps the report command off any accelerator: it reads files and draws figures, and is
    often started beside a training run on the same GPU, whose memory it must not take (JAX would
    load the GPU backend, and claim 75 % of its memory, at the first array it makes). Sets JAX's
    platforms to the CPU alone, which holds while no backend is loaded yet, as in a fresh process:
    `jax.config.update` and not the JAX_PLATFORMS variable, which JAX reads once, when imported."""
    import jax
    from jax._src import xla_bridge

    loaded = getattr(xla_bridge, "backends_are_initialized", lambda: False)()
    if not loaded:  # loaded already (an in-process caller): too late to change, and nothing to change
        jax.config.update("jax_platforms", "cpu")
