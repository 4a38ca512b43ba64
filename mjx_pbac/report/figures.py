"""The report's figures: `plot_curves`, one PNG per task, IQM line and interquartile band per
method (a success task: mean success rate and a ± std band), against env steps or a run's clock
(`CLOCKS`); `plot_exploration`, the states a run visited, one scatter panel per phase of training.

Figures are drawn on `matplotlib.figure.Figure` directly (Agg canvas, no pyplot and no display).
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from mjx_pbac import rundir, stats
from mjx_pbac.report.runs import Curves, MethodCurves, PathLike
from mjx_pbac.report.scores import _iqm_band

CLOCKS = {
    "steps": "env steps",
    "vector": "vector steps per seed (env steps / envs per seed)",
    "wall": "wall-clock (min)",
    "train": "training time (min)",
}
"""The x axes a curve can be drawn against (`plot_curves`): env steps; vector steps, the env steps
each seed's batch of instances took together (what a GPU's wall-clock follows where the physics is
latency-bound, so recipes with other env counts compare at equal cost); or one of a run's clocks
(eval rows' `wall_s`, `train_s`; `mjx_pbac.records.Clocks`)."""
CURVES_SIZE = (6.4, 4.2)
"""A curve figure's width and height in inches (saved at 110 dpi), before a legend under the axes."""
LEGEND_INSIDE = 6
"""Legend entries (methods and score lines) a curve figure keeps inside its axes; with more, the
legend goes under the axes in two columns, so that it hides no curve."""
LINE_STYLES = ("-", "-.", ":")
"""A curve figure's methods take matplotlib's 10 colours in turn, the first ten solid, the next ten
dash-dotted, then dotted, so that no two share a line (scores are dashed)."""


PALETTE_COLOURS = 256
"""Colours a saved figure keeps (`save_png`): a line plot's flat colours and their antialiased
edges fit in 256 with no visible change, and the palette PNG is about a third of matplotlib's RGBA
one, which keeps reports small enough to commit beside the runs they draw."""


def save_png(figure: Figure, path: Path, dpi: int) -> Path:
    """Writes `figure` to `path` as a palette PNG of at most `PALETTE_COLOURS` colours, at `dpi`."""
    from PIL import Image  # matplotlib's own dependency

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    buffer.seek(0)
    with Image.open(buffer) as image:
        palette = image.convert("RGB").quantize(PALETTE_COLOURS, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    palette.save(path, format="PNG", optimize=True)
    return path


def _file_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "task"


def _mean_std_band(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per evaluation point (columns of [S, P]): mean, mean - std and mean + std across seeds
    (`stats.mean_std`)."""
    scores = np.array([stats.mean_std(values[:, point]) for point in range(values.shape[1])])
    return scores[:, 0], scores[:, 0] - scores[:, 1], scores[:, 0] + scores[:, 1]


def _x_values(entry: MethodCurves, x: str) -> np.ndarray | None:
    """[P] where each evaluation point of `entry` lies on axis `x` (`CLOCKS`): env steps, vector
    steps (env steps / the runs' envs per seed), or the latest seed's clock in minutes (NaN where a
    seed's is unknown); None when the logs carry no clock or the seeds' runs differ in envs per
    seed."""
    if x == "steps":
        return entry.env_steps.astype(np.float64)
    if x == "vector":
        return None if entry.num_envs is None else entry.env_steps / float(entry.num_envs)
    values = entry.wall_s if x == "wall" else entry.train_s
    if values is None:
        return None
    return values.max(axis=0) / 60.0  # NaN wherever a seed's is


def plot_curves(
    curves: Curves,
    out_dir: PathLike,
    x: str = "steps",
    scores: Mapping[str, Sequence[float]] | None = None,
) -> list[Path]:
    """One PNG per task: for a return task (out_dir/curves_<task>.png) per method the IQM across
    seeds at each evaluation point as a line, and the 25-75% quantile band, y evaluation return;
    for a success task (`Curves.success_tasks`, Meta-World; out_dir/success_<task>.png, the
    paper's success rate curves) per method the mean success rate across seeds and a ± std band.

    x is env steps, or with `x` "vector" the vector steps per seed (env steps / envs per seed;
    curves_vector_<task>.png), or "wall" / "train" the run's wall-clock / training time in minutes
    (curves_wall_<task>.png, curves_train_<task>.png). Methods the axis cannot place (no clock in
    their logs; seeds from runs with other envs per seed) are left out and named in the legend's
    title (in the axes, when nothing is drawn). `scores` (task -> values) draws each task's scores
    as dashed lines."""
    if x not in CLOCKS:
        raise ValueError(f"unknown x axis {x!r}; valid: {', '.join(CLOCKS)}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    success_tasks = curves.success_tasks
    for task in curves.tasks:
        success = task in success_tasks
        figure = Figure(figsize=CURVES_SIZE, layout="constrained")
        axes = figure.add_subplot()
        left_out = []
        drawn = 0
        for method in curves.methods:
            entry = curves.get(task, method)
            if entry is None:
                continue
            xs = _x_values(entry, x)
            if xs is None:
                left_out.append(method)
                continue
            if success:
                middle, lower, upper = _mean_std_band(entry.success)
            else:
                middle, lower, upper = _iqm_band(entry.returns)
            known = ~np.isnan(xs)
            style = LINE_STYLES[min(drawn // 10, len(LINE_STYLES) - 1)]  # past the 10 colours, the next style
            drawn += 1
            (line,) = axes.plot(xs[known], middle[known], linestyle=style, label=f"{method} ({len(entry.seeds)} seeds)")
            axes.fill_between(xs[known], lower[known], upper[known], color=line.get_color(), alpha=0.25, linewidth=0)
        for shade, score in zip(("0.3", "0.6", "0.8"), (scores or {}).get(task, ())):
            axes.axhline(score, color=shade, linestyle="--", linewidth=1, label=f"score {score:g}")
        axes.set_title(task)
        axes.set_xlabel(CLOCKS[x])
        if success:
            axes.set_ylabel("success rate (mean ± std over seeds)")
            axes.set_ylim(-0.05, 1.05)
        else:
            axes.set_ylabel("evaluation return")
        axes.grid(alpha=0.3)
        reason = "envs per seed unknown or differing" if x == "vector" else "no clock in the logs"
        title = f"{reason}: {', '.join(left_out)}" if left_out else None
        entries = len(axes.get_legend_handles_labels()[1])
        if not entries:  # nothing this axis could place: say why in the empty axes, not in an empty legend
            axes.text(0.5, 0.5, title or "no curves", transform=axes.transAxes, ha="center", va="center", wrap=True)
        elif entries <= LEGEND_INSIDE:
            axes.legend(title=title, title_fontsize=8)
        else:  # a legend that would hide the curves goes under the axes, and the figure grows to hold it
            figure.set_figheight(CURVES_SIZE[1] + 0.18 * -(-entries // 2))  # 0.18 in per row of two
            figure.legend(loc="outside lower center", ncols=2, fontsize=8, title=title, title_fontsize=8)
        kind = "success" if success else "curves"
        path = out_dir / (f"{kind}_{_file_name(task)}.png" if x == "steps" else f"{kind}_{x}_{_file_name(task)}.png")
        save_png(figure, path, dpi=110)
        paths.append(path)
    return paths


def _visit_value(record: dict[str, Any], key: str) -> float:
    return float(record["env_steps"]) if key == "env_steps" else float(record["state"][key])


def plot_exploration(
    run_dir: PathLike,
    out_path: PathLike,
    x_key: str,
    y_key: str,
    phases: int = 5,
    member: int | None = None,
) -> Path:
    """Scatter of the states a run visited (visits.jsonl), one panel per phase of training.

    Training steps [0, last recorded step] split into `phases` equal phases (a visit at a phase
    boundary opens the later phase; the last step closes the last one). `x_key` and `y_key` name
    scalar entries of the records' "state" or "env_steps" (e.g. x_position vs y_position for ant;
    x_position vs env_steps for a 1-D chain, position against time). Points are coloured by
    member, or only `member` is drawn. Returns `out_path`.
    """
    run_dir, out_path = Path(run_dir), Path(out_path)
    if phases < 1:
        raise ValueError(f"phases must be >= 1, got {phases}")
    path = run_dir / rundir.VISITS
    if rundir.log_file(path) is None:
        raise ValueError(f"{run_dir} has no visits.jsonl (or visits.jsonl.gz)")
    records = rundir.read_jsonl(path, [])
    if member is not None:
        members = sorted({int(record["member"]) for record in records})
        records = [record for record in records if int(record["member"]) == member]
        if not records:
            raise ValueError(f"{path} has no visits of member {member}; members: {members}")
    if not records:
        raise ValueError(f"{path} has no visits")
    state_keys = set.intersection(*(set(record["state"]) for record in records))
    available = ["env_steps"] + sorted(state_keys)
    unknown = [key for key in (x_key, y_key) if key not in available]
    if unknown:
        raise ValueError(
            f"unknown key {', '.join(map(repr, unknown))} for {path}; available: {', '.join(available)}"
        )

    steps = np.array([record["env_steps"] for record in records], dtype=np.float64)
    xs = np.array([_visit_value(record, x_key) for record in records])
    ys = np.array([_visit_value(record, y_key) for record in records])
    owners = np.array([int(record["member"]) for record in records])
    edges = np.linspace(0.0, max(steps.max(), 1.0), phases + 1)
    phase_of = np.clip(np.searchsorted(edges, steps, side="right") - 1, 0, phases - 1)

    labels = {
        int(record["member"]): f"member {record['member']} ({record.get('label', '?')}, seed {record.get('seed', '?')})"
        for record in records
    }
    figure = Figure(figsize=(3.0 * phases + 0.6, 3.6), layout="constrained")
    panels = figure.subplots(1, phases, sharex=True, sharey=True, squeeze=False)[0]
    colours = [f"C{i % 10}" for i in range(len(labels))]
    for phase, axes in enumerate(panels):
        for colour, owner in zip(colours, sorted(labels)):
            chosen = (phase_of == phase) & (owners == owner)
            label = labels[owner] if phase == 0 else None
            axes.scatter(xs[chosen], ys[chosen], s=5, color=colour, alpha=0.6, label=label)
        axes.set_title(f"phase {phase + 1}: {edges[phase]:,.0f}-{edges[phase + 1]:,.0f} steps", fontsize=9)
        axes.set_xlabel(x_key)
        axes.grid(alpha=0.3)
    panels[0].set_ylabel(y_key)
    figure.suptitle(f"{rundir.run_task(run_dir)}: visited {y_key} vs {x_key}")
    figure.legend(loc="outside lower center", ncols=min(len(labels), 5), fontsize=8, markerscale=2)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    save_png(figure, out_path, dpi=100)
    return out_path
