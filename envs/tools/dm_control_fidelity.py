"""How far the MJX DM Control tasks are from DM Control's own suite, measured on the same states.

As `envs.tools.gymnasium_fidelity` does for Gymnasium, two questions, kept apart:

- *Semantics*: given the same physics state, do our `observation` and `reward` equal DM Control's
  `get_observation` and `get_reward`? (`dm_rollout` records DM Control's states along a random
  rollout; `near_reward_states` draws states around each task's reward region, so both reward
  values and the region's edges occur; `dm_reference` evaluates DM Control on any state.)
- *Physics*: from the same state and action, how far is one MJX control step from DM Control's
  (C MuJoCo) step? (`one_step_deviation`.)

Needs the `dm-control` package (a dependency: the tasks read their model files from it).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jp
import numpy as np

DM_CONTROL_TASKS = {
    "cartpole_swingup_sparse": ("cartpole", "swingup_sparse"),
    "ball_in_cup_catch": ("ball_in_cup", "catch"),
    "reacher_hard": ("reacher", "hard"),
}


def make_dm_env(name: str, seed: int = 0):
    """DM Control's own environment for our task `name`."""
    from dm_control import suite

    if name not in DM_CONTROL_TASKS:
        raise ValueError(f"{name!r} has no DM Control counterpart; tasks: {sorted(DM_CONTROL_TASKS)}")
    return suite.load(*DM_CONTROL_TASKS[name], task_kwargs={"random": seed})


def flat_observation(observation) -> np.ndarray:
    """DM Control's observation dict flattened in its order (our layout)."""
    return np.concatenate([np.ravel(value) for value in observation.values()])


class States(NamedTuple):
    qpos: np.ndarray
    qvel: np.ndarray
    target: np.ndarray | None
    """Reacher's target xy per state; None for the other tasks."""


class Rollout(NamedTuple):
    states: States
    """The state after each step."""
    actions: np.ndarray
    """The action that led to each state."""
    observations: np.ndarray
    rewards: np.ndarray
    discounts: np.ndarray


def _target(name: str, physics) -> np.ndarray | None:
    return physics.named.model.geom_pos["target", :2].copy() if name == "reacher_hard" else None


def dm_rollout(name: str, steps: int, seed: int = 0) -> Rollout:
    """DM Control's states, observations, rewards and discounts along a uniformly random rollout."""
    env = make_dm_env(name, seed)
    rng = np.random.default_rng(seed)
    env.reset()
    spec = env.action_spec()
    columns = {key: [] for key in ("qpos", "qvel", "target", "actions", "observations", "rewards", "discounts")}
    for _ in range(steps):
        action = rng.uniform(spec.minimum, spec.maximum)
        step = env.step(action)
        columns["qpos"].append(env.physics.data.qpos.copy())
        columns["qvel"].append(env.physics.data.qvel.copy())
        columns["target"].append(_target(name, env.physics))
        columns["actions"].append(action)
        columns["observations"].append(flat_observation(step.observation))
        columns["rewards"].append(step.reward)
        columns["discounts"].append(step.discount)
    target = None if name != "reacher_hard" else np.array(columns["target"])
    return Rollout(
        States(np.array(columns["qpos"]), np.array(columns["qvel"]), target),
        *(np.array(columns[key]) for key in ("actions", "observations", "rewards", "discounts")),
    )


def near_reward_states(name: str, count: int, seed: int = 1) -> States:
    """States drawn around the task's reward region, straddling its edges."""
    rng = np.random.default_rng(seed)
    qvel = rng.normal(0.0, 0.5, (count, 4 if name == "ball_in_cup_catch" else 2))
    if name == "cartpole_swingup_sparse":
        # reward region |x| <= 0.25 and cos(angle) >= 0.995 (|angle| <= 0.1 rad)
        qpos = np.stack([rng.uniform(-0.35, 0.35, count), rng.uniform(-0.15, 0.15, count)], axis=1)
        return States(qpos, qvel, None)
    if name == "ball_in_cup_catch":
        # cup anywhere, ball around the cup's target box (0.05 below the cup body at height 0.6;
        # the ball body sits at 0.2)
        cup = rng.uniform(-0.2, 0.2, (count, 2))
        ball = cup + np.stack([rng.uniform(-0.05, 0.05, count), 0.4 + rng.uniform(-0.06, 0.06, count)], axis=1)
        return States(np.concatenate([cup, ball], axis=1), qvel, None)
    if name != "reacher_hard":
        raise ValueError(f"unknown task {name!r}")
    # the arm anywhere; DM Control's target distribution, half of the targets put near the finger
    qpos = np.stack([rng.uniform(-math.pi, math.pi, count), rng.uniform(-2.79, 2.79, count)], axis=1)
    angle, radius = rng.uniform(0, 2 * math.pi, count), rng.uniform(0.05, 0.2, count)
    target = np.stack([radius * np.sin(angle), radius * np.cos(angle)], axis=1)
    shoulder, elbow = qpos[:, 0], qpos[:, 0] + qpos[:, 1]  # two links of 0.12 along each body's x
    finger = 0.12 * np.stack([np.cos(shoulder) + np.cos(elbow), np.sin(shoulder) + np.sin(elbow)], axis=1)
    offset_angle, offset = rng.uniform(0, 2 * math.pi, count), rng.uniform(0.0, 0.04, count)
    near = finger + offset[:, None] * np.stack([np.cos(offset_angle), np.sin(offset_angle)], axis=1)
    target[: count // 2] = near[: count // 2]  # within 0.04 of the finger; reward radius 0.025
    return States(qpos, qvel, target)


def set_dm_state(physics, states: States, i: int) -> None:
    """Writes state i (qpos, qvel and reacher's target) into DM Control's physics, then forward."""
    with physics.reset_context():
        physics.data.qpos[:] = states.qpos[i]
        physics.data.qvel[:] = states.qvel[i]
        if states.target is not None:
            physics.named.model.geom_pos["target", ["x", "y"]] = states.target[i]


def dm_reference(name: str, states: States) -> tuple[np.ndarray, np.ndarray]:
    """DM Control's (observations, rewards) at each state."""
    env = make_dm_env(name)
    env.reset()
    observations, rewards = [], []
    for i in range(len(states.qpos)):
        set_dm_state(env.physics, states, i)
        observations.append(flat_observation(env.task.get_observation(env.physics)))
        rewards.append(float(env.task.get_reward(env.physics)))
    return np.array(observations), np.array(rewards)


def our_reference(env, states: States) -> tuple[np.ndarray, np.ndarray]:
    """Our (observations, rewards) at each state, in one vmapped program."""

    @jax.jit
    @jax.vmap
    def evaluate(qpos, qvel, target):
        data = env.data_from_state(qpos, qvel)
        info = {} if target is None else {"target": target}
        return env.observation(data, info), env.reward(data, info)

    target = None if states.target is None else jp.asarray(states.target, jp.float32)
    observation, reward = evaluate(jp.asarray(states.qpos, jp.float32), jp.asarray(states.qvel, jp.float32), target)
    return np.asarray(observation), np.asarray(reward)


def one_step_deviation(env, name: str, num_states: int = 20, seed: int = 0, stride: int = 3) -> dict[str, float]:
    """From every `stride`-th state of a DM Control rollout, one control step (the rollout's next
    action) in C MuJoCo and in MJX: max and median |difference| of qpos and qvel."""
    rollout = dm_rollout(name, num_states * stride + 1, seed)
    dm_env = make_dm_env(name)
    dm_env.reset()
    physics = dm_env.physics
    starts = np.arange(0, num_states * stride, stride)
    expected_qpos, expected_qvel = [], []
    for i in starts:
        set_dm_state(physics, rollout.states, i)
        physics.set_control(rollout.actions[i + 1])
        for _ in range(env._frame_skip):  # private: C MuJoCo steps, as DM Control's env does
            physics.step()
        expected_qpos.append(physics.data.qpos.copy())
        expected_qvel.append(physics.data.qvel.copy())

    @jax.jit
    @jax.vmap
    def one_step(qpos, qvel, action):
        data = env.physics_step(env.data_from_state(qpos, qvel), env.action_to_ctrl(action))
        return data.qpos, data.qvel

    got_qpos, got_qvel = one_step(
        jp.asarray(rollout.states.qpos[starts], jp.float32),
        jp.asarray(rollout.states.qvel[starts], jp.float32),
        jp.asarray(rollout.actions[starts + 1], jp.float32),
    )
    qpos_error = np.abs(np.asarray(got_qpos) - np.array(expected_qpos))
    qvel_error = np.abs(np.asarray(got_qvel) - np.array(expected_qvel))
    return {
        "qpos_max": float(qpos_error.max()),
        "qpos_median": float(np.median(qpos_error)),
        "qvel_max": float(qvel_error.max()),
        "qvel_median": float(np.median(qvel_error)),
        "qvel_abs_max": float(np.abs(rollout.states.qvel).max()),
    }
