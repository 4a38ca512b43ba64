"""DM Control's sparse tasks in MJX against DM Control's own suite (the `dm-control` package).

Observation, reward and termination are compared on the very same physics states: DM Control's
random rollouts (states as its physics reaches them) plus states drawn around each task's reward
region (so that both reward values and the region's edges are exercised), written into DM
Control's physics and into ours. The one-step physics of MJX is compared with C MuJoCo on the
rollout states, and the episode limit with DM Control's time limit.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jp
import numpy as np
import pytest

import envs

dm_suite = pytest.importorskip("dm_control.suite")

TASKS = {
    "cartpole_swingup_sparse": ("cartpole", "swingup_sparse"),
    "ball_in_cup_catch": ("ball_in_cup", "catch"),
    "reacher_hard": ("reacher", "hard"),
}
ROLLOUT_STEPS = 300


def _dm_env(name, seed=0):
    return dm_suite.load(*TASKS[name], task_kwargs={"random": seed})


def _flat(observation):
    return np.concatenate([np.ravel(value) for value in observation.values()])


def _near_reward_states(name, rng, count):
    """(qpos, qvel, target xy) around the task's reward region."""
    qvel = rng.normal(0.0, 0.5, (count, 4 if name == "ball_in_cup_catch" else 2))
    if name == "cartpole_swingup_sparse":
        # |x| <= 0.25 and cos(angle) >= 0.995 (|angle| <= 0.1 rad): straddle both edges
        qpos = np.stack([rng.uniform(-0.35, 0.35, count), rng.uniform(-0.15, 0.15, count)], axis=1)
        return qpos, qvel, None
    if name == "ball_in_cup_catch":
        # cup anywhere, ball around the cup's target box (centre 0.05 below the cup body)
        cup = rng.uniform(-0.2, 0.2, (count, 2))
        ball = cup + np.stack([rng.uniform(-0.05, 0.05, count), 0.4 + rng.uniform(-0.06, 0.06, count)], axis=1)
        return np.concatenate([cup, ball], axis=1), qvel, None
    # reacher: targets at DM Control's radii, the arm anywhere; half the targets put on the finger
    qpos = np.stack([rng.uniform(-math.pi, math.pi, count), rng.uniform(-2.79, 2.79, count)], axis=1)
    angle, radius = rng.uniform(0, 2 * math.pi, count), rng.uniform(0.05, 0.2, count)
    target = np.stack([radius * np.sin(angle), radius * np.cos(angle)], axis=1)
    # the finger of the planar two-link arm (links 0.12 and 0.12 along each body's x axis)
    shoulder, elbow = qpos[:, 0], qpos[:, 0] + qpos[:, 1]
    finger = 0.12 * np.stack([np.cos(shoulder) + np.cos(elbow), np.sin(shoulder) + np.sin(elbow)], axis=1)
    offset_angle, offset = rng.uniform(0, 2 * math.pi, count), rng.uniform(0.0, 0.04, count)
    near = finger + offset[:, None] * np.stack([np.cos(offset_angle), np.sin(offset_angle)], axis=1)
    target[: count // 2] = near[: count // 2]  # within 0.04 of the finger; reward radius 0.025
    return qpos, qvel, target


def _dm_reference(name, states):
    """DM Control's observation and reward at each (qpos, qvel[, target]) state."""
    env = _dm_env(name)
    env.reset()
    physics, task = env.physics, env.task
    observations, rewards, finger = [], [], []
    for qpos, qvel, target in states:
        with physics.reset_context():
            physics.data.qpos[:] = qpos
            physics.data.qvel[:] = qvel
            if target is not None:
                physics.named.model.geom_pos["target", ["x", "y"]] = target
        observations.append(_flat(task.get_observation(physics)))
        rewards.append(float(task.get_reward(physics)))
        if name == "reacher_hard":
            finger.append(physics.named.data.geom_xpos["finger", :2].copy())
    return np.array(observations), np.array(rewards), np.array(finger)


def _ours(name, qpos, qvel, target):
    env = envs.make(name)

    @jax.jit
    @jax.vmap
    def evaluate(qpos, qvel, target):
        data = env.data_from_state(qpos, qvel)
        info = {} if target is None else {"target": target}
        return env.observation(data, info), env.reward(data, info)

    target = None if target is None else jp.asarray(target, jp.float32)
    observation, reward = evaluate(jp.asarray(qpos, jp.float32), jp.asarray(qvel, jp.float32), target)
    return np.asarray(observation), np.asarray(reward)


def _rollout_states(name, steps=ROLLOUT_STEPS, seed=0):
    """DM Control's states along a uniformly random rollout, with its observations and rewards."""
    env = _dm_env(name, seed)
    rng = np.random.default_rng(seed)
    env.reset()
    spec = env.action_spec()
    qpos, qvel, targets, observations, rewards, discounts, actions = [], [], [], [], [], [], []
    for _ in range(steps):
        action = rng.uniform(spec.minimum, spec.maximum)
        step = env.step(action)
        qpos.append(env.physics.data.qpos.copy())
        qvel.append(env.physics.data.qvel.copy())
        if name == "reacher_hard":
            targets.append(env.physics.named.model.geom_pos["target", :2].copy())
        observations.append(_flat(step.observation))
        rewards.append(step.reward)
        discounts.append(step.discount)
        actions.append(action)
    target = np.array(targets) if targets else None
    return np.array(qpos), np.array(qvel), target, np.array(observations), np.array(rewards), np.array(discounts), np.array(actions)


@pytest.mark.parametrize("name", list(TASKS))
def test_observation_and_reward_equal_dm_control_on_the_same_states(name):
    qpos, qvel, target, dm_obs, dm_reward, discount, _ = _rollout_states(name)
    rng = np.random.default_rng(1)
    near_qpos, near_qvel, near_target = _near_reward_states(name, rng, 400)
    targets = [None] * len(near_qpos) if near_target is None else list(near_target)
    near_obs, near_reward, _ = _dm_reference(name, list(zip(near_qpos, near_qvel, targets)))

    all_qpos = np.concatenate([qpos, near_qpos])
    all_qvel = np.concatenate([qvel, near_qvel])
    all_target = None if target is None else np.concatenate([target, near_target])
    expected_obs = np.concatenate([dm_obs, near_obs])
    expected_reward = np.concatenate([dm_reward, near_reward])
    obs, reward = _ours(name, all_qpos, all_qvel, all_target)

    assert obs.shape == expected_obs.shape  # the layouts map one to one
    np.testing.assert_allclose(obs, expected_obs, atol=2e-5, rtol=1e-5)
    assert set(np.unique(reward)) <= {0.0, 1.0} and set(np.unique(expected_reward)) <= {0.0, 1.0}
    np.testing.assert_array_equal(reward, expected_reward)
    # the near-reward states exercise both values
    assert 0.1 < near_reward.mean() < 0.9, near_reward.mean()
    # never terminal: DM Control's discount is 1 on every step
    np.testing.assert_array_equal(discount, 1.0)


@pytest.mark.parametrize("name", list(TASKS))
def test_episode_limit_and_sizes_match_dm_control(name):
    dm_env = _dm_env(name)
    env = envs.make(name)
    dm_env.reset()
    steps, step = 0, None
    zero = np.zeros(dm_env.action_spec().shape)
    while step is None or not step.last():
        step = dm_env.step(zero)
        steps += 1
    assert steps == env.episode_length == 1000 and step.discount == 1.0  # a time limit, not a terminal
    assert env.dt == pytest.approx(dm_env.control_timestep())
    assert env.action_size == dm_env.action_spec().shape[0]
    assert env.observation_size == sum(int(np.prod(s.shape)) for s in dm_env.observation_spec().values())
    np.testing.assert_array_equal(dm_env.action_spec().minimum, -1.0)  # actions map 1:1 onto ctrl
    np.testing.assert_array_equal(dm_env.action_spec().maximum, 1.0)


# One MJX step from DM Control's states against C MuJoCo's (DM Control's own step).
PHYSICS_BOUNDS = {  # max |difference| (qpos, qvel) after one control step; measured in README
    "cartpole_swingup_sparse": (1e-6, 1e-6),  # measured 1.7e-7, 3.1e-8
    "ball_in_cup_catch": (2e-5, 2e-3),  # measured 2.8e-6, 2.3e-4 (10 substeps, contacts, tendon limit)
    "reacher_hard": (1e-6, 1e-5),  # measured 1.2e-7, 8.8e-7
}


@pytest.mark.parametrize("name", list(TASKS))
def test_one_mjx_step_follows_c_mujoco(name):
    qpos, qvel, target, _, _, _, actions = _rollout_states(name, steps=60)
    env = envs.make(name)
    dm_env = _dm_env(name)
    dm_env.reset()
    physics = dm_env.physics
    expected_qpos, expected_qvel, starts = [], [], []
    for i in range(0, len(qpos) - 1, 3):
        with physics.reset_context():
            physics.data.qpos[:] = qpos[i]
            physics.data.qvel[:] = qvel[i]
        physics.set_control(actions[i + 1])
        for _ in range(env._frame_skip):  # noqa: SLF001
            physics.step()
        expected_qpos.append(physics.data.qpos.copy())
        expected_qvel.append(physics.data.qvel.copy())
        starts.append(i)

    @jax.jit
    @jax.vmap
    def one_step(qpos, qvel, action):
        data = env.physics_step(env.data_from_state(qpos, qvel), env.action_to_ctrl(action))
        return data.qpos, data.qvel

    got_qpos, got_qvel = one_step(
        jp.asarray(qpos[starts], jp.float32), jp.asarray(qvel[starts], jp.float32), jp.asarray(actions[np.array(starts) + 1], jp.float32)
    )
    qpos_bound, qvel_bound = PHYSICS_BOUNDS[name]
    assert np.max(np.abs(np.asarray(got_qpos) - np.array(expected_qpos))) < qpos_bound
    assert np.max(np.abs(np.asarray(got_qvel) - np.array(expected_qvel))) < qvel_bound


def test_reacher_target_is_redrawn_at_every_reset_and_kept_within_an_episode():
    env = envs.wrap_for_training(envs.make("reacher_hard"), 4, episode_length=3)
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    first = np.asarray(state.info["target"])
    assert len(np.unique(first, axis=0)) == 4
    radius = np.linalg.norm(first, axis=1)
    assert np.all((radius >= 0.05) & (radius <= 0.2))
    action = jp.zeros((4, 2))
    state = step(state, action)
    np.testing.assert_array_equal(state.info["target"], first)  # same episode
    state = step(step(state, action), action)  # the third step ends the episode: new targets
    assert not np.any(np.all(np.asarray(state.info["target"]) == first, axis=1))
