"""The MJX locomotion envs against Gymnasium's own v4 envs, and their physics against C MuJoCo.

Semantics are compared on the very same MuJoCo states (Gymnasium's, carried into MJX with
`mjx.put_data`), so any difference is ours and not the simulator's.
"""

import jax
import numpy as np
import pytest

import envs
from envs.tools.gymnasium_fidelity import gym_rollout, make_gymnasium, one_step_deviation, robot_of, to_mjx

LOCOMOTION = [
    "ant",
    "ant_delayed",
    "ant_very_delayed",
    "hopper",
    "hopper_delayed",
    "hopper_very_delayed",
    "humanoid",
    "humanoid_delayed",
    "humanoid_very_delayed",
]
SIZES = {"ant": (27, 8), "hopper": (11, 3), "humanoid": (376, 17)}
CFRC_EXT = {"humanoid": 14 * 6}  # trailing cfrc_ext block, zeros as in v4 (docs/design.md "Environments")


def _jitted(env):
    return jax.jit(env.observation), jax.jit(env.reward), jax.jit(env.terminated)


@pytest.mark.parametrize("name", LOCOMOTION)
@pytest.mark.slow
def test_observation_reward_termination_equal_gymnasium_v4(name):
    env = envs.make(name)
    robot = robot_of(name)
    observation, reward, terminated = _jitted(env)
    num_steps = 60 if robot == "humanoid" else 150
    transitions = gym_rollout(name, num_steps, seed=1)
    assert any(t.terminated for t in transitions) or robot == "ant"
    tail = CFRC_EXT.get(robot, 0)
    c, w = env.config.delay_threshold, env.config.action_cost_weight
    for tr in transitions:
        prev, cur = to_mjx(env, tr.prev_data), to_mjx(env, tr.data)
        obs = np.asarray(observation(cur))
        assert obs.shape == (SIZES[robot][0],)
        np.testing.assert_allclose(obs[: obs.size - tail], tr.obs[: obs.size - tail], rtol=1e-5, atol=1e-5)
        assert not obs[obs.size - tail :].any()
        assert bool(terminated(cur)) == tr.terminated
        if c is None:
            expected = tr.reward
        else:
            # Gymnasium has no delayed variant: the paper's r_delayed (appendix "MuJoCo", Table 3) on Gymnasium's state.
            expected = float(tr.data.qpos[0] >= c) * tr.data.qvel[0] - w * np.sum(tr.action**2)
        np.testing.assert_allclose(float(reward(prev, cur, tr.action)), expected, rtol=1e-5, atol=2e-4)


@pytest.mark.parametrize("name", ["ant_delayed", "ant_very_delayed", "hopper_very_delayed", "humanoid_delayed"])
def test_delayed_reward_on_both_sides_of_threshold(name):
    env = envs.make(name)
    reward = jax.jit(env.reward)
    c, w = env.config.delay_threshold, env.config.action_cost_weight
    transitions = gym_rollout(name, 20, seed=2)
    rng = np.random.default_rng(0)
    above = []
    for tr in transitions:
        prev, cur = to_mjx(env, tr.prev_data), to_mjx(env, tr.data)
        x = c + rng.uniform(-0.5, 0.5)
        cur = cur.replace(qpos=cur.qpos.at[0].set(x))
        above.append(x >= c)
        expected = float(x >= c) * tr.data.qvel[0] - w * np.sum(tr.action**2)
        np.testing.assert_allclose(float(reward(prev, cur, tr.action)), expected, rtol=1e-5, atol=1e-5)
    assert 0 < sum(above) < len(above)


HEALTH_CASES = {
    # (qpos index, value) edits of the initial state; Gymnasium decides what is healthy.
    "ant": [(2, 0.1), (2, 0.2), (2, 0.55), (2, 1.0), (2, 1.05)],
    "hopper": [(1, 0.69), (1, 0.71), (2, 0.19), (2, 0.21), (2, -0.21), (3, 100.5), (3, 99.0)],
    "humanoid": [(2, 0.99), (2, 1.01), (2, 1.99), (2, 2.01)],
}


@pytest.mark.parametrize("robot", sorted(HEALTH_CASES))
def test_termination_matches_gymnasium_at_health_boundaries(robot):
    env = envs.make(robot)
    terminated = jax.jit(env.terminated)
    genv = make_gymnasium(robot)
    genv.reset(seed=0)
    for index, value in HEALTH_CASES[robot]:
        qpos = genv.init_qpos.copy()
        qpos[index] = value
        genv.set_state(qpos, genv.init_qvel.copy())
        assert bool(terminated(to_mjx(env, genv.data))) == genv.terminated, (index, value)
    if robot == "ant":  # v4 also ends the episode on a non-finite state
        qvel = genv.init_qvel.copy()
        qvel[0] = np.nan
        genv.set_state(genv.init_qpos.copy(), qvel)
        assert genv.terminated and bool(terminated(to_mjx(env, genv.data)))


@pytest.mark.parametrize("robot", ["ant", "hopper", "humanoid"])
@pytest.mark.slow
def test_reset_noise_as_specified(robot):
    env = envs.make(robot)
    scale = env.config.reset_noise_scale
    states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), 2000))
    data = states.pipeline_state
    dq = np.asarray(data.qpos) - env.mj_model.qpos0
    qvel = np.asarray(data.qvel)
    assert states.obs.shape == (2000, SIZES[robot][0]) and env.action_size == SIZES[robot][1]
    assert np.all(np.abs(dq) <= scale + 1e-6)
    np.testing.assert_allclose(dq.std(), scale / np.sqrt(3), rtol=0.05)  # uniform(-s, s)
    if robot == "ant":  # v4: qvel = scale * N(0, 1)
        np.testing.assert_allclose(qvel.std(), scale, rtol=0.05)
        assert np.abs(qvel).max() > scale * 2.5
    else:  # v4: qvel uniform(-s, s)
        assert np.all(np.abs(qvel) <= scale + 1e-6)
        np.testing.assert_allclose(qvel.std(), scale / np.sqrt(3), rtol=0.05)
    # Fresh keys give fresh states; the same key the same state.
    assert len(np.unique(dq, axis=0)) == 2000
    again = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), 2000)[7])
    np.testing.assert_array_equal(np.asarray(again.pipeline_state.qpos), np.asarray(data.qpos[7]))


# One-step deviation of MJX from C MuJoCo (Gymnasium), from states of a random rollout.
# Measured values are in docs/environments.md "Physics changes, and their measured effect"; these bounds leave ~5x headroom over them. Ant's
# contacts (pyramidal cone, MJX's Newton solver vs C MuJoCo's) dominate its deviation.
DEVIATION_BOUNDS = {
    "ant": dict(qpos_median=5e-4, qvel_median=0.15, qpos_max=0.05, qvel_max=2.0),
    "hopper": dict(qpos_median=1e-5, qvel_median=1e-4, qpos_max=1e-4, qvel_max=1e-3),
    "humanoid": dict(qpos_median=1e-5, qvel_median=1e-3, qpos_max=1e-4, qvel_max=1e-2),
}


@pytest.mark.slow
@pytest.mark.parametrize("robot", sorted(DEVIATION_BOUNDS))
def test_one_step_physics_deviation_from_c_mujoco_is_bounded(robot):
    measured = one_step_deviation(envs.make(robot), num_states=12, seed=0)
    for key, bound in DEVIATION_BOUNDS[robot].items():
        assert measured[key] < bound, (key, measured)
