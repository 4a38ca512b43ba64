"""A run's evaluations: at once (`eval_batch` 1), or each policy kept on the device and a batch of
them evaluated in one program (`eval_batch` > 1: `Trainer.snapshot`, `Trainer.evaluate_snapshots`),
their rows logged with the env steps and clocks of when each policy existed."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from mjx_pbac.lifecycle import Stopping
from mjx_pbac.records import Clocks, eval_rows, success_rates


class Evaluations:
    """The evaluations of one run: `evaluate(state, env_steps, logger)` at each evaluation point,
    `flush(logger)` before a checkpoint (the kept policies not evaluated yet). Times itself into
    `clocks.eval_s` and tells `stopping` while it runs."""

    def __init__(self, trainer: Any, layout: Any, members: list, batch: int, reports_success: bool, clocks: Clocks, stopping: Stopping):
        self.trainer, self.layout, self.members, self.batch = trainer, layout, members, batch
        self.reports_success = reports_success
        """Whether the env's reward is its success at each step (Meta-World): an episode then
        succeeded iff its return > 0, and evaluations log the success rate."""
        self.clocks, self.stopping = clocks, stopping
        self.last_return: float | None = None
        self.last_success: float | None = None
        self.seconds: float | None = None
        """How long the last evaluation took (the first includes its compile)."""
        self.snapshots = None
        """With `batch` > 1: the kept policies on the device (`Trainer.init_snapshots`)."""
        self.pending: list[tuple[int, dict]] = []
        """(env steps, clocks) of the kept policies not evaluated yet, in slot order."""

    def programs(self, state) -> dict[str, tuple]:
        """The programs evaluation calls, with their arguments, to compile ahead: `evaluate`, or
        (`batch` > 1) the policy copy and the batched evaluation (the room every kept policy goes
        to is made here, a small program of its own)."""
        if self.batch == 1:
            return {"evaluate": (self.trainer.evaluate, (state,))}
        self.snapshots = self.trainer.init_snapshots(state)
        return {
            "snapshot": (self.trainer.snapshot, (self.snapshots, state, np.int32(0))),
            "evaluate_snapshots": (self.trainer.evaluate_snapshots, (self.snapshots,)),
        }

    def evaluate(self, state, env_steps: int, logger) -> None:
        """The evaluation at `env_steps`: at once (`batch` 1), or the policy kept on the device
        for the next batch (`flush`), run when `batch` are pending."""
        clocks = self.clocks.record()  # when this policy existed, before its evaluation runs
        if self.batch == 1:
            self._run(lambda: self.trainer.evaluate(state), [(env_steps, clocks)], logger)
            return
        tick = time.perf_counter()
        if self.snapshots is None:
            self.snapshots = self.trainer.init_snapshots(state)
        self.snapshots = self.trainer.snapshot(self.snapshots, state, np.int32(len(self.pending)))
        self.clocks.eval_s += time.perf_counter() - tick  # dispatched: the copy itself overlaps what follows
        self.pending.append((env_steps, clocks))
        if len(self.pending) == self.batch:
            self.flush(logger)

    def flush(self, logger) -> None:
        """Evaluates the pending policies (`batch` > 1) in one program and logs their rows."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        self._run(lambda: self.trainer.evaluate_snapshots(self.snapshots), pending, logger)

    def _run(self, evaluate, points: list[tuple[int, dict]], logger) -> None:
        """Runs `evaluate()` (returns [M, E], or [M, P, E] for P points) and logs one row per
        member and point, with that point's env steps and clocks."""
        tick = time.perf_counter()
        self.stopping.doing("evaluating", self.seconds)
        result = self.layout.gather(evaluate())
        self.seconds = time.perf_counter() - tick
        self.clocks.eval_s += self.seconds
        self.stopping.doing("between chunks", 0.0)
        returns = np.asarray(result["returns"], dtype=float)
        lengths = np.asarray(result["lengths"])
        if returns.ndim == 2:  # one point: [M, E]
            returns, lengths = returns[:, None], lengths[:, None]
        records = []
        for slot, (env_steps, clocks) in enumerate(points):
            records += self._rows(returns[:, slot], lengths[:, slot], env_steps, clocks)
        logger.log_eval(records)

    def _rows(self, returns: np.ndarray, lengths: np.ndarray, env_steps: int, clocks: dict) -> list[dict]:
        self.last_return = float(returns.mean())
        success = success_rates(returns) if self.reports_success else None
        if success is not None:
            self.last_success = float(success[[m.index for m in self.members]].mean())
        return eval_rows(self.members, returns, lengths, env_steps, clocks, success)
