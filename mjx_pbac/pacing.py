"""How long a run's chunks are. Each kind of chunk program ("warmup", "train") first runs a
probe of `PROBE_ITERATIONS` vector steps, which measures its pace; then each chunk runs as many
iterations as are expected to take `TrainConfig.chunk_seconds` (`Schedule.split`), up to the next
boundary of the schedule's grid, from the pace of the kind's latest chunk (agreed over the
processes). Any length runs one compiled program (`loop.make_trainer`'s `any_length`), so no
length costs a compile. Where whole chunks run a program of their own (a GPU), a kind's first
chunk is whole, and only a chunk expected to outlast the target is split."""

from __future__ import annotations

from mjx_pbac.schedule import Schedule

PROBE_ITERATIONS = 1
"""Vector steps of a kind's first chunk, when its pace is not known (any-length programs)."""


class Pacing:
    def __init__(self, schedule: Schedule, target_seconds: float, probe: bool = True):
        self.schedule, self.target, self.probe = schedule, target_seconds, probe
        self.seconds_per_iteration: dict[str, float] = {}
        """Measured per chunk program kind, on its latest chunk: how long the chunks to come are
        expected to take. Carried in checkpoints, so a resumed run sizes its first chunks from them."""
        self.settled: set[str] = set()
        """Kinds timed on a chunk past their probe in this process (a probe's one vector step
        carries the call's fixed costs, so its pace is only an upper bound)."""

    def expected_seconds(self, kind: str, length: int) -> float | None:
        pace = self.seconds_per_iteration.get(kind)
        return None if pace is None else pace * length

    def next_length(self, kind: str, iteration: int) -> int:
        """Iterations of the next chunk of `kind` from `iteration`: a probe while its pace is not
        known (with `probe` and a target); else the most that fit the target before the next
        boundary of the schedule's grid. Without a probe, a training chunk whose pace is not
        known takes the warm-up's when even that makes a whole chunk outlast the target (a
        training iteration does all a warm-up one does, and more)."""
        whole = self.schedule.iterations_per_chunk
        distance = whole - iteration % whole
        pace = self.seconds_per_iteration.get(kind)
        if pace is None and self.target > 0:
            if self.probe:
                return min(PROBE_ITERATIONS, distance)
            warmup = self.seconds_per_iteration.get("warmup")
            if kind == "train" and warmup is not None and warmup * whole > self.target:
                pace = warmup
        return self.schedule.split(distance, pace, self.target)

    def timed(self, kind: str, length: int, seconds: float) -> bool:
        """Learns the pace of `kind` from a chunk of `length` iterations that took `seconds`;
        True for the first chunk of the kind in this process that was not a probe."""
        probe = self.probe and self.target > 0 and kind not in self.seconds_per_iteration
        self.seconds_per_iteration[kind] = seconds / length
        if probe or kind in self.settled:
            return False
        self.settled.add(kind)
        return True
