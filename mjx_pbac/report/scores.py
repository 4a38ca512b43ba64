"""Time to score: when the seeds of each method first reached a score on each task, and the
run's clocks there (`time_to_score`, one `ScoreTime` per task, method and fraction of the score;
`time_to_score_markdown`, its section of results.md). `parse_scores` reads `--score` entries; the
default score of a task is the paper's PBAC final value (`mjx_pbac.paper`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mjx_pbac import stats
from mjx_pbac.report.runs import Curves, MethodCurves
from mjx_pbac.report.tables import _decimals, _number


def parse_scores(entries: Sequence[str]) -> dict[str | None, float]:
    """`--score` entries -> {task: score}, the key None for a bare number that applies to every
    task: ("700",) -> {None: 700.0}; ("cartpole_swingup_sparse=700", "reacher_hard=800") ->
    per task. A ValueError says what is malformed."""
    scores: dict[str | None, float] = {}
    for entry in entries:
        task, sep, raw = str(entry).rpartition("=")
        key = task.strip() if sep else None
        if sep and not key:
            raise ValueError(f"malformed score {entry!r}: expected a number or TASK=NUMBER, e.g. 700 or reacher_hard=800")
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"malformed score {entry!r}: {raw.strip()!r} is not a number (expected NUMBER or TASK=NUMBER)") from None
        if not math.isfinite(value):
            raise ValueError(f"score {entry!r} is not finite")
        if key in scores:
            raise ValueError(f"score for {key or 'every task'} given twice")
        scores[key] = value
    return scores


@dataclasses.dataclass(frozen=True)
class ScoreTime:
    """When the seeds of a method first reached a score on a task (one row of the time-to-score
    table): the first evaluation point where the seeds' statistic (IQM of the evaluation returns;
    for a success task, the mean success rate) is >= `score`."""

    task: str
    method: str
    seeds: int
    statistic: str
    """"IQM return" or "mean success rate"."""
    score: float | None
    """The target; None when the task has no known score (nothing given, not in the paper)."""
    score_source: str
    """Where the target comes from: "paper PBAC final" (`mjx_pbac.paper`), "--score", or a
    fraction of either (e.g. "0.9 x paper PBAC final 785")."""
    env_steps: int | None
    """The first evaluation point at or above the score; None: not reached."""
    wall_s: float | None
    """The run's wall-clock at that point (the latest of the seeds' runs, when they came from
    several); None when not reached or the logs carry no clock there."""
    train_s: float | None
    """The same in training seconds."""
    best: float
    """The statistic's best value over the evaluation points..."""
    best_env_steps: int
    """...and where."""
    final: float
    """The statistic at the last evaluation point."""
    final_env_steps: int
    final_wall_s: float | None
    """The run's wall-clock at the last evaluation point (None when unknown)."""
    runs: tuple[str, ...]

    @property
    def reached(self) -> bool:
        return self.env_steps is not None

    def as_record(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "runs": list(self.runs), "reached": self.reached}


def _iqm_band(returns: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per evaluation point (columns of [S, P]): IQM, 25% and 75% quantile across seeds."""
    scores = np.array([stats.iqm(returns[:, point]) for point in range(returns.shape[1])])
    return scores[:, 0], scores[:, 1], scores[:, 2]


def _statistic(entry: MethodCurves, success: bool) -> np.ndarray:
    """[P] the seeds' statistic at each evaluation point: the IQM of the returns, or (a success
    task) the mean success rate."""
    if success:
        return entry.success.mean(axis=0)
    return _iqm_band(entry.returns)[0]


def _clock_at(values: np.ndarray | None, point: int) -> float | None:
    """The latest seed's clock at `point` ([S, P]); None if any seed's is unknown there."""
    if values is None:
        return None
    column = values[:, point]
    return None if np.isnan(column).any() else float(column.max())


def time_to_score(
    curves: Curves,
    scores: Mapping[str | None, float] | None = None,
    fractions: Sequence[float] = (1.0,),
) -> list[ScoreTime]:
    """One row per task, method and fraction: when the seeds first reached `fraction` x the
    task's score. The score is `scores[task]`, else `scores[None]` (every task), else the
    paper's PBAC final value on the task (`mjx_pbac.paper.score`); a task with none gets rows
    with score None (not reached). Not reaching a score is a value (`env_steps` None), never an
    error."""
    from mjx_pbac import paper

    scores = dict(scores or {})
    for fraction in fractions:
        if not (math.isfinite(fraction) and fraction > 0):
            raise ValueError(f"score fractions must be finite and > 0, got {fraction}")
    rows = []
    success_tasks = curves.success_tasks
    for task in curves.tasks:
        success = task in success_tasks
        if task in scores or None in scores:
            base, source = scores.get(task, scores.get(None)), "--score"
        else:
            base, source = paper.score(task), "paper PBAC final"
        for method in curves.methods:
            entry = curves.get(task, method)
            if entry is None:
                continue
            statistic = _statistic(entry, success)
            best = int(np.argmax(statistic))
            for fraction in fractions if base is not None else (1.0,):  # no score: one row
                target = None if base is None else fraction * base
                label = source if fraction == 1.0 or base is None else f"{fraction:g} x {source} {base:g}"
                hits = [] if target is None else np.flatnonzero(statistic >= target)
                point = int(hits[0]) if len(hits) else None
                rows.append(
                    ScoreTime(
                        task=task,
                        method=method,
                        seeds=len(entry.seeds),
                        statistic="mean success rate" if success else "IQM return",
                        score=target,
                        score_source=label,
                        env_steps=None if point is None else int(entry.env_steps[point]),
                        wall_s=None if point is None else _clock_at(entry.wall_s, point),
                        train_s=None if point is None else _clock_at(entry.train_s, point),
                        best=float(statistic[best]),
                        best_env_steps=int(entry.env_steps[best]),
                        final=float(statistic[-1]),
                        final_env_steps=int(entry.env_steps[-1]),
                        final_wall_s=_clock_at(entry.wall_s, len(entry.env_steps) - 1),
                        runs=tuple(dict.fromkeys(entry.sources)),
                    )
                )
    return rows


def _minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.1f} min"


def _value(value: float, success: bool) -> str:
    return f"{value:.2f}" if success else _number(value, _decimals(value))


def time_to_score_markdown(rows: Sequence[ScoreTime]) -> str:
    """The time-to-score table as Markdown (a section of results.md)."""
    lines = [
        "## Time to score",
        "",
        "The first evaluation point at which the seeds' statistic (IQM of the evaluation return; "
        "success tasks: mean success rate) reached the score, and the run's clocks there: wall-clock "
        "(since the run began: compiles, evaluations and checkpoints included) and training time "
        "(the training chunks alone). Seeds from several runs: the latest run's clock. "
        "The default score is the paper's PBAC final value on the task (`mjx_pbac/paper.py`).",
        "",
        "| Task | Method | Seeds | Score | Reached at env step | Wall-clock | Training time | Best (env step) | Final (wall-clock) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        success = row.statistic == "mean success rate"
        score = "none known" if row.score is None else f"{_value(row.score, success)} ({row.score_source})"
        if row.reached:
            cells = [f"{row.env_steps:,}", _minutes(row.wall_s), _minutes(row.train_s)]
        else:
            cells = ["not reached", "-", "-"]
        best = f"{_value(row.best, success)} ({row.best_env_steps:,})"
        final = f"{_value(row.final, success)} ({_minutes(row.final_wall_s)})"
        lines.append(
            f"| {row.task} | {row.method.replace('|', chr(92) + '|')} | {row.seeds} | {score} | "
            + " | ".join(cells) + f" | {best} | {final} |"
        )
    return "\n".join(lines) + "\n"
