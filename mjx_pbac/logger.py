"""What a run writes while it trains: JSON lines, TensorBoard scalars and a progress bar.

`metrics.jsonl` has one record per chunk, `eval.jsonl` one per evaluation (with every episode's
return). On resume, both are cut back to the checkpoint's step and TensorBoard purges the events
after it, so no step is ever logged twice.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO


def truncate_jsonl(path: Path, max_env_steps: int) -> int:
    """Keeps the records of `path` with env_steps <= max_env_steps; returns how many were dropped."""
    if not path.exists():
        return 0
    kept, dropped = [], 0
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by a crash
            dropped += 1
            continue
        if record.get("env_steps", 0) <= max_env_steps:
            kept.append(line)
        else:
            dropped += 1
    temporary = path.with_suffix(".tmp")
    temporary.write_text("".join(line + "\n" for line in kept))
    os.replace(temporary, path)
    return dropped


class RunLogger:
    """Appends JSON lines (flushed per record) and mirrors scalars to TensorBoard."""

    def __init__(self, run_dir: Path, tensorboard: bool, purge_step: int | None = None):
        self.run_dir = run_dir
        self._metrics = open(run_dir / "metrics.jsonl", "a")
        self._eval = open(run_dir / "eval.jsonl", "a")
        self._writer = None
        if tensorboard:
            from tensorboardX import SummaryWriter

            self._writer = SummaryWriter(str(run_dir / "tb"), purge_step=purge_step, flush_secs=10)

    @staticmethod
    def _append(handle: TextIO, record: dict[str, Any]) -> None:
        handle.write(json.dumps(record) + "\n")
        handle.flush()

    def log_chunk(self, record: dict[str, Any]) -> None:
        self._append(self._metrics, record)
        if self._writer is not None:
            step = record["env_steps"]
            for name, value in record.items():
                if name != "env_steps" and isinstance(value, (int, float)) and math.isfinite(value):
                    self._writer.add_scalar(_tag(name), value, step)

    def log_eval(self, record: dict[str, Any]) -> None:
        self._append(self._eval, record)
        if self._writer is not None:
            step = record["env_steps"]
            self._writer.add_scalar("eval/return_mean", record["return_mean"], step)
            self._writer.add_scalar("eval/return_std", record["return_std"], step)
            self._writer.add_scalar("eval/length_mean", record["length_mean"], step)

    def close(self) -> None:
        self._metrics.close()
        self._eval.close()
        if self._writer is not None:
            self._writer.close()


def _tag(name: str) -> str:
    if name.startswith("critic_") or name.endswith("_loss"):
        return f"loss/{name}"
    if name in ("env_steps_per_s", "updates_per_s", "chunk_seconds", "updates"):
        return f"perf/{name}"
    if name in ("alpha", "entropy"):
        return f"policy/{name}"
    return f"train/{name}"


class Progress:
    """One status line per chunk on stderr: a bar, env steps/s, updates/s, last eval, time left."""

    def __init__(self, total_steps: int, enabled: bool, stream: TextIO = sys.stderr):
        self.total = total_steps
        self.enabled = enabled
        self.stream = stream
        self.tty = stream.isatty()
        self.started = time.perf_counter()
        self._recent: list[tuple[int, float]] = []  # (env steps, seconds) of recent trained chunks

    def update(self, env_steps: int, chunk_steps: int, seconds: float, updates_per_s: float, eval_return: float | None) -> None:
        if not self.enabled:
            return
        self._recent = (self._recent + [(chunk_steps, seconds)])[-20:]
        steps_per_s = sum(s for s, _ in self._recent) / max(sum(t for _, t in self._recent), 1e-9)
        left = (self.total - env_steps) / max(steps_per_s, 1e-9)
        fraction = env_steps / self.total
        bar = "#" * int(24 * fraction) + "-" * (24 - int(24 * fraction))
        evaluation = f" | eval {eval_return:9.2f}" if eval_return is not None else ""
        line = (
            f"[{bar}] {100 * fraction:5.1f}% {env_steps:>9,}/{self.total:,} | "
            f"{steps_per_s:8,.0f} env steps/s | {updates_per_s:8,.1f} updates/s{evaluation} | "
            f"left {_duration(left)}"
        )
        self.stream.write(("\r" + line) if self.tty else (line + "\n"))
        self.stream.flush()

    def message(self, text: str) -> None:
        if self.enabled:
            self.stream.write(("\n" if self.tty else "") + text + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")


def _duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
