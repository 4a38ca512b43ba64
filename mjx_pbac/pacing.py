"""How long a run's chunks are: each kind of chunk program ("warmup", "train") runs the schedule's
chunks whole, or split into shorter ones of equal length when a whole one would outlast
`TrainConfig.chunk_seconds` (`Schedule.split`), from the time per iteration measured on its
chunks so far (agreed over the processes). Every new length is one more compile, so lengths
only ever get shorter."""

from __future__ import annotations

from mjx_pbac.schedule import Schedule


class Pacing:
    def __init__(self, schedule: Schedule, target_seconds: float):
        self.schedule, self.target = schedule, target_seconds
        self.seconds_per_iteration: dict[str, float] = {}
        """Measured per chunk program kind: how long the chunks to come are expected to take.
        Carried in checkpoints, so a resumed run sizes its first chunks from them."""
        self.lengths: dict[str, int] = {}
        """The iterations per chunk each kind runs at now."""

    def expected_seconds(self, kind: str, length: int) -> float | None:
        pace = self.seconds_per_iteration.get(kind)
        return None if pace is None else pace * length

    def next_length(self, kind: str, iteration: int) -> int:
        """Iterations of the next chunk of `kind`: the length it runs at now, while that still
        fits before the next boundary of the schedule's grid; otherwise (and for its first chunk)
        chosen by `Schedule.split` from its time per iteration, or from the warm-up's for the
        first training chunk when even the warm-up's pace makes a whole chunk outlast the target."""
        whole = self.schedule.iterations_per_chunk
        distance = whole - iteration % whole
        current = self.lengths.get(kind)
        if current is not None and distance % current == 0:
            return current
        pace = self.seconds_per_iteration.get(kind)
        if pace is None and kind == "train":  # a training iteration does all a warm-up one does, and more
            warmup = self.seconds_per_iteration.get("warmup")
            if warmup is not None and warmup * whole > self.target > 0:
                pace = warmup
        self.lengths[kind] = length = self.schedule.split(distance, pace, self.target)
        return length

    def timed(self, kind: str, length: int, seconds: float) -> None:
        """Learns the pace of `kind` from a chunk of `length` iterations that took `seconds`: its
        first chunk sets the length its chunks run at; later, a chunk that took over twice the
        target makes them shorter (never longer: each new length is a compile)."""
        pace = seconds / length
        known = self.seconds_per_iteration.get(kind)
        self.seconds_per_iteration[kind] = pace
        target = self.target
        if known is None or (target > 0 and seconds > 2 * target):
            shorter = self.schedule.split(length, pace, target) if target > 0 else length
            if known is None or shorter < length:
                self.lengths.pop(kind, None)  # chosen again at the next chunk, from this pace
