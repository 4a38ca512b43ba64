"""What a run writes while it trains: JSON lines, TensorBoard scalars and a progress bar.

`metrics.jsonl` has one record per member per chunk, `eval.jsonl` one per member per evaluation
(with every episode's return, and the success rate for envs that report success), `visits.jsonl` where each member's first env instance was, every
`visit_interval` env steps. On resume, both are cut back to the checkpoint's step and TensorBoard purges the events
after it, so no step is ever logged twice.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from mjx_pbac import rundir


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


def member_slug(label: str, seed: int, task: str = "") -> str:
    """A directory name for a member: "pbac_s0", "pbac_bootstrap_rate=0.01_s3", or with the task
    in front when a run trains several: "ant_delayed_pbac_s0"."""
    return re.sub(r"[^A-Za-z0-9_.=+-]+", "_", f"{task + '_' if task else ''}{label}_s{seed}")


class RunLogger:
    """Appends JSON lines (flushed per write) and mirrors scalars to TensorBoard, one TensorBoard
    run per member under tb/<label>_s<seed>/ (tb/<task>_<label>_s<seed>/ when a run trains several
    tasks)."""

    def __init__(self, run_dir: Path, members: list, tensorboard: bool, purge_step: int | None = None):
        self.run_dir = run_dir
        self.members = members
        self._files = {name: open(run_dir / name, "a") for name in rundir.LOGS}  # noqa: SIM115 - open for the run, closed by close()
        self._writers = []
        if tensorboard:
            from tensorboardX import SummaryWriter

            several_tasks = len({getattr(m, "task", "") for m in members}) > 1
            self._writers = [
                SummaryWriter(
                    str(run_dir / rundir.TENSORBOARD / member_slug(m.label, m.seed, m.task if several_tasks else "")),
                    purge_step=purge_step,
                    flush_secs=10,
                )
                for m in members
            ]

    def _append(self, name: str, records: list[dict[str, Any]]) -> None:
        handle = self._files[name]
        handle.write("".join(json.dumps(record) + "\n" for record in records))
        handle.flush()

    def log_chunk(self, records: list[dict[str, Any]]) -> None:
        """One record per member (with its "member" index)."""
        self._append(rundir.METRICS, records)
        for record in records if self._writers else ():
            writer, step = self._writers[record["member"]], record["env_steps"]
            for name, value in record.items():
                if name in ("env_steps", "member", "seed") or not isinstance(value, (int, float)):
                    continue
                if math.isfinite(value):
                    writer.add_scalar(_tag(name), value, step)

    def log_eval(self, records: list[dict[str, Any]]) -> None:
        self._append(rundir.EVAL, records)
        for record in records if self._writers else ():
            writer, step = self._writers[record["member"]], record["env_steps"]
            writer.add_scalar("eval/return_mean", record["return_mean"], step)
            writer.add_scalar("eval/return_std", record["return_std"], step)
            writer.add_scalar("eval/length_mean", record["length_mean"], step)
            if "success_rate" in record:  # envs that report success (Meta-World)
                writer.add_scalar("eval/success_rate", record["success_rate"], step)

    def log_visits(self, records: list[dict[str, Any]]) -> None:
        if records:
            self._append(rundir.VISITS, records)

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()
        for writer in self._writers:
            writer.close()


class NullLogger:
    """RunLogger's interface, writing nothing: the processes of a multi-process run other than
    process 0 (which writes the run directory for all)."""

    def log_chunk(self, records: list[dict[str, Any]]) -> None:
        pass

    log_eval = log_visits = log_chunk

    def close(self) -> None:
        pass


def _tag(name: str) -> str:
    if name.startswith("critic_") or name.endswith("_loss"):
        return f"loss/{name}"
    if name in ("env_steps_per_s", "updates_per_s", "chunk_seconds", "updates", "compiled"):
        return f"perf/{name}"
    if name in ("alpha", "entropy"):
        return f"policy/{name}"
    return f"train/{name}"


class Progress:
    """One status line per chunk on stderr: a bar, env steps/s, updates/s, last eval, time left."""

    def __init__(self, total_steps: int, enabled: bool, stream: TextIO | None = None):
        self.total = total_steps
        self.enabled = enabled
        stream = sys.stderr if stream is None else stream  # the stream of now, not of import time
        self.stream = stream
        self.tty = stream.isatty()
        self.started = time.perf_counter()
        self._recent: list[tuple[int, float]] = []  # (env steps, seconds) of recent chunks of one phase
        self._phase = ""

    def update(
        self,
        env_steps: int,
        chunk_steps: int,
        seconds: float,
        updates_per_s: float,
        eval_return: float | None,
        members: int = 1,
        phase: str = "train",
        eval_success: float | None = None,
    ) -> None:
        """`env_steps` and `chunk_steps` per member; the rates shown cover all `members`;
        `eval_success` (envs that report success) is the last evaluation's success rate. The
        speed (and so the time left) is averaged over the recent chunks of the current phase:
        warm-up chunks, which do no updates, would make the estimate far too short."""
        if not self.enabled:
            return
        if phase != self._phase:
            self._phase, self._recent = phase, []
        self._recent = (self._recent + [(chunk_steps, seconds)])[-20:]
        steps_per_s = sum(s for s, _ in self._recent) / max(sum(t for _, t in self._recent), 1e-9)
        left = (self.total - env_steps) / max(steps_per_s, 1e-9)
        fraction = env_steps / self.total
        bar = "#" * int(24 * fraction) + "-" * (24 - int(24 * fraction))
        evaluation = f" | eval {eval_return:9.2f}" if eval_return is not None else ""
        if eval_success is not None:
            evaluation += f" success {100 * eval_success:5.1f}%"
        line = (
            f"[{bar}] {100 * fraction:5.1f}% {env_steps:>9,}/{self.total:,} | "
            f"{members * steps_per_s:8,.0f} env steps/s | {updates_per_s:8,.1f} updates/s{evaluation} | "
            + (f"left {_duration(left)}" if phase == "train" else "left -- (warm-up)")
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
