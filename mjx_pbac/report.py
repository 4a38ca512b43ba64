"""Finished runs in, the paper's tables and figures out (paper Tables 1 and 2, reward and success curves; docs/design.md "Statistics").

Reads run directories from disk only (it never imports the training loop or JAX):

  RUN_DIR/config.json   {"profile", "algorithm", "config": {"train": {"env", ...}, ...},
                         "members": [{"index", "seed", "label", "overrides"}, ...]}
  RUN_DIR/eval.jsonl    per member per evaluation: {"env_steps", "member", "seed", "label",
                         "return_mean", ...}, and "success_rate" for envs that report success
                         (Meta-World)
  RUN_DIR/summary.json  {"status": "finished" | "interrupted" | "diverged", ...}
  RUN_DIR/visits.jsonl  per member per recorded visit: {"env_steps", "member", "seed", "label",
                         "state": {"x_position", ...}} (only `plot_exploration` reads it)

The task of a member is its "task" in config.json (runs that train several tasks, `--tasks`), else
the run's `config.train.env`; the method of a member is its label, so members with the
same label are seeds of one configuration, and several run directories (one per algorithm, per
task, or per batch of seeds) may fill one table. A seed is identified by the member's "seed".
With `by_run`, the method is RUN/LABEL (RUN the run directory's name, e.g. `u8/pbac`): runs of the
same task and algorithm with other settings (command-line options do not change a label) are
then methods side by side, not seeds of one.

- `load_runs`: the per-seed evaluation curves of every (task, method), checked for consistency;
- `results_tables`: Markdown and LaTeX tables, (a) final episode reward and (b) AULC, as
  "IQM [lower, upper]" with the bold rule of `stats.bold` (paper Table 1); for the tasks whose
  every evaluation carries a success rate (Meta-World), (a) final episode success rate and (b)
  area under the success rate curve as "mean ± std" over seeds instead, bold by the best mean
  (paper Table 2);
- `plot_curves`: one PNG per task, IQM line and interquartile band per method (a success task:
  mean success rate and a ± std band);
- `plot_exploration`: the states a run visited, one scatter panel per phase of training;
- `write_report`: all of the above into one directory.

Figures are drawn on `matplotlib.figure.Figure` directly (Agg canvas, no pyplot and no display).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from mjx_pbac import stats

PathLike = str | Path


@dataclasses.dataclass(frozen=True)
class MethodCurves:
    """The evaluation curves of one method on one task: seeds x evaluation points."""

    task: str
    method: str
    env_steps: np.ndarray
    """[P] env steps of the evaluation points, shared by every seed."""
    seeds: tuple[int, ...]
    """[S] seed ids, ascending; row i of `returns` is seed `seeds[i]`."""
    returns: np.ndarray
    """[S, P] each seed's mean evaluation return (over its evaluation episodes) at each point."""
    sources: tuple[str, ...]
    """[S] the run directory each seed came from."""
    unfinished: tuple[str, ...] = ()
    """Statuses of source runs that did not finish (interrupted, failed, killed, ...); the
    tables mark such a cell with a dagger."""
    success: np.ndarray | None = None
    """[S, P] each seed's success rate (fraction of its evaluation episodes that succeeded) at
    each point, for envs that report success (Meta-World); None otherwise."""
    wall_s: np.ndarray | None = None
    """[S, P] the seed's run's wall-clock seconds when the policy of each point existed (eval
    rows' `wall_s`: compiles, evaluations and checkpoints included); NaN at points whose rows
    carry none (logs from before the clocks existed); None when no point carries one."""
    train_s: np.ndarray | None = None
    """[S, P] the same in training seconds (eval rows' `train_s`: the training chunks alone)."""

    def final_success(self) -> dict[int, float]:
        """Seed -> success rate at the last evaluation point (paper Table 2 (a))."""
        return {seed: float(value) for seed, value in zip(self.seeds, self._success()[:, -1])}

    def success_aulcs(self) -> dict[int, float]:
        """Seed -> area under the success rate curve, its mean over the evaluation points as
        `stats.aulc` (paper Table 2 (b))."""
        return {seed: float(value) for seed, value in zip(self.seeds, stats.aulc(self._success()))}

    def _success(self) -> np.ndarray:
        if self.success is None:
            raise ValueError(f"{self.task} / {self.method}: the evaluations carry no success rate")
        return self.success

    def final_rewards(self) -> dict[int, float]:
        """Seed -> mean evaluation return at the last evaluation point."""
        return {seed: float(value) for seed, value in zip(self.seeds, self.returns[:, -1])}

    def aulcs(self) -> dict[int, float]:
        """Seed -> area under the learning curve (`stats.aulc`)."""
        return {seed: float(value) for seed, value in zip(self.seeds, stats.aulc(self.returns))}


@dataclasses.dataclass(frozen=True)
class Curves:
    """Every (task, method) found in a set of run directories, plus notes for the report."""

    entries: dict[tuple[str, str], MethodCurves]
    tasks: tuple[str, ...]
    """Rows, in the order the run directories first name them."""
    methods: tuple[str, ...]
    """Columns, in the order the run directories first name them."""
    run_dirs: tuple[str, ...]
    notes: tuple[str, ...]
    """Things a reader must know (unfinished runs, members without evaluations, skipped lines)."""

    def get(self, task: str, method: str) -> MethodCurves | None:
        return self.entries.get((task, method))

    @property
    def success_tasks(self) -> tuple[str, ...]:
        """Tasks whose every method carries success rates (Meta-World): reported as paper
        Table 2 (success), the others as Table 1 (return)."""
        return tuple(
            task
            for task in self.tasks
            if all(entry.success is not None for (t, _), entry in self.entries.items() if t == task)
        )

    @property
    def return_tasks(self) -> tuple[str, ...]:
        """Tasks reported by their evaluation return (paper Table 1)."""
        return tuple(task for task in self.tasks if task not in self.success_tasks)


# ---------------------------------------------------------------------------------------------
# Loading


def _read_jsonl(path: Path, notes: list[str]) -> list[dict[str, Any]]:
    records = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:  # e.g. the last line of a run killed mid-write
            notes.append(f"{path}: line {number} is not valid JSON and was skipped")
    return records


def _run_status(run_dir: Path) -> str | None:
    """The summary's status (`lifecycle.read_status`: "killed" for a run that says running but
    that no process holds), or None when the run has no (readable) summary.json."""
    from mjx_pbac.lifecycle import read_status

    return read_status(run_dir)


@dataclasses.dataclass(frozen=True)
class _SeedCurve:
    task: str
    method: str
    seed: int
    run_dir: str
    member: int
    env_steps: np.ndarray
    returns: np.ndarray
    status: str = "finished"
    success: np.ndarray | None = None
    wall_s: np.ndarray | None = None
    train_s: np.ndarray | None = None


def _load_run(run_dir: Path, notes: list[str], by_run: bool = False) -> list[_SeedCurve]:
    """The curves of every member of one run directory (raises ValueError on a malformed one);
    `by_run`: each method named RUN/LABEL after the directory."""
    record = json.loads((run_dir / "config.json").read_text())
    try:
        task = str(record["config"]["train"]["env"])
        members = {int(member["index"]): member for member in record["members"]}
    except (KeyError, TypeError) as error:
        raise ValueError(
            f"{run_dir}/config.json lacks config.train.env or members[index, seed, label] ({error!r})"
        ) from None

    points: dict[int, dict[int, float]] = {index: {} for index in members}
    success: dict[int, dict[int, float]] = {index: {} for index in members}
    clocks: dict[int, dict[int, tuple[float, float]]] = {index: {} for index in members}
    for evaluation in _read_jsonl(run_dir / "eval.jsonl", notes):
        index = int(evaluation["member"])
        if index not in members:
            raise ValueError(f"{run_dir}/eval.jsonl has member {index}, which config.json does not list")
        member = members[index]
        for key in ("seed", "label"):
            if key in evaluation and evaluation[key] != member[key]:
                raise ValueError(
                    f"{run_dir}/eval.jsonl: member {index} has {key} {evaluation[key]!r}, "
                    f"config.json says {member[key]!r}"
                )
        steps = int(evaluation["env_steps"])
        if steps in points[index]:
            raise ValueError(f"{run_dir}/eval.jsonl: member {index} is evaluated twice at {steps} env steps")
        points[index][steps] = float(evaluation["return_mean"])
        if "success_rate" in evaluation:
            success[index][steps] = float(evaluation["success_rate"])
        if "wall_s" in evaluation:
            clocks[index][steps] = (float(evaluation["wall_s"]), float(evaluation.get("train_s", math.nan)))

    status = _run_status(run_dir)
    if status is None:
        notes.append(
            f"{run_dir} has no summary.json (still running or crashed): its curves are included as they are"
        )
    elif status == "running":
        notes.append(f"{run_dir} is still running: its curves so far are included (marked †)")
    elif status != "finished":
        notes.append(f"{run_dir} is {status}, not finished: its curves are included as they are (marked †)")

    curves = []
    for index, member in sorted(members.items()):
        if not points[index]:
            notes.append(
                f"{run_dir}: member {index} ({member['label']}, seed {member['seed']}) "
                "has no evaluations and is left out"
            )
            continue
        steps = np.array(sorted(points[index]), dtype=np.int64)
        returns = np.array([points[index][step] for step in steps], dtype=np.float64)
        member_task = str(member.get("task") or task)  # runs that train several tasks name each member's
        member_success = None
        if len(success[index]) == len(steps):
            member_success = np.array([success[index][step] for step in steps], dtype=np.float64)
        elif success[index]:
            notes.append(
                f"{run_dir}: member {index} ({member['label']}, seed {member['seed']}) has a success rate at "
                f"{len(success[index])} of its {len(steps)} evaluations; its success rates are left out"
            )
        wall = train = None
        if clocks[index]:
            times = np.array([clocks[index].get(int(step), (math.nan, math.nan)) for step in steps], dtype=np.float64)
            wall, train = times[:, 0], times[:, 1]
        method = f"{run_dir.name}/{member['label']}" if by_run else str(member["label"])
        curves.append(
            _SeedCurve(
                member_task, method, int(member["seed"]), str(run_dir), index, steps, returns,
                status or "no summary", member_success, wall, train,
            )
        )
    return curves


def _describe_steps(steps: np.ndarray) -> str:
    return f"{len(steps)} points, {steps[0]}..{steps[-1]}" if len(steps) else "no points"


def _check_points(task: str, method: str, seed_curves: list[_SeedCurve]) -> str | None:
    """A message when the seeds of one method were not evaluated at the same env steps."""
    reference = seed_curves[0]
    differing = [
        curve for curve in seed_curves[1:] if not np.array_equal(curve.env_steps, reference.env_steps)
    ]
    if not differing:
        return None
    lines = [
        f"{task} / {method}: seeds have different evaluation points; "
        f"seed {reference.seed} ({reference.run_dir}) has {_describe_steps(reference.env_steps)}"
    ]
    for curve in differing:
        only_here = sorted(set(curve.env_steps.tolist()) - set(reference.env_steps.tolist()))
        missing = sorted(set(reference.env_steps.tolist()) - set(curve.env_steps.tolist()))
        lines.append(
            f"  seed {curve.seed} ({curve.run_dir}) has {_describe_steps(curve.env_steps)}; "
            f"lacks {missing[:5]}{'...' if len(missing) > 5 else ''}, "
            f"extra {only_here[:5]}{'...' if len(only_here) > 5 else ''}"
        )
    return "\n".join(lines)


def load_runs(run_dirs: PathLike | Iterable[PathLike], by_run: bool = False) -> Curves:
    """Loads the per-seed evaluation curves of every (task, method) in `run_dirs` (`by_run`: a
    method per run directory and label, named RUN/LABEL; see the module docstring).

    Refuses (ValueError, naming the directories) a directory without config.json or eval.jsonl,
    two runs (or two members) that give the same (task, method, seed), and seeds of one method
    whose evaluation points differ. Runs whose summary.json status is not "finished" (or that have
    none) are included, with a note in `Curves.notes` that the report prints.
    """
    if isinstance(run_dirs, (str, Path)):
        run_dirs = [run_dirs]
    directories = [Path(run_dir) for run_dir in run_dirs]
    if not directories:
        raise ValueError("load_runs needs at least one run directory")
    missing = [
        f"{directory} has no {name}"
        for directory in directories
        for name in ("config.json", "eval.jsonl")
        if not (directory / name).is_file()
    ]
    if missing:
        raise ValueError("not run directories:\n  " + "\n  ".join(missing))

    notes: list[str] = []
    grouped: dict[tuple[str, str], dict[int, _SeedCurve]] = {}
    tasks: list[str] = []
    methods: list[str] = []
    duplicates = []
    for directory in directories:
        for curve in _load_run(directory, notes, by_run):
            seeds = grouped.setdefault((curve.task, curve.method), {})
            if curve.seed in seeds:
                other = seeds[curve.seed]
                duplicates.append(
                    f"({curve.task}, {curve.method}, seed {curve.seed}) comes from both "
                    f"{other.run_dir} (member {other.member}) and {curve.run_dir} (member {curve.member})"
                )
                continue
            seeds[curve.seed] = curve
            if curve.task not in tasks:
                tasks.append(curve.task)
            if curve.method not in methods:
                methods.append(curve.method)
    if duplicates:
        raise ValueError(
            "the same seed appears twice (runs with other settings? `train.py report --by-run True` names each "
            "method after its run directory):\n  " + "\n  ".join(duplicates)
        )

    entries = {}
    mismatches = []
    for (task, method), seeds in grouped.items():
        seed_curves = [seeds[seed] for seed in sorted(seeds)]
        message = _check_points(task, method, seed_curves)
        if message:
            mismatches.append(message)
            continue
        with_success = [curve.success is not None for curve in seed_curves]
        if any(with_success) and not all(with_success):
            lacking = [curve.seed for curve in seed_curves if curve.success is None]
            notes.append(f"{task} / {method}: seeds {lacking} carry no success rate; the method is reported by return")
        timed = any(curve.wall_s is not None for curve in seed_curves)

        def clock(curve: _SeedCurve, name: str) -> np.ndarray:
            values = getattr(curve, name)
            return np.full(len(curve.env_steps), math.nan) if values is None else values

        entries[(task, method)] = MethodCurves(
            task=task,
            method=method,
            env_steps=seed_curves[0].env_steps,
            seeds=tuple(curve.seed for curve in seed_curves),
            returns=np.stack([curve.returns for curve in seed_curves]),
            sources=tuple(curve.run_dir for curve in seed_curves),
            unfinished=tuple(sorted({curve.status for curve in seed_curves} - {"finished"})),
            success=np.stack([curve.success for curve in seed_curves]) if all(with_success) else None,
            wall_s=np.stack([clock(curve, "wall_s") for curve in seed_curves]) if timed else None,
            train_s=np.stack([clock(curve, "train_s") for curve in seed_curves]) if timed else None,
        )
    if mismatches:
        raise ValueError("\n".join(mismatches))
    for task in tasks:
        kinds = {entry.success is not None for (t, _), entry in entries.items() if t == task}
        if kinds == {True, False}:
            lacking = [m for (t, m), entry in entries.items() if t == task and entry.success is None]
            notes.append(
                f"{task}: {', '.join(lacking)} carry no success rate, so the task is reported by return, not success"
            )
    return Curves(entries, tuple(tasks), tuple(methods), tuple(str(d) for d in directories), tuple(notes))


# ---------------------------------------------------------------------------------------------
# Tables


def _decimals(*values: float) -> int:
    """Digits after the point: none from 100 up (977), one from 1 (10.0, -2.8), then three
    significant digits (0.0123), like the paper's Table 1."""
    scale = max((abs(value) for value in values if math.isfinite(value)), default=0.0)
    if scale >= 100:
        return 0
    if scale >= 1 or scale == 0:
        return 1
    return min(6, 2 - math.floor(math.log10(scale)))


def _number(value: float, decimals: int) -> str:
    if not math.isfinite(value):
        return str(value)
    text = f"{value:.{decimals}f}"
    return text[1:] if re.fullmatch(r"-0\.?0*", text) else text  # no "-0"


def format_cell(score: tuple[float, float, float]) -> str:
    """"IQM [lower, upper]" with one rounding for the three numbers (`_decimals`)."""
    decimals = _decimals(*score)
    middle, lower, upper = (_number(value, decimals) for value in score)
    return f"{middle} [{lower}, {upper}]"


def format_mean_std(score: tuple[float, float]) -> str:
    """"mean ± std" of success rates with two decimals, as the paper's Table 2 prints them
    (fractions in [0, 1], e.g. 0.88 ± 0.16)."""
    mean, std = (_number(value, 2) for value in score)
    return f"{mean} ± {std}"


@dataclasses.dataclass(frozen=True)
class _Table:
    """One paper table (a pair of metrics) and how its cells read."""

    metrics: tuple[tuple[str, str, Any], ...]
    """(LaTeX label key, title, per-seed values of a MethodCurves) per sub-table."""
    location: str
    """How the best method is found (`stats.bold`): "iqm" or "mean"."""
    summary: str
    """The caption's statistic: "IQM" or "Mean ± std"."""
    rule: str
    """The caption after the seed count."""
    cell: Any
    """Per-seed values -> cell text."""


_RULE = (
    "with [25%, 75%] quantiles. Bold: the highest IQM and every method not significantly worse "
    "(one-sided paired t-test over the shared seeds, p >= 0.05)."
)
_SUCCESS_RULE = (
    "of the success rate (fraction of the evaluation episodes that succeeded; AULC: per seed, the mean "
    "over evaluation points). Bold: the highest mean and every method not significantly worse "
    "(one-sided paired t-test over the shared seeds, p >= 0.05)."
)

_RETURN_TABLE = _Table(
    metrics=(
        ("final", "(a) Final episode reward", MethodCurves.final_rewards),
        ("aulc", "(b) Area under learning curve", MethodCurves.aulcs),
    ),
    location="iqm",
    summary="IQM",
    rule=_RULE,
    cell=lambda values: format_cell(stats.iqm(values)),
)
"""Paper Table 1: evaluation return."""

_SUCCESS_TABLE = _Table(
    metrics=(
        ("success_final", "(a) Final episode success rate", MethodCurves.final_success),
        ("success_aulc", "(b) Area under success rate curve", MethodCurves.success_aulcs),
    ),
    location="mean",
    summary="Mean ± std",
    rule=_SUCCESS_RULE,
    cell=lambda values: format_mean_std(stats.mean_std(values)),
)
"""Paper Table 2: Meta-World's success rate."""

_METRICS = _RETURN_TABLE.metrics


def _tables(curves: Curves) -> list[tuple[_Table, tuple[str, ...]]]:
    """The tables to write and their rows: return tasks as Table 1, success tasks as Table 2."""
    tables = [(_RETURN_TABLE, curves.return_tasks), (_SUCCESS_TABLE, curves.success_tasks)]
    return [(table, tasks) for table, tasks in tables if tasks]


def _rows(
    curves: Curves, per_seed, tasks: Sequence[str] | None = None, table: _Table = _RETURN_TABLE
) -> list[tuple[str, list[tuple[str, bool] | None]]]:
    """Per task (default: every task): per method, (cell text, bold) or None when the pair was not run."""
    rows = []
    for task in curves.tasks if tasks is None else tasks:
        values = {
            method: per_seed(curves.entries[(task, method)])
            for method in curves.methods
            if (task, method) in curves.entries
        }
        bolded = stats.bold(values, location=table.location)

        def text(method):
            dagger = "†" if curves.entries[(task, method)].unfinished else ""  # noqa: B023 - called in this iteration
            return table.cell(list(values[method].values())) + dagger  # noqa: B023 - called in this iteration

        cells = [(text(method), method in bolded) if method in values else None for method in curves.methods]
        rows.append((task, cells))
    return rows


def _seed_line(curves: Curves, tasks: Sequence[str] | None = None, summary: str = "IQM") -> str:
    counts = {
        (task, method): len(entry.seeds)
        for (task, method), entry in curves.entries.items()
        if tasks is None or task in tasks
    }
    most = max(counts.values())
    if min(counts.values()) == most:
        return f"{summary} over {most} seeds"
    fewer = ", ".join(f"{task}/{method}: {n}" for (task, method), n in counts.items() if n < most)
    return f"{summary} over up to {most} seeds (fewer in {fewer})"


def _any_unfinished(curves: Curves) -> bool:
    return any(entry.unfinished for entry in curves.entries.values())


def _markdown(curves: Curves) -> str:
    def escape(text: str) -> str:
        return text.replace("|", "\\|")

    unfinished = " †: from a run that did not finish (see Notes)." if _any_unfinished(curves) else ""
    lines = ["# Results", ""]
    for table, tasks in _tables(curves):
        if table is _SUCCESS_TABLE:
            lines += ["## Success rate (paper Table 2)", ""]
        lines += [f"{_seed_line(curves, tasks, table.summary)} {table.rule} '-': not run.{unfinished}", ""]
        for _, title, per_seed in table.metrics:
            lines += [f"## {title}", ""]
            lines.append("| Task | " + " | ".join(escape(method) for method in curves.methods) + " |")
            lines.append("|---|" + "---|" * len(curves.methods))
            for task, cells in _rows(curves, per_seed, tasks, table):
                texts = ["-" if cell is None else (f"**{cell[0]}**" if cell[1] else cell[0]) for cell in cells]
                lines.append(f"| {escape(task)} | " + " | ".join(texts) + " |")
            lines.append("")
    if curves.notes:
        lines += ["## Notes", ""] + [f"- Note: {note}" for note in curves.notes] + [""]
    return "\n".join(lines)


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def _latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(character, character) for character in text)


def _latex(curves: Curves) -> str:
    lines = ["% Results tables (needs \\usepackage{booktabs}); written by mjx_pbac.report."]
    lines += [f"% Note: {note}" for note in curves.notes]
    for table, tasks, (key, title, per_seed) in ((t, ts, m) for t, ts in _tables(curves) for m in t.metrics):
        rule = _latex_escape(table.rule).replace("p >= 0.05", "$p \\geq 0.05$")
        seeds = _latex_escape(_seed_line(curves, tasks, table.summary)).replace("±", "$\\pm$")
        dagger = " $^\\dagger$: from a run that did not finish." if _any_unfinished(curves) else ""
        caption = f"{_latex_escape(title)} ($\\uparrow$). {seeds} {rule} -: not run.{dagger}"
        lines += [
            "",
            "\\begin{table}[t]",
            "  \\centering",
            f"  \\caption{{{caption}}}",
            f"  \\label{{tab:results_{key}}}",
            f"  \\begin{{tabular}}{{l{'c' * len(curves.methods)}}}",
            "    \\toprule",
            "    Task & " + " & ".join(_latex_escape(method) for method in curves.methods) + " \\\\",
            "    \\midrule",
        ]
        for task, cells in _rows(curves, per_seed, tasks, table):
            texts = [
                "-" if cell is None
                else (f"\\textbf{{{cell[0]}}}" if cell[1] else cell[0]).replace("†", "$^\\dagger$").replace("±", "$\\pm$")
                for cell in cells
            ]
            lines.append(f"    {_latex_escape(task)} & " + " & ".join(texts) + " \\\\")
        lines += ["    \\bottomrule", "  \\end{tabular}", "\\end{table}"]
    return "\n".join(lines) + "\n"


def results_tables(curves: Curves) -> tuple[str, str]:
    """(markdown, latex): (a) final episode reward and (b) AULC, like the paper's Table 1, and
    for the success tasks (`Curves.success_tasks`, Meta-World) (a) final episode success rate and
    (b) area under the success rate curve, like the paper's Table 2.

    Rows are tasks, columns methods. A Table 1 cell is "IQM [lower, upper]" across seeds
    (`stats.iqm`) of the per-seed mean return at the last evaluation point, or of the per-seed
    AULC; a Table 2 cell is "mean ± std" across seeds (`stats.mean_std`) of the per-seed success
    rate at the last evaluation point, or of its mean over the evaluation points. Bold
    (**x** / \\textbf{x}) per row as `stats.bold` decides (by the IQM, or the mean for Table 2);
    "-" where a (task, method) was not run. A caption line gives the number of seeds; the notes of
    `curves` follow (Markdown) or lead as comments (LaTeX).
    """
    if not curves.entries:
        raise ValueError("no evaluations to tabulate")
    return _markdown(curves), _latex(curves)


# ---------------------------------------------------------------------------------------------
# Time to score

CLOCKS = {"steps": "env steps", "wall": "wall-clock (min)", "train": "training time (min)"}
"""The x axes a curve can be drawn against (`plot_curves`): env steps, or one of a run's clocks
(eval rows' `wall_s`, `train_s`; `mjx_pbac.runner.Clocks`)."""


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


# ---------------------------------------------------------------------------------------------
# Figures


def _file_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "task"


def _iqm_band(returns: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per evaluation point (columns of [S, P]): IQM, 25% and 75% quantile across seeds."""
    scores = np.array([stats.iqm(returns[:, point]) for point in range(returns.shape[1])])
    return scores[:, 0], scores[:, 1], scores[:, 2]


def _mean_std_band(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per evaluation point (columns of [S, P]): mean, mean - std and mean + std across seeds
    (`stats.mean_std`)."""
    scores = np.array([stats.mean_std(values[:, point]) for point in range(values.shape[1])])
    return scores[:, 0], scores[:, 0] - scores[:, 1], scores[:, 0] + scores[:, 1]


def _x_values(entry: MethodCurves, x: str) -> np.ndarray | None:
    """[P] where each evaluation point of `entry` lies on axis `x` (`CLOCKS`): env steps, or the
    latest seed's clock in minutes (NaN where a seed's is unknown); None when the logs carry no
    clock."""
    if x == "steps":
        return entry.env_steps.astype(np.float64)
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

    x is env steps, or with `x` "wall" / "train" the run's wall-clock / training time in minutes
    (files curves_wall_<task>.png, curves_train_<task>.png; methods whose logs carry no clock are
    left out and named in the legend's title). `scores` (task -> values) draws each task's scores
    as dashed lines."""
    if x not in CLOCKS:
        raise ValueError(f"unknown x axis {x!r}; valid: {', '.join(CLOCKS)}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    success_tasks = curves.success_tasks
    for task in curves.tasks:
        success = task in success_tasks
        figure = Figure(figsize=(6.4, 4.2), layout="constrained")
        axes = figure.add_subplot()
        untimed = []
        for method in curves.methods:
            entry = curves.get(task, method)
            if entry is None:
                continue
            xs = _x_values(entry, x)
            if xs is None:
                untimed.append(method)
                continue
            if success:
                middle, lower, upper = _mean_std_band(entry.success)
            else:
                middle, lower, upper = _iqm_band(entry.returns)
            known = ~np.isnan(xs)
            (line,) = axes.plot(xs[known], middle[known], label=f"{method} ({len(entry.seeds)} seeds)")
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
        axes.legend(title=f"no clock in the logs: {', '.join(untimed)}" if untimed else None, title_fontsize=8)
        kind = "success" if success else "curves"
        path = out_dir / (f"{kind}_{_file_name(task)}.png" if x == "steps" else f"{kind}_{x}_{_file_name(task)}.png")
        figure.savefig(path, dpi=110)
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
    path = run_dir / "visits.jsonl"
    if not path.is_file():
        raise ValueError(f"{run_dir} has no visits.jsonl")
    records = _read_jsonl(path, [])
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
    figure.suptitle(f"{_run_task(run_dir)}: visited {y_key} vs {x_key}")
    figure.legend(loc="outside lower center", ncols=min(len(labels), 5), fontsize=8, markerscale=2)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out_path, dpi=100)
    return out_path


def _run_task(run_dir: Path) -> str:
    try:
        return str(json.loads((run_dir / "config.json").read_text())["config"]["train"]["env"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError):
        return run_dir.name


# ---------------------------------------------------------------------------------------------
# Everything at once


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
) -> dict[str, Path | list[Path]]:
    """Writes results.md (the tables, the time-to-score table, notes, figure links), results.tex,
    time_to_score.json (`time_to_score` with `scores` and `score_fractions`), the curves against
    each axis of `x` (`plot_curves`: "steps" curves_<task>.png, a success task
    success_<task>.png; "wall", "train" curves_wall_<task>.png, ...; the scores drawn as dashed
    lines) and, when `exploration` is given (an ExplorationPlot or a dict of its fields),
    exploration.png; a list of them gives exploration_<i>_<task>.png each (and a list under
    "exploration"). `by_run`: methods named RUN/LABEL, one per run directory (`load_runs`).

    Returns {"markdown": path, "latex": path, "time_to_score": path, "curves": [paths, one per
    task and axis], "exploration": path (if drawn)}.
    """
    out_dir = Path(out_dir)
    unknown = [axis for axis in x if axis not in CLOCKS]
    if unknown or not x:
        raise ValueError(f"unknown x axis {', '.join(map(repr, unknown)) or '(none given)'}; valid: {', '.join(CLOCKS)}")
    curves = load_runs(run_dirs, by_run)  # refuses bad run directories before anything is written
    score_rows = time_to_score(curves, scores, score_fractions)
    out_dir.mkdir(parents=True, exist_ok=True)
    markdown, latex = results_tables(curves)
    drawn: dict[str, list[float]] = {}
    for row in score_rows:
        if row.score is not None and row.score not in drawn.setdefault(row.task, []):
            drawn[row.task].append(row.score)
    written: dict[str, Path | list[Path]] = {
        "curves": [path for axis in dict.fromkeys(x) for path in plot_curves(curves, out_dir, axis, drawn)]
    }
    figures = [path.name for path in written["curves"]]
    if exploration is not None:
        single = isinstance(exploration, (ExplorationPlot, Mapping))
        plots = [exploration] if single else list(exploration)
        paths = []
        for index, plot in enumerate(plots):
            if isinstance(plot, Mapping):
                plot = ExplorationPlot(**plot)
            name = "exploration.png" if single else f"exploration_{index}_{_file_name(_run_task(Path(plot.run_dir)))}.png"
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
