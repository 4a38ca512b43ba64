"""What a run's checkpoint records beside the training state (where in the schedule it stands, its
clocks, its pace, its config), and how a resumed run reads that back: refusing a checkpoint of
other settings or beyond the run's end, and continuing the clocks and the pace. The state itself
is `mjx_pbac.checkpoint`'s."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import jax

from mjx_pbac import rundir
from mjx_pbac.config import RunConfig, config_from_dict, config_to_dict
from mjx_pbac.records import Clocks
from mjx_pbac.rundir import CHANGEABLE_ON_RESUME, RunError
from mjx_pbac.schedule import Schedule


def metadata(config: RunConfig, schedule: Schedule, iteration: int, evaluation_pending: bool, clocks: Clocks, seconds_per_iteration: dict[str, float]) -> dict[str, Any]:
    """The record a checkpoint after `iteration` vector steps carries; `evaluation_pending`: the
    evaluation due there was left to the resumed run (a stop came first)."""
    return {
        "chunk": iteration // schedule.iterations_per_chunk,
        "iterations": iteration,
        "evaluation_pending": evaluation_pending,
        "seconds_per_iteration": dict(seconds_per_iteration),
        "timing_device": jax.devices()[0].device_kind,
        "elapsed_s": clocks.wall_s,
        "train_s": clocks.train_s,
        "compile_s": clocks.compile_s,
        "eval_s": clocks.eval_s,
        "config": config_to_dict(config),
    }


class Point(NamedTuple):
    """Where a checkpoint lets a run continue."""

    iteration: int
    """Vector steps done."""
    evaluated: bool
    """Whether the evaluation due there was run."""
    clocks: tuple[float, float, float, float]
    """(wall_s, train_s, compile_s, eval_s) at the checkpoint (`Clocks.continue_from`)."""
    seconds_per_iteration: dict[str, float]
    """The pace measured before it, when it was measured on this kind of device (else empty)."""


def point(metadata: dict[str, Any], path: Path, config: RunConfig, schedule: Schedule, run_dir: Path) -> Point:
    """Where the checkpoint at `path` (its `metadata`) lets `config`'s run continue; a RunError
    when it was written with other settings or lies beyond the run's end."""
    differing = _differing_settings(metadata.get("config"), config)
    if differing:
        raise RunError(
            f"checkpoint {path} was written with other settings than {run_dir}/config.json "
            f"({', '.join(differing)}): it belongs to another run; move it away or start a new run"
        )
    # Checkpoints written before chunks could be split count whole chunks only.
    iteration = int(metadata.get("iterations", int(metadata["chunk"]) * schedule.iterations_per_chunk))
    if iteration * schedule.num_envs != metadata["env_steps"] or iteration > schedule.num_chunks * schedule.iterations_per_chunk:
        raise RunError(
            f"checkpoint {path} is at {metadata['env_steps']:,} env steps, beyond this run's "
            f"{schedule.total_env_steps:,}; raise --train.total-steps to continue it"
        )
    wall_s = float(metadata["elapsed_s"])
    # Checkpoints written before train_s existed: its clock continues from the wall-clock's.
    clocks = (wall_s, float(metadata.get("train_s", wall_s)), float(metadata.get("compile_s", 0.0)), float(metadata.get("eval_s", 0.0)))
    pace = {}
    if metadata.get("timing_device") == jax.devices()[0].device_kind:  # timed on this kind of device
        pace = {kind: float(value) for kind, value in dict(metadata.get("seconds_per_iteration") or {}).items()}
    return Point(iteration, not metadata.get("evaluation_pending", False), clocks, pace)


def _with_defaults(stored: dict[str, Any]) -> dict[str, Any]:
    """A config record as this version writes it: options added since it was written take their
    defaults (the options' "off"); a record this version cannot read is returned as it is."""
    try:
        return json.loads(json.dumps(config_to_dict(config_from_dict(stored))))
    except (ValueError, TypeError):
        return stored


def _differing_settings(stored: dict[str, Any] | None, config: RunConfig) -> list[str]:
    """The settings ("train.batch_size", ...) a checkpoint's config (`stored`, None for none
    recorded) trained with other values than `config`: only what this run trains (sections of
    other algorithms, or ones added since, do not count), the changeable ones aside."""
    if stored is None:
        return []
    stored = _with_defaults(stored)  # options added since it was written read as their defaults
    current = json.loads(json.dumps(config_to_dict(config)))
    trained = ("train", "algo", config.algo)
    return [
        name for name in rundir.config_differences({k: stored.get(k) for k in trained}, {k: current.get(k) for k in trained})
        if name.removeprefix("train.") not in (*CHANGEABLE_ON_RESUME, "run_dir")
    ]
