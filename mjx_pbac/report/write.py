"""Everything at once: `write_report` loads the runs and writes the tables, the time-to-score
table, the curves and the exploration figures into one directory."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mjx_pbac import rundir
from mjx_pbac.report.figures import CLOCKS, _file_name, plot_curves, plot_exploration
from mjx_pbac.report.runs import PathLike, load_runs
from mjx_pbac.report.scores import time_to_score, time_to_score_markdown
from mjx_pbac.report.tables import results_tables


@dataclasses.dataclass(frozen=True)
class ExplorationPlot:
    """What `write_report` passes to `plot_exploration` (out_path is out_dir/exploration.png)."""

    run_dir: PathLike
    x_key: str
    y_key: str
    phases: int = 5
    member: int | None = None


def write_report(
    run_dirs: PathLike | Sequence[PathLike],
    out_dir: PathLike,
    exploration: ExplorationPlot | Mapping[str, Any] | Sequence[ExplorationPlot | Mapping[str, Any]] | None = None,
    x: Sequence[str] = ("steps",),
    scores: Mapping[str | None, float] | None = None,
    score_fractions: Sequence[float] = (1.0,),
    by_run: bool = False,
    frames: bool = False,
) -> dict[str, Path | list[Path]]:
    """Writes results.md (the tables, the time-to-score table, notes, figure links), results.tex,
    time_to_score.json (`time_to_score` with `scores` and `score_fractions`), the curves against
    each axis of `x` (`plot_curves`: "steps" curves_<task>.png, a success task
    success_<task>.png; "vector", "wall", "train" curves_vector_<task>.png, ...; the scores drawn as dashed
    lines) and, when `exploration` is given (an ExplorationPlot or a dict of its fields),
    exploration.png; a list of them gives exploration_<i>_<task>.png each (and a list under
    "exploration"). `by_run`: methods named RUN/LABEL, one per run directory (`load_runs`).
    `frames`: frames_<task>.png, moments of one evaluation episode of each task's final policy
    (the first method's first seed: `video.frame_strip`), drawn first, since they are what can
    fail (no OpenGL backend) and take minutes (the policy's rollout compiles).

    Returns {"markdown": path, "latex": path, "time_to_score": path, "curves": [paths, one per
    task and axis], "exploration": path (if drawn), "frames": [paths, one per task] (if drawn)}.
    """
    out_dir = Path(out_dir)
    unknown = [axis for axis in x if axis not in CLOCKS]
    if unknown or not x:
        raise ValueError(f"unknown x axis {', '.join(map(repr, unknown)) or '(none given)'}; valid: {', '.join(CLOCKS)}")
    curves = load_runs(run_dirs, by_run)  # refuses bad run directories before anything is written
    score_rows = time_to_score(curves, scores, score_fractions)
    out_dir.mkdir(parents=True, exist_ok=True)
    strips = _frame_strips(curves, out_dir, by_run) if frames else []
    markdown, latex = results_tables(curves)
    drawn: dict[str, list[float]] = {}
    for row in score_rows:
        if row.score is not None and row.score not in drawn.setdefault(row.task, []):
            drawn[row.task].append(row.score)
    written: dict[str, Path | list[Path]] = {
        "curves": [path for axis in dict.fromkeys(x) for path in plot_curves(curves, out_dir, axis, drawn)]
    }
    figures = [path.name for path in written["curves"]]
    if frames:
        written["frames"] = strips
        figures += [path.name for path in strips]
    if exploration is not None:
        single = isinstance(exploration, (ExplorationPlot, Mapping))
        plots = [exploration] if single else list(exploration)
        paths = []
        for index, plot in enumerate(plots):
            if isinstance(plot, Mapping):
                plot = ExplorationPlot(**plot)
            name = "exploration.png" if single else f"exploration_{index}_{_file_name(rundir.run_task(Path(plot.run_dir)))}.png"
            paths.append(
                plot_exploration(plot.run_dir, out_dir / name, plot.x_key, plot.y_key, phases=plot.phases, member=plot.member)
            )
            figures.append(name)
        written["exploration"] = paths[0] if single else paths
    markdown += "\n" + time_to_score_markdown(score_rows)
    written["time_to_score"] = out_dir / "time_to_score.json"
    written["time_to_score"].write_text(json.dumps([row.as_record() for row in score_rows], indent=1) + "\n")
    markdown += "\n## Figures\n\n" + "\n".join(f"![{name}]({name})" for name in figures) + "\n"
    markdown += "\n## Runs\n\n" + "\n".join(f"- {run_dir}" for run_dir in curves.run_dirs) + "\n"
    written["markdown"] = out_dir / "results.md"
    written["markdown"].write_text(markdown)
    written["latex"] = out_dir / "results.tex"
    written["latex"].write_text(latex)
    return written


def _frame_strips(curves, out_dir: Path, by_run: bool) -> list[Path]:
    """frames_<task>.png for every task: its first method's first seed's run, newest checkpoint."""
    from mjx_pbac import video

    paths = []
    for task in curves.tasks:
        method = next(m for m in curves.methods if curves.get(task, m) is not None)
        entry = curves.get(task, method)
        label = method.split("/", 1)[1] if by_run else method
        try:
            paths.append(video.frame_strip(entry.sources[0], task, out_dir / f"frames_{_file_name(task)}.png", label))
        except rundir.RunError as error:  # video.RenderError too
            raise ValueError(f"--frames for {task}: {error}") from None
    return paths
