"""Env throughput: MJX env steps per second and compile time against instance count.

For each env and instance count N, one jitted program runs `steps_per_call` steps of N
auto-resetting instances (`envs.wrap_for_training`) under uniform random actions drawn on the
device, inside `lax.scan`, so nothing crosses to the host between steps. The program is compiled
once (timed), run once to warm up, then `repeats` times; the median gives steps/s. In the same run
Gymnasium's own C MuJoCo env (one instance, the usual way of running it) is timed for the ratio.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import resource
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import mujoco
import numpy as np

import envs
from envs.tools.gymnasium_fidelity import GYMNASIUM_IDS, make_gymnasium, robot_of


@dataclasses.dataclass(frozen=True)
class EnvBenchConfig:
    """What `train.py bench-env` measures."""

    env_names: tuple[str, ...] = ("ant", "hopper", "humanoid")
    """Registered envs to time (delayed variants share their robot's physics cost)."""
    num_envs: tuple[int, ...] = (1, 16, 64, 256, 1024)
    """Instance counts; larger counts stop at the first out-of-memory."""
    steps_per_call: int = 20
    """Env steps per jitted call (a `lax.scan` chunk)."""
    repeats: int = 3
    """Timed calls after the warm-up call; the median is reported."""
    gymnasium_steps: int = 500
    """Steps of Gymnasium's C MuJoCo env timed for the ratio (0 skips it)."""
    overrides: tuple[tuple[str, Any], ...] = ()
    """Env overrides applied to every env, e.g. (("integrator", "euler"),)."""

    def __post_init__(self) -> None:
        if not self.env_names or not self.num_envs:
            raise ValueError("give at least one env name and one instance count")
        if min(self.num_envs) < 1:
            raise ValueError(f"instance counts must be >= 1, got {list(self.num_envs)}")
        if self.steps_per_call < 1 or self.repeats < 1:
            raise ValueError(
                f"steps_per_call and repeats must be >= 1, got {self.steps_per_call}, {self.repeats}"
            )
        if self.gymnasium_steps < 0:
            raise ValueError(f"gymnasium_steps must be >= 0 (0 skips it), got {self.gymnasium_steps}")


def device_info() -> dict[str, Any]:
    device = jax.devices()[0]
    return {
        "platform": device.platform,
        "device_kind": device.device_kind,
        "num_devices": jax.device_count(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "jax": jax.__version__,
        "mujoco": mujoco.__version__,
    }


def _peak_memory_bytes() -> int | None:
    """Peak device memory where the backend reports it (GPU), else the process's peak RSS."""
    stats = jax.devices()[0].memory_stats() or {}
    if "peak_bytes_in_use" in stats:
        return int(stats["peak_bytes_in_use"])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _rollout_program(env: envs.Env, num_envs: int, num_steps: int) -> Callable:
    batched = envs.wrap_for_training(env, num_envs)

    def run(state, key):
        def body(state, step_key):
            action = jax.random.uniform(step_key, (num_envs, env.action_size), minval=-1, maxval=1)
            state = batched.step(state, action)
            return state, state.reward.sum()

        state, rewards = jax.lax.scan(body, state, jax.random.split(key, num_steps))
        return state, rewards.sum()

    return jax.jit(batched.reset), jax.jit(run, donate_argnums=0)


def time_mjx(name: str, num_envs: int, cfg: EnvBenchConfig) -> dict[str, Any]:
    env = envs.make(name, **dict(cfg.overrides))
    reset, run = _rollout_program(env, num_envs, cfg.steps_per_call)
    key = jax.random.PRNGKey(0)
    state = jax.block_until_ready(reset(key))
    start = time.perf_counter()
    compiled = run.lower(state, key).compile()
    compile_s = time.perf_counter() - start
    state, total = compiled(state, key)  # warm-up
    jax.block_until_ready(total)
    times = []
    for i in range(cfg.repeats):
        start = time.perf_counter()
        state, total = compiled(state, jax.random.fold_in(key, i))
        jax.block_until_ready(total)
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    return {
        "env": name,
        "num_envs": num_envs,
        "compile_s": round(compile_s, 3),
        "seconds_per_call": round(seconds, 5),
        "steps_per_s": round(num_envs * cfg.steps_per_call / seconds, 1),
        "finite": bool(np.isfinite(float(total))),
        "peak_memory_bytes": _peak_memory_bytes(),
    }


def time_gymnasium(name: str, num_steps: int, seed: int = 0) -> dict[str, Any]:
    """Steps/s of Gymnasium's own env for `name`'s robot (for a Meta-World task, Meta-World's own
    env, resets included at its 500-step episodes): one instance, random actions."""
    from envs.metaworld import TASKS as METAWORLD_TASKS

    if name in METAWORLD_TASKS:
        from envs.tools import metaworld_reference

        task = METAWORLD_TASKS[name].metaworld_name
        timed = metaworld_reference.steps_per_second(task, steps=num_steps, seed=seed)
        return {"env": f"metaworld {task}", "steps_per_s": round(timed["steps_per_second_with_resets"], 1)}
    genv = make_gymnasium(name)
    genv.reset(seed=seed)
    rng = np.random.default_rng(seed)
    actions = rng.uniform(genv.action_space.low, genv.action_space.high, (num_steps, genv.action_space.shape[0]))
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, _, _ = genv.step(action)
        if terminated:
            genv.reset()
    seconds = time.perf_counter() - start
    return {"env": GYMNASIUM_IDS[robot_of(name)], "steps_per_s": round(num_steps / seconds, 1)}


def _is_out_of_memory(error: Exception) -> bool:
    return "RESOURCE_EXHAUSTED" in str(error) or "out of memory" in str(error).lower()


def run_benchmark(
    cfg: EnvBenchConfig, progress: Callable[[str], None] = print, out: str | None = None
) -> dict[str, Any]:
    """Times every (env, num_envs); with `out`, rewrites the report there after each row, so a
    run stopped part-way (by a time limit, say) keeps what it measured."""
    report: dict[str, Any] = {
        "device": device_info(),
        "config": dataclasses.asdict(cfg),
        "mjx": [],
        "gymnasium": {},
    }
    for name in cfg.env_names:
        if cfg.gymnasium_steps > 0:
            report["gymnasium"][name] = time_gymnasium(name, cfg.gymnasium_steps)
            progress(f"{name}: gymnasium C MuJoCo {report['gymnasium'][name]['steps_per_s']} steps/s")
        for num_envs in cfg.num_envs:
            try:
                row = time_mjx(name, num_envs, cfg)
            except Exception as error:  # an OOM ends this env's sweep, not the run
                if not _is_out_of_memory(error):
                    raise
                report["mjx"].append({"env": name, "num_envs": num_envs, "error": "out of memory"})
                progress(f"{name} N={num_envs}: out of memory; larger counts skipped")
                break
            gym = report["gymnasium"].get(name)
            if gym:
                row["ratio_to_gymnasium"] = round(row["steps_per_s"] / gym["steps_per_s"], 3)
            report["mjx"].append(row)
            if out:
                write_report(report, out)
            progress(
                f"{name} N={num_envs}: {row['steps_per_s']} steps/s, compile {row['compile_s']} s"
                + (f", {row['ratio_to_gymnasium']}x gymnasium" if gym else "")
            )
    return report


def write_report(report: dict[str, Any], path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(report, f, indent=2)


__all__ = ["EnvBenchConfig", "device_info", "run_benchmark", "time_gymnasium", "time_mjx", "write_report"]
