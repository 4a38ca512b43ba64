"""What a run writes in its logs and summary: the rows of metrics.jsonl, eval.jsonl and
visits.jsonl built from a chunk's or an evaluation's gathered arrays, the run's clocks, and
summary.json's record. Pure functions of those arrays; the runner writes what they return."""

from __future__ import annotations

import os
import time
from datetime import datetime
from typing import Any

import numpy as np

from mjx_pbac.config import Member

# Keys of the log rows (metrics.jsonl, eval.jsonl) that record when and how fast the process ran
# (clocks, rates, whether the chunk compiled): they differ between two runs that are otherwise
# bit-identical (a resumed run against an uninterrupted one, say).
TIMING_KEYS = frozenset({"chunk_seconds", "compiled", "env_steps_per_s", "updates_per_s", "wall_s", "train_s"})

_COUNTS = ("episodes", "return_sum", "length_sum", "success_sum", "goal_steps", "goal_first_iteration")
"""A chunk's per-member counters (the rest of its metrics are the update's)."""


class Clocks:
    """A run's two clocks, in seconds, continued across resumes (checkpoints carry both).

    - `wall_s`: since the run began, everything included: setting up the state, compiling,
      training, evaluating, checkpointing (the wall-clock a user waits; time to score reads it).
      A resumed run continues from the value at its checkpoint, plus its own set-up; the time
      between the processes (the run not running) is not counted.
    - `train_s`: the training chunks alone: compiles (timed apart, `compile_s`), evaluations and
      checkpoints excluded (the training throughput's clock).

    and the parts `compile_s` (every program's compile, timed apart) and `eval_s` (evaluations,
    keeping policies for a batched one included), which summary.json reports, with `compiles`.
    """

    def __init__(self) -> None:
        self._origin = time.perf_counter()
        self.train_s = 0.0
        self.compile_s = 0.0
        self.eval_s = 0.0
        self.compiles: dict[str, float] = {}
        """This process's compiles, in seconds: each program's (`train`, `warmup`, `evaluate`,
        `evaluate_snapshots`, `snapshot`, a split chunk's `train/<iterations>`), and for the
        programs compiled ahead together, `tracing` (tracing and lowering them) and `ahead`
        (their wall-clock, tracing included). Not carried across a resume: each process
        compiles its own."""

    def continue_from(self, wall_s: float, train_s: float, compile_s: float = 0.0, eval_s: float = 0.0) -> None:
        """Adds the clocks of the checkpoint a run resumes from."""
        self._origin -= wall_s
        self.train_s += train_s
        self.compile_s += compile_s
        self.eval_s += eval_s

    @property
    def wall_s(self) -> float:
        return time.perf_counter() - self._origin

    def record(self) -> dict[str, float]:
        return {"wall_s": self.wall_s, "train_s": self.train_s}


def success_rates(returns: np.ndarray) -> np.ndarray:
    """[M, E] evaluation returns of an env whose reward is its success at each step (Meta-World,
    `reports_success`) -> [M] the fraction of each member's episodes that succeeded. Meta-World
    counts an episode as a success if it succeeds at any step (its evaluation ends an episode at
    the first success), i.e. iff the episode's return is > 0."""
    return (np.asarray(returns) > 0).mean(axis=-1)


def _member_keys(member: Member) -> dict[str, Any]:
    return {"member": member.index, "seed": member.seed, "label": member.label, "task": member.task}


def chunk_rows(members: list[Member], metrics: dict, start_steps: int, env_steps: int, num_envs: int, warmup: bool) -> list[dict]:
    """One metrics.jsonl row per member from a chunk's gathered metrics ([M] arrays): episodes,
    returns, goal visits and success counted in the chunk, and (after warm-up) the update
    metrics. `num_envs`: env instances per member (a vector step's env steps)."""
    records = []
    for member in members:
        i = member.index
        record = {"env_steps": env_steps, **_member_keys(member)}
        record["phase"] = "warmup" if warmup else "train"
        episodes = int(metrics["episodes"][i])
        record["episodes"] = episodes
        if "goal_steps" in metrics:
            record["goal_steps"] = int(metrics["goal_steps"][i])
            first = int(metrics["goal_first_iteration"][i])
            if first >= 0:  # the env step at the end of that iteration
                record["first_goal_step"] = start_steps + num_envs * (first + 1)
        if episodes:
            record["episode_return"] = float(metrics["return_sum"][i]) / episodes
            record["episode_length"] = float(metrics["length_sum"][i]) / episodes
            if "success_sum" in metrics:
                record["episode_success"] = int(metrics["success_sum"][i]) / episodes
        if not warmup:  # during warm-up the update metrics are placeholders
            record.update({name: float(value[i]) for name, value in metrics.items() if name not in _COUNTS})
        records.append(record)
    return records


def visit_rows(members: list[Member], visits: dict[str, np.ndarray], start_steps: int, length: int, num_envs: int, interval: int) -> list[dict]:
    """visits.jsonl rows for the vector steps of a chunk of `length` that cross a multiple of
    `interval` env steps (none when `interval` is 0)."""
    if not interval or not visits:
        return []
    steps = start_steps + num_envs * np.arange(1, length + 1)
    crossed = np.flatnonzero(steps // interval > (steps - num_envs) // interval)
    return [
        {
            "env_steps": int(steps[j]),
            **_member_keys(m),
            "state": {name: float(value[m.index, j]) for name, value in visits.items()},
        }
        for j in crossed
        for m in members
    ]


def eval_rows(members: list[Member], returns: np.ndarray, lengths: np.ndarray, env_steps: int, clocks: dict, success: np.ndarray | None) -> list[dict]:
    """eval.jsonl rows of one evaluation point: returns and lengths [M, E], `success` [M] or None."""
    records = []
    for m in members:
        record = {
            "env_steps": env_steps,
            **_member_keys(m),
            "return_mean": float(returns[m.index].mean()),
            "return_std": float(returns[m.index].std()),
            "length_mean": float(lengths[m.index].mean()),
            **clocks,
        }
        if success is not None:
            record["success_rate"] = float(success[m.index])
        record.update(returns=returns[m.index].tolist(), lengths=lengths[m.index].tolist())
        records.append(record)
    return records


def where_not_finite(bad: dict[str, list[int]], members: list[Member], several_tasks: bool) -> str:
    """"critic_loss in pbac seed 0, pbac seed 1; ..." for `bad` ({metric: member indices}); the
    members named "ant_delayed pbac seed 3" when the run trains `several_tasks`."""

    def name(member: Member) -> str:
        return f"{f'{member.task} ' if several_tasks else ''}{member.label} seed {member.seed}"

    return "; ".join(f"{metric} in " + ", ".join(name(members[i]) for i in indices) for metric, indices in sorted(bad.items()))


def summary_record(status: str, message: str, exit_code: int, env_steps: int, elapsed: float, clocks: Clocks,
                   evaluations: list[dict], checkpoints: list[str], error: str | None = None) -> dict[str, Any]:
    """summary.json: the status, its message and exit code, how far the run got, its clocks, the
    final evaluation (the last evaluated step's rows of `evaluations`), the checkpoints on disk."""
    last_step = max((e["env_steps"] for e in evaluations), default=None)
    final = [e for e in evaluations if e["env_steps"] == last_step]
    final_keys = ("member", "seed", "label", "task", "return_mean", "success_rate")
    summary = {
        "status": status,
        "message": message,
        "exit_code": int(exit_code),
        "env_steps": env_steps,
        "elapsed_s": elapsed,
        "train_s": clocks.train_s,
        "compile_s": clocks.compile_s,
        "eval_s": clocks.eval_s,
        "compiles": {name: round(seconds, 3) for name, seconds in clocks.compiles.items()},
        "final_eval": {
            "env_steps": last_step,
            "return_mean": float(np.mean([e["return_mean"] for e in final])),
            **(
                {"success_rate": float(np.mean([e["success_rate"] for e in final]))}
                if all("success_rate" in e for e in final)
                else {}
            ),
            "per_member": [{k: e.get(k) for k in final_keys if k != "success_rate" or k in e} for e in final],
        }
        if final
        else None,
        "checkpoints": checkpoints,
    }
    if error is not None:
        summary["error"] = error
    if status == "running":
        summary.update(pid=os.getpid(), started=datetime.now().isoformat(timespec="seconds"))
    return summary
