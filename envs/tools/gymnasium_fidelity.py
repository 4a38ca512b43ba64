"""How far the MJX envs are from Gymnasium's C MuJoCo envs, measured on the same states.

Two questions, kept apart:

- *Semantics*: given the same MuJoCo states, do `observation`, `reward` and `terminated` equal
  Gymnasium v4's? (`gym_rollout` records Gymnasium's transitions; the tests replay them through
  our pure functions.)
- *Physics*: from the same state and action, how far is one MJX env step from one C MuJoCo env
  step? (`one_step_deviation`; the table of docs/environments.md "Physics changes, and their measured effect" and a test bound it.)
"""

from __future__ import annotations

import dataclasses

import gymnasium
import jax
import mujoco
import numpy as np
from mujoco import mjx

GYMNASIUM_IDS = {"ant": "Ant-v4", "hopper": "Hopper-v4", "humanoid": "Humanoid-v4"}


def robot_of(env_name: str) -> str:
    """'ant_very_delayed' -> 'ant'."""
    robot = env_name.split("_")[0]
    if robot not in GYMNASIUM_IDS:
        raise ValueError(f"{env_name!r} has no Gymnasium counterpart; robots: {sorted(GYMNASIUM_IDS)}")
    return robot


def make_gymnasium(env_name: str) -> gymnasium.Env:
    """Gymnasium's own v4 env for the robot of `env_name` (unwrapped: no time limit)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # v4 is deprecated in favour of v5; v4 is what we match
        return gymnasium.make(GYMNASIUM_IDS[robot_of(env_name)]).unwrapped


@dataclasses.dataclass
class Transition:
    """One Gymnasium step: MuJoCo data before and after, our action in [-1, 1], its outputs."""

    prev_data: mujoco.MjData
    data: mujoco.MjData
    action: np.ndarray
    obs: np.ndarray
    reward: float
    terminated: bool


def gym_rollout(env_name: str, num_steps: int, seed: int = 0) -> list[Transition]:
    """`num_steps` Gymnasium transitions under uniform random actions, resetting on termination."""
    genv = make_gymnasium(env_name)
    low, high = genv.action_space.low, genv.action_space.high
    rng = np.random.default_rng(seed)
    genv.reset(seed=seed)
    transitions = []
    for _ in range(num_steps):
        prev_data = _copy_data(genv.model, genv.data)
        action = rng.uniform(-1.0, 1.0, size=low.shape)
        obs, reward, terminated, _, _ = genv.step(low + 0.5 * (action + 1.0) * (high - low))
        transitions.append(
            Transition(prev_data, _copy_data(genv.model, genv.data), action, obs, reward, terminated)
        )
        if terminated:
            genv.reset(seed=int(rng.integers(1 << 30)))
    return transitions


def _copy_data(model: mujoco.MjModel, data: mujoco.MjData) -> mujoco.MjData:
    copy = mujoco.MjData(model)
    mujoco.mj_copyData(copy, model, data)
    return copy


def to_mjx(env, data: mujoco.MjData) -> mjx.Data:
    """C MuJoCo data as `mjx.Data` for `env` (all derived quantities carried over as they are)."""
    return mjx.put_data(env.mj_model, data)


def one_step_deviation(env, num_states: int = 16, seed: int = 0, stride: int = 10) -> dict[str, float]:
    """Max and median |MJX step - C MuJoCo step| in qpos and qvel over random visited states.

    States are every `stride`-th state of a Gymnasium random rollout (so falls, contacts and
    resets are among them); from each, one env step (frame_skip substeps) is taken by
    Gymnasium's C MuJoCo and by `env.physics_step` with the same control.
    """
    transitions = gym_rollout(type(env).__name__.lower(), num_states * stride, seed)[::stride]
    step = jax.jit(env.physics_step)
    qpos_err, qvel_err, qvel_scale = [], [], []
    for tr in transitions:
        ours = step(to_mjx(env, tr.prev_data), env.action_to_ctrl(tr.action))
        qpos_err.append(np.max(np.abs(np.asarray(ours.qpos) - tr.data.qpos)))
        qvel_err.append(np.max(np.abs(np.asarray(ours.qvel) - tr.data.qvel)))
        qvel_scale.append(np.max(np.abs(tr.data.qvel)))
    return {
        "qpos_max": float(np.max(qpos_err)),
        "qpos_median": float(np.median(qpos_err)),
        "qvel_max": float(np.max(qvel_err)),
        "qvel_median": float(np.median(qvel_err)),
        "qvel_scale_median": float(np.median(qvel_scale)),
        "num_states": len(transitions),
    }

