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
from typing import Any

import jax
import numpy as np

import envs
from mjx_pbac import checkpoint
from mjx_pbac.config import RunConfig, config_from_dict, config_to_dict, parse_overrides
from mjx_pbac.logger import Progress, RunLogger, truncate_jsonl
from mjx_pbac.loop import Trainer, make_trainer, non_finite_metrics
from mjx_pbac.pbac import make_pbac

RUNS_ROOT = Path("runs")


class RunError(RuntimeError):
    """A run could not start or continue; the message says why and what to do."""


class TrainingDiverged(RunError):
    pass


def build(config: RunConfig, donate: bool = True) -> tuple[Any, Trainer]:
    """(env, trainer) for `config`; raises ValueError/TypeError for a bad env name or override."""
    env = envs.make(config.train.env, **parse_overrides(config.train.env_overrides))
    algorithm = make_pbac(config.pbac, env.observation_size, env.action_size)
    trainer = make_trainer(config.train, env, algorithm, config.pbac.posterior_sampling_rate, donate=donate)
    return env, trainer


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
    base = RUNS_ROOT / f"{profile}-{config.train.env}-s{config.train.seed}-{stamp}"
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
    env, trainer = build(config)
    if resume_dir is None:
        run_dir = new_run_dir(config, profile)
        record = {
            "profile": profile,
            "config": config_to_dict(config),
            "env_config": dataclasses.asdict(env.config) if dataclasses.is_dataclass(getattr(env, "config", None)) else {},
            "effective_steps": trainer.schedule.as_steps(),
            "device": device_description(),
            "created": datetime.now().isoformat(timespec="seconds"),
        }
        (run_dir / "config.json").write_text(json.dumps(record, indent=2) + "\n")
    return _Run(config, run_dir, trainer, resume=resume_dir is not None).execute()


class _Run:
    def __init__(self, config: RunConfig, run_dir: Path, trainer: Trainer, resume: bool):
        self.config, self.run_dir, self.trainer, self.resume = config, run_dir, trainer, resume
        self.train = config.train
        self.schedule = trainer.schedule
        self.checkpoint_dir = run_dir / "checkpoints"
        self.eval_key = jax.random.fold_in(jax.random.key(self.train.seed), 1)
        self.last_eval: float | None = None
        self.first_chunk = True  # the first chunk of this process includes compilation

    def execute(self) -> Path:
        state = self.trainer.init(jax.random.key(self.train.seed))
        chunk, elapsed = 0, 0.0
        if self.resume:
            path = checkpoint.latest(self.checkpoint_dir)
            state, metadata = checkpoint.restore(path, template=state)
            chunk, elapsed = metadata["chunk"], metadata["elapsed_s"]
            for name in ("metrics.jsonl", "eval.jsonl"):
                truncate_jsonl(self.run_dir / name, metadata["env_steps"])
        logger = RunLogger(self.run_dir, self.train.tensorboard, purge_step=(chunk * self.schedule.chunk_env_steps + 1) if self.resume else None)
        progress = Progress(self.schedule.total_env_steps, self.train.progress)
        if self.resume:
            progress.message(f"resuming {self.run_dir} from {path.name} ({chunk * self.schedule.chunk_env_steps:,} env steps)")
        else:
            progress.message(f"run directory: {self.run_dir}")
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
        first_call, self.first_chunk = self.first_chunk, False
        chunk += 1
        env_steps = chunk * self.schedule.chunk_env_steps
        bad = non_finite_metrics(metrics)
        if bad:
            saved = checkpoint.list_checkpoints(self.checkpoint_dir)
            keep = f"the last good checkpoint is {saved[-1]}" if saved else "no checkpoint was written before it"
            raise TrainingDiverged(
                f"training diverged in the chunk ending at {env_steps:,} env steps: non-finite "
                f"{', '.join(sorted(bad))}. Nothing after the previous checkpoint was saved; {keep}. "
                "Lower the learning rates or check the env overrides."
            )
        updates = 0 if warmup else self.schedule.iterations_per_chunk * self.train.updates_per_step
        record = {"env_steps": env_steps, "phase": "warmup" if warmup else "train"}
        episodes = int(metrics.pop("episodes"))
        return_sum, length_sum = float(metrics.pop("return_sum")), float(metrics.pop("length_sum"))
        record["episodes"] = episodes
        if episodes:
            record["episode_return"] = return_sum / episodes
            record["episode_length"] = length_sum / episodes
        if not warmup:  # during warm-up the update metrics are placeholders
            record.update({name: float(value) for name, value in metrics.items()})
        record["chunk_seconds"] = seconds
        record["compiled"] = first_call
        record["env_steps_per_s"] = self.schedule.chunk_env_steps / seconds
        record["updates_per_s"] = updates / seconds
        logger.log_chunk(record)
        if not first_call:
            progress.update(env_steps, self.schedule.chunk_env_steps, seconds, record["updates_per_s"], self.last_eval)
        else:
            progress.message(f"compiled and ran the first chunk in {seconds:.1f} s")
        return state, chunk

    def _evaluate(self, state, env_steps: int, logger: RunLogger) -> None:
        result = jax.device_get(self.trainer.evaluate(state.agent, jax.random.fold_in(self.eval_key, env_steps)))
        returns = np.asarray(result["returns"], dtype=float)
        self.last_eval = float(returns.mean())
        logger.log_eval(
            {
                "env_steps": env_steps,
                "return_mean": float(returns.mean()),
                "return_std": float(returns.std()),
                "length_mean": float(np.mean(result["lengths"])),
                "returns": returns.tolist(),
                "lengths": np.asarray(result["lengths"]).tolist(),
            }
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
        summary = {
            "status": status,
            "message": message,
            "elapsed_s": elapsed,
            "final_eval": evaluations[-1] if evaluations else None,
            "checkpoints": [p.name for p in checkpoint.list_checkpoints(self.checkpoint_dir)],
        }
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
