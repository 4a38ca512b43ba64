"""The sizes a run derives from its `TrainConfig` and never writes back into it: vector steps per
chunk, the chunks of warm-up and training, where evaluations and checkpoints fall, and how a chunk
may be split to keep within `chunk_seconds`; and the warnings for settings that are legal but
rarely meant."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from mjx_pbac.schema import INT32_MAX, require

if TYPE_CHECKING:
    from mjx_pbac.config import TrainConfig


@dataclasses.dataclass(frozen=True)
class Schedule:
    """Sizes derived from a `TrainConfig` (never written back into it).

    The loop returns to the host every `chunk_env_steps` = `iterations_per_chunk` x num_envs env
    steps, so warm-up, evaluation, checkpoints and the end of training fall on chunk boundaries:
    each requested step count is rounded up to whole chunks (intervals to the nearest, at least one).

    A member's counters on the device are int32 (`loop.TrainState`) and would wrap past
    2**31 - 1 = 2,147,483,647: `env_steps` counts the transitions of all its env instances, so
    it would wrap in a run of over 2,147,483,647 env steps (total_steps rounded to whole chunks);
    `updates` counts gradient steps, (num_chunks - warmup_chunks) x iterations_per_chunk x
    updates_per_step, so it would wrap after 2**31 / updates_per_step training iterations (with
    one env and 5 updates per step, about 429 million env steps past the warm-up). Each
    instance's posterior `sampling_counter` counts its own vector steps (total_steps / num_envs,
    below env_steps), and the replay's `position` and `size` stay below buffer_size + num_envs,
    which `TrainConfig` keeps within int32. `Schedule.of` refuses a run whose env_steps or
    updates counter would wrap.
    """

    num_envs: int
    iterations_per_chunk: int
    """Vector env steps per jitted chunk."""
    num_chunks: int
    warmup_chunks: int
    eval_every_chunks: int
    checkpoint_every_chunks: int

    @classmethod
    def of(cls, train: TrainConfig) -> Schedule:
        iterations = -(-train.chunk_steps // train.num_envs)
        chunk = iterations * train.num_envs
        num_chunks = -(-train.total_steps // chunk)
        warmup_chunks = -(-train.warmup_steps // chunk)
        require(
            warmup_chunks < num_chunks,
            f"warm-up ({warmup_chunks} chunks of {chunk} env steps) leaves no training in total_steps "
            f"({train.total_steps}); raise total_steps or lower warmup_steps / chunk_steps",
        )
        total = num_chunks * chunk
        require(
            total <= INT32_MAX,
            f"total_steps {train.total_steps} ({total} in whole chunks of {chunk}) would wrap the int32 env_steps "
            f"counter, which holds at most 2**31 - 1 = {INT32_MAX} env steps per member; lower total_steps",
        )
        updates = (num_chunks - warmup_chunks) * iterations * train.updates_per_step
        if updates > INT32_MAX:
            wraps_at = warmup_chunks * chunk + -(-(INT32_MAX + 1) // train.updates_per_step) * train.num_envs
            raise ValueError(
                f"{updates} gradient updates ((num_chunks - warmup_chunks) x iterations_per_chunk x updates_per_step "
                f"= ({num_chunks} - {warmup_chunks}) x {iterations} x {train.updates_per_step}) would wrap the int32 "
                f"updates counter at 2**31 = {INT32_MAX + 1}, at env step {wraps_at} of {total}; lower total_steps "
                "or updates_per_step, or raise num_envs"
            )
        return cls(
            num_envs=train.num_envs,
            iterations_per_chunk=iterations,
            num_chunks=num_chunks,
            warmup_chunks=warmup_chunks,
            eval_every_chunks=max(1, round(train.eval_interval / chunk)),
            checkpoint_every_chunks=max(1, round(train.checkpoint_interval / chunk)),
        )

    @property
    def chunk_env_steps(self) -> int:
        return self.iterations_per_chunk * self.num_envs

    def split(self, distance: int, seconds_per_iteration: float | None, target: float) -> int:
        """Iterations of the next chunk, `distance` iterations before the next boundary of the
        schedule's grid: the most that are expected to take at most `target` seconds, at least
        one; all of `distance` when the time is not known or target is 0."""
        if seconds_per_iteration is None or target <= 0 or seconds_per_iteration <= 0:
            return distance
        return max(1, min(distance, int(target / seconds_per_iteration)))

    @property
    def total_env_steps(self) -> int:
        return self.num_chunks * self.chunk_env_steps

    def as_steps(self) -> dict[str, int]:
        """The effective env-step counts, named like the TrainConfig fields they come from."""
        chunk = self.chunk_env_steps
        return {
            "chunk_steps": chunk,
            "total_steps": self.total_env_steps,
            "warmup_steps": self.warmup_chunks * chunk,
            "eval_interval": self.eval_every_chunks * chunk,
            "checkpoint_interval": self.checkpoint_every_chunks * chunk,
        }

    def adjustments(self, train: TrainConfig) -> list[str]:
        """One line per step count that the chunk grain changed."""
        return [
            f"{name} {getattr(train, name):,} -> {value:,} (whole chunks of {self.chunk_env_steps:,} env steps)"
            for name, value in self.as_steps().items()
            if getattr(train, name) != value
        ]


def edge_warnings(train: TrainConfig, schedule: Schedule) -> list[str]:
    """One line each for settings that are legal but rarely meant: a minibatch larger than the
    replay buffer or than the warm-up's transitions (minibatches are drawn with replacement, so
    they repeat transitions), a chunk longer than the whole run."""
    lines = []
    if train.batch_size > train.buffer_size:
        lines.append(
            f"batch_size {train.batch_size:,} is larger than buffer_size {train.buffer_size:,}: minibatches are drawn "
            f"with replacement, so each holds every stored transition about {train.batch_size / train.buffer_size:.0f} "
            "times over, at the cost of the whole batch; lower batch_size or raise buffer_size"
        )
    warmed = schedule.warmup_chunks * schedule.chunk_env_steps
    if train.batch_size > warmed and warmed < train.buffer_size:
        held = f"the {warmed:,} transitions of the warm-up" if warmed else "no transitions (warmup_steps is 0)"
        lines.append(
            f"batch_size {train.batch_size:,} is larger than the warm-up: the first gradient steps draw it from {held}, "
            "repeating them; raise warmup_steps or lower batch_size"
        )
    if train.chunk_steps > train.total_steps:
        lines.append(
            f"chunk_steps {train.chunk_steps:,} is longer than total_steps {train.total_steps:,}: the run trains one "
            f"whole chunk, {schedule.total_env_steps:,} env steps, evaluating and checkpointing only at its end; "
            "lower chunk_steps"
        )
    return lines
