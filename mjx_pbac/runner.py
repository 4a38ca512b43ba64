"""A training run on the host: run directory, jitted chunks, evaluation, logging, checkpoints,
interrupts, divergence and resume.

RUN_DIR/
  config.json       the resolved config (and the env's), versions, device
  metrics.jsonl     one record per chunk: losses, alpha, ensemble spread, returns, env steps/s
  eval.jsonl        one record per evaluation: every episode's return and length
  tb/               TensorBoard scalars (tensorboardX)
  checkpoints/      step_<env steps>.npz, the newest `keep_checkpoints`
  summary.json      status (finished, interrupted, diverged), final evaluation, timings

A run directory is never overwritten: starting a run in an existing one is an error; `resume`
continues it from its newest checkpoint, cutting the logs back to that step, so the resumed run
produces exactly what the uninterrupted one would have.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import time
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

import envs
from mjx_pbac import checkpoint
from mjx_pbac.algorithm import Algorithm
from mjx_pbac.config import Member, RunConfig, config_from_dict, config_to_dict, expand_members, parse_overrides
from mjx_pbac.logger import Progress, RunLogger, truncate_jsonl
from mjx_pbac.loop import VISIT_PREFIX, Trainer, make_trainer, member_inputs, non_finite_metrics
from mjx_pbac.algorithms import make_algorithm

RUNS_ROOT = Path("runs")


class RunError(RuntimeError):
    """A run could not start or continue; the message says why and what to do."""


class TrainingDiverged(RunError):
    pass


class Built(NamedTuple):
    env: Any
    algorithm: Algorithm
    trainer: Trainer
    members: list[Member]
    task_params: dict[str, Any]
    """Task name -> its constants (`env.task_params()`, None for envs without them)."""

    def init_state(self):
        """The members' initial training state (leading axis M)."""
        pairs = [(m.seed, m.config) for m in self.members]
        tasks = [self.task_params[m.task] for m in self.members]
        return self.trainer.init(*member_inputs(self.algorithm, pairs, tasks))


def build(config: RunConfig, donate: bool = True) -> Built:
    """Env, algorithm, jitted trainer and members of `config`; raises ValueError/TypeError for a
    bad env name, override, task or sweep."""
    names = config.train.task_names
    env, params = envs.make_family(names, **parse_overrides(config.train.env_overrides))
    members = expand_members(config)
    algorithm = make_algorithm(config, env.observation_size, env.action_size, [m.config for m in members])
    trainer = make_trainer(config.train, env, algorithm, donate=donate)
    return Built(env, algorithm, trainer, members, dict(zip(names, params)))



def device_description() -> dict[str, Any]:
    device = jax.devices()[0]
    return {
        "platform": device.platform,
        "device_kind": device.device_kind,
        "device_count": jax.device_count(),
        "jax": jax.__version__,
    }


def new_run_dir(config: RunConfig, profile: str) -> Path:
    if config.train.run_dir:
        run_dir = Path(config.train.run_dir)
        if run_dir.exists() and any(run_dir.iterdir()):
            raise RunError(
                f"run directory {run_dir} already exists and is not empty; continue it with "
                f"`python train.py --resume {run_dir}` or choose another --train.run-dir"
            )
        run_dir.mkdir(parents=True, exist_ok=True)
        return run_dir
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    algo = "" if config.algo == "pbac" else f"{config.algo}-"
    base = RUNS_ROOT / f"{profile}-{algo}{config.train.env}-s{config.train.seed}-{stamp}"
    run_dir, suffix = base, 1
    while run_dir.exists():
        suffix += 1
        run_dir = base.with_name(f"{base.name}-{suffix}")
    run_dir.mkdir(parents=True)
    return run_dir


def load_run_config(run_dir: Path) -> tuple[RunConfig, str]:
    path = run_dir / "config.json"
    if not path.is_file():
        raise RunError(f"{run_dir} is not a run directory (no config.json)")
    record = json.loads(path.read_text())
    return config_from_dict(record["config"]), record.get("profile", "custom")


class _InterruptFlag:
    """Turns the first Ctrl-C into a request honoured between chunks (checkpoint, then stop)."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self):
        def handler(signum, frame):
            if self.requested:  # a second Ctrl-C stops at once
                raise KeyboardInterrupt
            self.requested = True

        self._previous = signal.signal(signal.SIGINT, handler)
        return self

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self._previous)
        return False


def train(config: RunConfig | None, profile: str = "custom", resume_dir: str | Path | None = None) -> Path:
    """Runs `config` in a new run directory, or (config None) resumes `resume_dir` with its saved
    config; returns the run directory. See the module docstring."""
    if resume_dir is not None:
        run_dir = Path(resume_dir)
        config, profile = load_run_config(run_dir)
    built = build(config)
    if resume_dir is None:
        run_dir = new_run_dir(config, profile)
        env = built.env
        record = {
            "profile": profile,
            "algorithm": config.algo,
            "config": config_to_dict(config),
            "members": [
                {"index": m.index, "seed": m.seed, "label": m.label, "task": m.task, "overrides": m.overrides}
                for m in built.members
            ],
            "env_config": dataclasses.asdict(env.config) if dataclasses.is_dataclass(getattr(env, "config", None)) else {},
            "effective_steps": built.trainer.schedule.as_steps(),
            "device": device_description(),
            "created": datetime.now().isoformat(timespec="seconds"),
        }
        (run_dir / "config.json").write_text(json.dumps(record, indent=2) + "\n")
    return _Run(config, run_dir, built, resume=resume_dir is not None).execute()


class _Run:
    def __init__(self, config: RunConfig, run_dir: Path, built: Built, resume: bool):
        self.config, self.run_dir, self.built, self.resume = config, run_dir, built, resume
        self.trainer, self.members = built.trainer, built.members
        self.train = config.train
        self.schedule = self.trainer.schedule
        self.checkpoint_dir = run_dir / "checkpoints"
        self.last_eval: float | None = None
        self.called: set[str] = set()  # programs run by this process: a first call includes its compile

    def execute(self) -> Path:
        state = self.built.init_state()
        chunk, elapsed = 0, 0.0
        if self.resume:
            path = checkpoint.latest(self.checkpoint_dir)
            state, metadata = checkpoint.restore(path, template=state)
            chunk, elapsed = metadata["chunk"], metadata["elapsed_s"]
            for name in ("metrics.jsonl", "eval.jsonl", "visits.jsonl"):
                truncate_jsonl(self.run_dir / name, metadata["env_steps"])
        logger = RunLogger(self.run_dir, self.members, self.train.tensorboard, purge_step=(chunk * self.schedule.chunk_env_steps + 1) if self.resume else None)
        progress = Progress(self.schedule.total_env_steps, self.train.progress)
        if self.resume:
            progress.message(f"resuming {self.run_dir} from {path.name} ({chunk * self.schedule.chunk_env_steps:,} env steps)")
        else:
            progress.message(f"run directory: {self.run_dir} ({len(self.members)} member(s) in one program)")
            for line in self.schedule.adjustments(self.train):
                progress.message(f"note: {line}")
        started = time.perf_counter() - elapsed
        status, message = "finished", ""
        try:
            with _InterruptFlag() as interrupt:
                if chunk == 0 and not self.resume:
                    self._evaluate(state, 0, logger)
                while chunk < self.schedule.num_chunks:
                    state, chunk = self._chunk(state, chunk, logger, progress)
                    env_steps = chunk * self.schedule.chunk_env_steps
                    last = chunk == self.schedule.num_chunks
                    if chunk % self.schedule.eval_every_chunks == 0 or last:
                        self._evaluate(state, env_steps, logger)
                    if chunk % self.schedule.checkpoint_every_chunks == 0 or last or interrupt.requested:
                        self._save(state, chunk, time.perf_counter() - started)
                    if interrupt.requested and not last:
                        status = "interrupted"
                        message = (
                            f"interrupted at {env_steps:,} env steps; checkpoint saved. Continue with "
                            f"`python train.py --resume {self.run_dir}`"
                        )
                        break
        except TrainingDiverged as error:
            status, message = "diverged", str(error)
            raise
        finally:
            progress.close()
            logger.close()
            self._summary(status, message, time.perf_counter() - started)
            if message and status != "diverged":
                progress.message(message)
        return self.run_dir

    def _chunk(self, state, chunk: int, logger: RunLogger, progress: Progress):
        warmup = chunk < self.schedule.warmup_chunks
        name = "warmup_chunk" if warmup else "train_chunk"
        function = getattr(self.trainer, name)
        tick = time.perf_counter()
        state, metrics = function(state)
        metrics = jax.device_get(metrics)  # the one host transfer per chunk (it also waits for it)
        seconds = time.perf_counter() - tick
        first_call = name not in self.called
        self.called.add(name)
        chunk += 1
        env_steps = chunk * self.schedule.chunk_env_steps
        bad = non_finite_metrics(metrics)
        if bad:
            saved = checkpoint.list_checkpoints(self.checkpoint_dir)
            keep = f"the last good checkpoint is {saved[-1]}" if saved else "no checkpoint was written before it"
            where = "; ".join(
                f"{name} in " + ", ".join(self._member_name(self.members[i]) for i in members)
                for name, members in sorted(bad.items())
            )
            raise TrainingDiverged(
                f"training diverged in the chunk ending at {env_steps:,} env steps: non-finite {where}. "
                f"Nothing after the previous checkpoint was saved; {keep}. "
                "Lower the learning rates or check the env overrides."
            )
        start_steps = env_steps - self.schedule.chunk_env_steps
        visits = {name.removeprefix(VISIT_PREFIX): metrics.pop(name) for name in list(metrics) if name.startswith(VISIT_PREFIX)}
        logger.log_visits(self._visit_records(visits, start_steps))
        updates = 0 if warmup else self.schedule.iterations_per_chunk * self.train.updates_per_step
        timing = {
            "chunk_seconds": seconds,
            "compiled": first_call,
            "env_steps_per_s": self.schedule.chunk_env_steps * len(self.members) / seconds,
            "updates_per_s": updates * len(self.members) / seconds,
        }
        records = []
        for member in self.members:
            i = member.index
            record = {"env_steps": env_steps, "member": i, "seed": member.seed, "label": member.label, "task": member.task}
            record["phase"] = "warmup" if warmup else "train"
            episodes = int(metrics["episodes"][i])
            record["episodes"] = episodes
            if "goal_steps" in metrics:
                record["goal_steps"] = int(metrics["goal_steps"][i])
                first = int(metrics["goal_first_iteration"][i])
                if first >= 0:  # the env step at the end of that iteration
                    record["first_goal_step"] = start_steps + self.schedule.num_envs * (first + 1)
            if episodes:
                record["episode_return"] = float(metrics["return_sum"][i]) / episodes
                record["episode_length"] = float(metrics["length_sum"][i]) / episodes
            if not warmup:  # during warm-up the update metrics are placeholders
                record.update(
                    {
                        name: float(value[i])
                        for name, value in metrics.items()
                        if name not in ("episodes", "return_sum", "length_sum", "goal_steps", "goal_first_iteration")
                    }
                )
            records.append({**record, **timing})
        logger.log_chunk(records)
        if not first_call:
            progress.update(
                env_steps,
                self.schedule.chunk_env_steps,
                seconds,
                timing["updates_per_s"],
                self.last_eval,
                members=len(self.members),
                phase="warmup" if warmup else "train",
            )
        else:
            what = "warm-up" if warmup else "training"
            progress.message(f"compiled and ran the first {what} chunk in {seconds:.1f} s")
        return state, chunk

    def _member_name(self, member: Member) -> str:
        """"pbac seed 3", or "ant_delayed pbac seed 3" when the run trains several tasks."""
        task = f"{member.task} " if len(self.train.task_names) > 1 else ""
        return f"{task}{member.label} seed {member.seed}"

    def _visit_records(self, visits: dict[str, np.ndarray], start_steps: int) -> list[dict]:
        """Records for the vector steps of this chunk that cross a multiple of visit_interval."""
        interval = self.train.visit_interval
        if not interval or not visits:
            return []
        steps = start_steps + self.schedule.num_envs * np.arange(1, self.schedule.iterations_per_chunk + 1)
        crossed = np.flatnonzero(steps // interval > (steps - self.schedule.num_envs) // interval)
        return [
            {
                "env_steps": int(steps[j]),
                "member": m.index,
                "seed": m.seed,
                "label": m.label,
                "task": m.task,
                "state": {name: float(value[m.index, j]) for name, value in visits.items()},
            }
            for j in crossed
            for m in self.members
        ]

    def _evaluate(self, state, env_steps: int, logger: RunLogger) -> None:
        result = jax.device_get(self.trainer.evaluate(state))
        returns = np.asarray(result["returns"], dtype=float)  # [M, E]
        lengths = np.asarray(result["lengths"])
        self.last_eval = float(returns.mean())
        logger.log_eval(
            [
                {
                    "env_steps": env_steps,
                    "member": m.index,
                    "seed": m.seed,
                    "label": m.label,
                    "task": m.task,
                    "return_mean": float(returns[m.index].mean()),
                    "return_std": float(returns[m.index].std()),
                    "length_mean": float(lengths[m.index].mean()),
                    "returns": returns[m.index].tolist(),
                    "lengths": lengths[m.index].tolist(),
                }
                for m in self.members
            ]
        )

    def _save(self, state, chunk: int, elapsed: float) -> None:
        checkpoint.save(
            self.checkpoint_dir,
            state,
            env_steps=chunk * self.schedule.chunk_env_steps,
            metadata={"chunk": chunk, "elapsed_s": elapsed},
            keep=self.train.keep_checkpoints,
        )

    def _summary(self, status: str, message: str, elapsed: float) -> None:
        evaluations = [json.loads(line) for line in (self.run_dir / "eval.jsonl").read_text().splitlines() if line.strip()]
        last_step = max((e["env_steps"] for e in evaluations), default=None)
        final = [e for e in evaluations if e["env_steps"] == last_step]
        summary = {
            "status": status,
            "message": message,
            "elapsed_s": elapsed,
            "final_eval": {
                "env_steps": last_step,
                "return_mean": float(np.mean([e["return_mean"] for e in final])),
                "per_member": [{k: e.get(k) for k in ("member", "seed", "label", "task", "return_mean")} for e in final],
            }
            if final
            else None,
            "checkpoints": [p.name for p in checkpoint.list_checkpoints(self.checkpoint_dir)],
        }
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
