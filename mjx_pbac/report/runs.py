"""Run directories in, the per-seed evaluation curves of every (task, method) out (`load_runs`).

Reads run directories from disk only (it never imports the training loop or JAX):

  RUN_DIR/config.json   {"profile", "algorithm", "config": {"train": {"env", ...}, ...},
                         "members": [{"index", "seed", "label", "overrides"}, ...]}
  RUN_DIR/eval.jsonl    per member per evaluation: {"env_steps", "member", "seed", "label",
                         "return_mean", ...}, and "success_rate" for envs that report success
                         (Meta-World)
  RUN_DIR/summary.json  {"status": "finished" | "interrupted" | "diverged", ...}
  RUN_DIR/visits.jsonl  per member per recorded visit: {"env_steps", "member", "seed", "label",
                         "state": {"x_position", ...}} (only `figures.plot_exploration` reads it)

The task of a member is its "task" in config.json (runs that train several tasks, `--tasks`), else
the run's `config.train.env`; the method of a member is its label, so members with the
same label are seeds of one configuration, and several run directories (one per algorithm, per
task, or per batch of seeds) may fill one table. A seed is identified by the member's "seed".
With `by_run`, the method is RUN/LABEL (RUN the run directory's name, e.g. `u8/pbac`): runs of the
same task and algorithm with other settings (command-line options do not change a label) are
then methods side by side, not seeds of one.

The run directory's files are read through `mjx_pbac.rundir`; a log kept compressed (`gzip
eval.jsonl`, as the runs kept as evidence are) reads the same as the plain file.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from mjx_pbac import rundir, stats

PathLike = str | Path


# ---------------------------------------------------------------------------------------------
# The curves


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
    num_envs: int | None = None
    """Env instances per seed (config.json's `train.num_envs`) shared by every seed's run, so that
    `env_steps / num_envs` are the vector steps each seed took; None when the runs differ in it or
    do not say."""

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
    num_envs: int | None = None


def _load_run(run_dir: Path, notes: list[str], by_run: bool = False) -> list[_SeedCurve]:
    """The curves of every member of one run directory (raises ValueError on a malformed one);
    `by_run`: each method named RUN/LABEL after the directory."""
    record = json.loads((run_dir / rundir.CONFIG).read_text())
    try:
        task = str(record["config"]["train"]["env"])
        members = {int(member["index"]): member for member in record["members"]}
        num_envs = record["config"]["train"].get("num_envs")
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(
            f"{run_dir}/config.json lacks config.train.env or members[index, seed, label] ({error!r})"
        ) from None
    if num_envs is not None and (isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1):
        raise ValueError(f"{run_dir}/config.json: config.train.num_envs is {num_envs!r}; it must be a positive integer")

    points: dict[int, dict[int, float]] = {index: {} for index in members}
    success: dict[int, dict[int, float]] = {index: {} for index in members}
    clocks: dict[int, dict[int, tuple[float, float]]] = {index: {} for index in members}
    for evaluation in rundir.read_jsonl(run_dir / rundir.EVAL, notes):
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

    status = rundir.read_status(run_dir)
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
                status or "no summary", member_success, wall, train, num_envs,
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
        for name, found in ((rundir.CONFIG, (directory / rundir.CONFIG).is_file()),
                            (f"{rundir.EVAL} (or {rundir.EVAL}.gz)", rundir.log_file(directory / rundir.EVAL) is not None))
        if not found
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
        from mjx_pbac.cli import program

        raise ValueError(
            f"the same seed appears twice (runs with other settings? `{program()} report --by-run True` names each "
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
        envs = {curve.num_envs for curve in seed_curves}

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
            num_envs=envs.pop() if len(envs) == 1 else None,
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
