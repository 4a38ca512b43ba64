"""The continuous chain: hand-worked dynamics and rewards, reference returns, wrappers, registry."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jp
import numpy as np
import pytest
from brax.envs.wrappers import training as brax_training

import envs
from envs.chain import ChainConfig, ChainState, ContinuousChain
from envs.wrappers import EpisodeAutoReset, wrap_for_training

KEY = jax.random.PRNGKey(0)


def rollout_fn(env: ContinuousChain):
    """A jitted (actions[T, 1]) -> (positions[T], rewards[T], obs[T, 1], done[T]) from x0 = 0."""

    def rollout(actions: jax.Array):
        def body(state, action):
            state = env.step(state, action)
            return state, (state.pipeline_state.x, state.reward, state.obs, state.done)

        _, out = jax.lax.scan(body, env.reset(KEY), actions)
        return out

    return jax.jit(rollout)


# -- dynamics and rewards ----------------------------------------------------------------------


def test_dynamics_and_rewards_known_answer():
    # L = 3, delta = 1: distractor zone [0, 1), goal zone [2, 3]; r_d = 0.1, r_g = 1, w_a = 0.01.
    env = ContinuousChain(ChainConfig(length=3.0, horizon=8))
    actions = jp.array([0.5, 2.0, 1.0, 1.0, -0.25, -5.0, -1.0, -1.0])[:, None]
    positions, rewards, obs, done = rollout_fn(env)(actions)
    # 0 + 0.5; + 1 (2.0 clipped to 1); + 1; 2.5 + 1 clipped to L = 3; - 0.25; - 1 (-5 clipped);
    # - 1; 0.75 - 1 clipped to 0.
    expected_x = np.array([0.5, 1.5, 2.5, 3.0, 2.75, 1.75, 0.75, 0.0])
    expected_r = np.array(
        [
            0.1 - 0.01 * 0.25,  # x = 0.5 in the distractor zone, a = 0.5
            -0.01,  # x = 1.5 in neither zone, a = 1 (clipped from 2)
            1.0 - 0.01,  # x = 2.5 in the goal zone
            1.0 - 0.01,  # x = 3 (clipped at L) in the goal zone
            1.0 - 0.01 * 0.0625,  # x = 2.75, a = -0.25
            -0.01,  # x = 1.75, a = -1 (clipped from -5)
            0.1 - 0.01,  # x = 0.75 back in the distractor zone
            0.1 - 0.01,  # x = 0 (clipped at 0)
        ]
    )
    np.testing.assert_array_equal(positions, expected_x)
    np.testing.assert_allclose(rewards, expected_r, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(obs[:, 0], 2.0 * expected_x / 3.0 - 1.0, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(done, np.zeros(8))


def test_step_size_scales_the_move():
    env = ContinuousChain(ChainConfig(step_size=2.5))
    positions, _, _, _ = rollout_fn(env)(jp.array([[0.4], [1.0], [-0.2]]))
    np.testing.assert_allclose(positions, [1.0, 3.5, 3.0], rtol=1e-6)  # 0.4*2.5, +2.5, -0.5


def test_rewards_at_hand_worked_positions():
    env = ContinuousChain()  # L = 10: distractor [0, 1), goal [9, 10]; r_d 0.1, r_g 1, w_a 0.01
    cases = [  # (x before, action, x after, reward)
        (0.0, 0.0, 0.0, 0.1),  # stays at the start: distractor, no cost
        (0.5, 0.4, 0.9, 0.1 - 0.01 * 0.16),  # distractor with action cost
        (0.5, 0.5, 1.0, -0.01 * 0.25),  # x = 1 is not < rho_d: neither zone
        (5.0, -1.0, 4.0, -0.01),  # neither zone, full cost
        (8.5, 0.5, 9.0, 1.0 - 0.01 * 0.25),  # x = L - rho_g: goal zone (>=)
        (9.5, 0.3, 9.8, 1.0 - 0.01 * 0.09),  # inside the goal zone
        (10.0, 1.0, 10.0, 1.0 - 0.01),  # clipped at L, still pays the full action cost
        (9.5, 0.0, 9.5, 1.0),  # standing in the goal zone
    ]
    x_before, actions, x_after, expected = (np.array(column) for column in zip(*cases))
    state = env.reset(KEY)

    @jax.jit
    def step_from(x, action):
        return env.step(state.replace(pipeline_state=ChainState(x=x)), action[None])

    stepped = jax.vmap(step_from)(jp.asarray(x_before, jp.float32), jp.asarray(actions, jp.float32))
    np.testing.assert_allclose(stepped.pipeline_state.x, x_after, rtol=1e-6)
    np.testing.assert_allclose(stepped.metrics["x_position"], x_after, rtol=1e-6)
    np.testing.assert_allclose(stepped.reward, expected, rtol=1e-5, atol=1e-7)


def test_state_structure_is_fixed_and_step_traces_once():
    env = ContinuousChain()
    state = env.reset(KEY)
    step = jax.jit(chex.assert_max_traces(env.step, n=1))
    stepped = step(state, jp.ones(1))
    stepped = step(stepped, -jp.ones(1))
    assert jax.tree.structure(stepped) == jax.tree.structure(state)
    for leaf_before, leaf_after in zip(jax.tree.leaves(state), jax.tree.leaves(stepped)):
        assert leaf_before.shape == leaf_after.shape and leaf_before.dtype == leaf_after.dtype
    chex.assert_shape(state.obs, (env.observation_size,))
    assert state.reward.dtype == state.done.dtype == jp.float32
    assert set(state.metrics) == {"x_position", "goal"}


def test_reset_noise():
    env = ContinuousChain(ChainConfig(reset_noise_scale=2.0))
    x0 = jax.jit(jax.vmap(lambda key: env.reset(key).pipeline_state.x))(jax.random.split(KEY, 256))
    assert float(x0.min()) >= 0.0 and float(x0.max()) <= 2.0
    assert float(x0.std()) > 0.3  # U[0, 2] has std 0.58
    assert float(ContinuousChain().reset(KEY).pipeline_state.x) == 0.0


# -- reference returns -----------------------------------------------------------------------

ODD_CONFIG = ChainConfig(
    length=6.0,
    step_size=0.5,
    distractor_radius=1.25,
    distractor_reward=0.2,
    goal_radius=1.5,
    goal_reward=2.0,
    action_cost_weight=0.05,
    horizon=30,
)


@pytest.mark.parametrize(
    "config, goal_return, distractor_return",
    [
        # n = ceil(9 / 1) = 9 steps at a cost of 0.01, of which the 9th pays r_g; x = 1..8 pay
        # nothing (1 is not < rho_d); then 91 more steps in the goal: 92 * 1 - 9 * 0.01.
        (ChainConfig(), 91.91, 100 * 0.1),
        # d = 4.5, n = 9; x = 0.5, 1.0 < 1.25 pay r_d: (30 - 9 + 1) * 2 + 2 * 0.2 - 9 * 0.05.
        (ODD_CONFIG, 43.95, 30 * 0.2),
    ],
)
def test_scripted_policies_reach_reference_returns(config, goal_return, distractor_return):
    env = ContinuousChain(config)
    assert env.goal_return() == pytest.approx(goal_return, abs=1e-9)
    assert env.distractor_return() == pytest.approx(distractor_return, abs=1e-9)
    assert env.optimal_return() == pytest.approx(max(goal_return, distractor_return), abs=1e-9)

    n, horizon = config.steps_to_goal, config.horizon
    full_speed_then_stop = (jp.arange(horizon) < n).astype(jp.float32)[:, None]
    stay = jp.zeros((horizon, 1))
    _, rewards, _, _ = jax.vmap(rollout_fn(env))(jp.stack([full_speed_then_stop, stay]))
    returns = rewards.sum(axis=1)
    np.testing.assert_allclose(returns, [goal_return, distractor_return], rtol=1e-6)


@pytest.mark.parametrize("config", [ChainConfig(), ODD_CONFIG])
def test_no_policy_beats_optimal_return(config):
    env = ContinuousChain(config)
    horizon = config.horizon
    best = env.optimal_return()
    keys = jax.random.split(jax.random.PRNGKey(1), 3)
    # Planned actions a_t = clip(mean + scale * noise_t) for t >= wait, else 0, in three families:
    num_random = 1024  # random walks with random drift and noise
    mean = jax.random.uniform(keys[0], (num_random,), minval=-1.0, maxval=1.0)
    scale = jax.random.uniform(keys[1], (num_random,), maxval=1.0)
    wait = jp.zeros(num_random, jp.int32)
    speeds = jp.linspace(0.0, 1.0, 201)  # constant speeds, 1 being full speed
    mean = jp.concatenate([mean, speeds, jp.ones(horizon)])
    scale = jp.concatenate([scale, jp.zeros(201), jp.zeros(horizon)])
    wait = jp.concatenate([wait, jp.zeros(201, jp.int32), jp.arange(horizon)])  # wait, then go
    noise = jax.random.normal(keys[2], (mean.shape[0], horizon))
    planned = mean[:, None] + scale[:, None] * noise
    planned = jp.where(jp.arange(horizon)[None, :] >= wait[:, None], planned, 0.0)
    # Each plan is run as is and with a = 0 once inside the goal zone (constant speed 1 stopped in
    # the goal is the full-speed-then-stop policy of goal_return()).
    planned = jp.concatenate([planned, planned])
    stop_in_goal = jp.arange(planned.shape[0]) >= planned.shape[0] // 2

    @jax.jit
    @jax.vmap
    def policy_return(planned, stop_in_goal):
        def body(state, planned_action):
            in_goal = state.pipeline_state.x >= config.goal_start
            action = jp.where(stop_in_goal & in_goal, 0.0, planned_action)
            state = env.step(state, action[None])
            return state, state.reward

        return jax.lax.scan(body, env.reset(KEY), planned)[1].sum()

    returns = np.asarray(policy_return(planned, stop_in_goal))
    assert returns.max() <= best + 1e-5 * abs(best)
    assert returns.max() == pytest.approx(best, rel=1e-5)  # attained: full speed, then stop


def test_optimal_return_refuses_unproven_configs():
    # Goal out of reach (n = 9 > H = 5): staying in the distractor zone is optimal.
    assert ContinuousChain(ChainConfig(horizon=5)).optimal_return() == pytest.approx(0.5)
    with pytest.raises(ValueError, match="not an integer"):
        ContinuousChain(ChainConfig(goal_radius=1.5)).optimal_return()
    with pytest.raises(ValueError, match="goal_reward"):
        ContinuousChain(ChainConfig(goal_reward=0.105)).optimal_return()
    with pytest.raises(ValueError, match="reset_noise_scale"):
        ContinuousChain(ChainConfig(reset_noise_scale=0.5)).optimal_return()

    # Why the integer condition: with d = 8.5 = 9 * (17 / 18) delta, moving at speed 17/18 also
    # enters the goal on step 9 and pays less action cost than full speed.
    env = ContinuousChain(ChainConfig(goal_radius=1.5))
    gentle = jp.where(jp.arange(100) < 9, 17.0 / 18.0, 0.0)
    full = jp.where(jp.arange(100) < 9, 1.0, 0.0)
    _, rewards, _, _ = jax.vmap(rollout_fn(env))(jp.stack([gentle, full])[..., None])
    gentle_return, full_return = np.asarray(rewards.sum(axis=1))
    assert full_return == pytest.approx(env.goal_return(), rel=1e-6)
    assert gentle_return > full_return + 1e-3  # 9 * 0.01 * (1 - (17/18)^2) = 0.0097


# -- registry, validation and wrappers --------------------------------------------------------


def test_make_through_registry():
    assert "chain" in envs.registered_names()
    env = envs.make("chain", horizon=20, length=12)  # int widened to float
    assert isinstance(env, ContinuousChain)
    assert env.episode_length == 20 and env.config.horizon == 20
    assert env.config.length == 12.0 and isinstance(env.config.length, float)
    assert (env.observation_size, env.action_size, env.backend) == (1, 1, "jax")
    assert envs.config_of("chain") == ChainConfig()


def test_unknown_or_mistyped_override_errors():
    with pytest.raises(ValueError, match=r"unknown override.*lenght.*valid: length"):
        envs.make("chain", lenght=5.0)
    with pytest.raises(TypeError, match="horizon"):
        envs.make("chain", horizon=2.5)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"length": 0.0}, "length must be > 0"),
        ({"step_size": -1.0}, "step_size must be > 0"),
        ({"distractor_radius": 11.0}, "distractor_radius must lie in"),
        ({"goal_radius": -0.1}, "goal_radius must lie in"),
        ({"reset_noise_scale": 20.0}, "reset_noise_scale must lie in"),
        ({"distractor_radius": 6.0, "goal_radius": 5.0}, "must not overlap"),
        ({"distractor_reward": -0.1}, "distractor_reward must be >= 0"),
        ({"horizon": 0}, "horizon must be >= 1"),
    ],
)
def test_invalid_config_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        envs.make("chain", **overrides)


def test_vmapped_training_wrapper():
    env = envs.make("chain", horizon=20, reset_noise_scale=2.0)
    batched = wrap_for_training(env, num_envs=64)

    @jax.jit
    def run(key):
        key_reset, key_actions = jax.random.split(key)
        first = batched.reset(key_reset)
        actions = jax.random.uniform(key_actions, (50, 64, 1), minval=-1.5, maxval=1.5)

        def body(state, action):
            state = batched.step(state, action)
            info = state.info
            return state, (state.pipeline_state.x, state.reward, state.done, info["truncation"])

        last, trajectory = jax.lax.scan(body, first, actions)
        return first, last, trajectory

    first, last, (positions, rewards, done, truncation) = run(KEY)
    chex.assert_shape(first.obs, (64, 1))
    assert float(jp.std(first.pipeline_state.x)) > 0  # each instance draws its own x0
    chex.assert_shape(positions, (50, 64))
    assert np.all(np.isfinite(rewards)) and np.all(np.isfinite(last.obs))
    assert float(positions.min()) >= 0.0 and float(positions.max()) <= 10.0
    np.testing.assert_array_equal(done, 0.0)
    expected_truncation = np.zeros((50, 64))
    expected_truncation[[19, 39]] = 1.0  # steps 20 and 40
    np.testing.assert_array_equal(truncation, expected_truncation)


def test_truncated_not_terminated_under_autoreset():
    env = EpisodeAutoReset(envs.make("chain", horizon=5))
    full_speed = jp.ones((12, 1))

    @jax.jit
    def run(key):
        def body(state, action):
            state = env.step(state, action)
            return state, state

        return jax.lax.scan(body, env.reset(key), full_speed)[1]

    states = run(KEY)
    np.testing.assert_array_equal(states.done, 0.0)
    np.testing.assert_array_equal(states.info["truncation"], [0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0])
    # x after each step: 1..4, then reset to 0 after the 5th step (which reached 5), and so on.
    np.testing.assert_array_equal(states.pipeline_state.x, [1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2])
    np.testing.assert_allclose(states.info["final_obs"][4, 0], 2 * 5 / 10 - 1, atol=1e-6)  # x = 5
    np.testing.assert_allclose(states.obs[4, 0], -1.0)  # first obs of the next episode
    # 5 steps at full speed in neither zone (x = 1..5): 5 * -0.01.
    np.testing.assert_allclose(states.info["completed_return"][4], -0.05, rtol=1e-6)
    assert int(states.info["completed_length"][4]) == 5


def test_brax_training_wrappers():
    env = brax_training.wrap(envs.make("chain", horizon=3), episode_length=3)

    @jax.jit
    def run(keys):
        def body(state, _):
            state = env.step(state, jp.ones((2, 1)))
            return state, (state.pipeline_state.x, state.done, state.info["truncation"])

        return jax.lax.scan(body, env.reset(keys), None, length=4)[1]

    positions, done, truncation = run(jax.random.split(KEY, 2))
    np.testing.assert_array_equal(positions[:, 0], [1, 2, 0, 1])  # reset after the 3rd step
    np.testing.assert_array_equal(done[:, 0], [0, 0, 1, 0])  # Brax folds the time limit in done
    np.testing.assert_array_equal(truncation[:, 0], [0, 0, 1, 0])
