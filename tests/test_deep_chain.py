"""The deep-sea chain: signs, hand-worked dynamics, known answers against Monte Carlo, per-member
lengths through the registry, wrappers. Each test compiles at most one program."""

from __future__ import annotations

import math

import chex
import jax
import jax.numpy as jp
import numpy as np
import pytest

import envs
from envs.chain import ChainConfig, ChainState, ContinuousChain
from envs.deep_chain import DeepChain, DeepChainConfig, DeepChainTask, draw_signs
from envs.wrappers import wrap_for_training

KEY = jax.random.PRNGKey(0)
SEED0_SIGNS = [1, -1, -1, -1, 1, 1, 1, 1, 1, 1, 1, -1]
"""s_0, ..., s_11 of sign_seed 0 (numpy's PCG64, `random() < 1/2` -> -1)."""


# -- signs and validation ----------------------------------------------------------------------


def test_signs_are_fixed_per_seed_and_hold_both_signs_where_needed():
    signs = DeepChainConfig().signs
    assert signs.dtype == np.float32 and signs.shape == (64,)
    assert set(np.unique(signs)) == {-1.0, 1.0}
    np.testing.assert_array_equal(signs[:12], SEED0_SIGNS)
    np.testing.assert_array_equal(DeepChainConfig(length=7.0).signs, signs)  # one maze per seed
    np.testing.assert_array_equal(envs.make("deep_chain_30").signs, signs)
    np.testing.assert_array_equal(DeepChainConfig(length=10.0, num_cells=16).signs, signs[:16])  # prefix kept
    assert not np.array_equal(DeepChainConfig(sign_seed=3).signs, signs)
    # Every length 3..60 of the default maze is valid: cells 0..L-2 hold both signs.
    for length in range(3, 61):
        config = DeepChainConfig(length=float(length))
        assert set(config.signs[: config.steps_to_goal]) == {-1.0, 1.0}
    # Over many seeds the signs are fair coins.
    assert abs(np.mean([draw_signs(seed, 64) for seed in range(200)])) < 0.02


def test_a_seed_without_both_signs_is_refused():
    # The first seed whose cells 0, 1, 2 (length 4: n = 3) share one sign.
    seed = next(s for s in range(1, 1000) if len(set(draw_signs(s, 3))) == 1)
    with pytest.raises(ValueError, match=f"sign_seed {seed} gives the same sign.*length 4.0.*choose another sign_seed"):
        DeepChainConfig(length=4.0, sign_seed=seed)
    with pytest.raises(ValueError, match="choose another sign_seed"):
        envs.make("deep_chain_4", sign_seed=seed)
    # The same seed is fine once the chain is long enough to hold a cell of the other sign.
    longer = next(L for L in range(5, 64) if len(set(draw_signs(seed, L - 1))) == 2)
    DeepChainConfig(length=float(longer), sign_seed=seed)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"length": 2.0}, "at least 2 cells.*steps_to_goal = 1"),  # n = 1: one cell, one sign
        ({"length": 80.0}, "length / step_size = 80 cells.*num_cells is 64.*at least 81"),
        ({"length": 64.0}, "needs num_cells > 64"),  # x = L = 64 would lie outside cell 63
        ({"length": 10.5}, "length / step_size must be an integer.*10.5"),
        ({"length": 3.0, "step_size": 0.1}, "off float32's grid.*use a step_size"),
        ({"sign_seed": -1}, "sign_seed must be an integer >= 0"),
        ({"num_cells": 0}, "num_cells must be an integer >= 1"),
        ({"goal_radius": 25.0}, "goal_radius must lie in"),  # the chain's checks still run
    ],
)
def test_invalid_config_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        envs.config_of("deep_chain", **overrides)
    assert envs.config_of("deep_chain", length=80.0, num_cells=81).num_cells == 81  # the fix


# -- dynamics --------------------------------------------------------------------------------


def test_hand_worked_dynamics_observations_rewards_and_goal():
    # L = 10, delta = 1: distractor [0, 1), goal [9, 10]; signs (seed 0) + - - - + + + + + + + ...
    env = DeepChain(DeepChainConfig(length=10.0, horizon=17))
    hand = [  # (action, x after): the cell's sign decides the direction
        (1.0, 1.0),  # cell 0, s = +1: a = s moves right
        (1.0, 0.0),  # cell 1, s = -1: a = -s moves left
        (-1.0, 0.0),  # cell 0: a = -s moves left, clipped at 0
        (0.5, 0.5),  # half a step
        (2.0, 1.5),  # a clipped to 1
        (-1.0, 2.5),  # cell 1, s = -1: a = -1 moves right
        (-0.5, 3.0),  # cell 2, s = -1
        (-1.0, 4.0),  # cell 3, s = -1
        *[(1.0, float(x)) for x in range(5, 11)],  # cells 4..9, s = +1: up to x = L = 10
        (1.0, 10.0),  # cell 10, s = +1: clipped at L
        (-1.0, 9.0),  # back into the goal zone's edge
        (0.0, 9.0),  # standing in the goal zone
    ]
    actions = np.array([a for a, _ in hand], np.float32)
    expected_x = np.array([x for _, x in hand], np.float32)
    constant = {1.0: [1, 0] * 8 + [1], -1.0: [0] * 17, 0.5: [0.5, 1.0] * 8 + [0.5]}
    plans = jp.asarray(np.stack([actions, *[np.full(17, a, np.float32) for a in constant]]))[..., None]

    @jax.jit
    @jax.vmap
    def rollout(plan):
        def body(state, action):
            state = env.step(state, action)
            return state, state

        first = env.reset(KEY)
        return first, jax.lax.scan(body, first, plan)[1]

    first, states = rollout(plans)
    x = np.asarray(states.pipeline_state.x)
    np.testing.assert_array_equal(x[0], expected_x)
    # A constant action oscillates at the first cell whose sign differs (+1: cell 1; +0.5 too),
    # or is held at 0 (-1: cell 0 has s = +1); none reaches the goal.
    for row, positions in zip(x[1:], constant.values()):
        np.testing.assert_array_equal(row, positions)
    assert float(states.metrics["goal"][1:].max()) == 0.0

    cfg = env.config
    expected_r = [cfg.reward_at(float(xx), float(a)) for a, xx in hand]
    # e.g. x = 0.5 under a = 0.5: 0.1 - 0.01 * 0.25; x = 9 under a = 1: 1 - 0.01.
    assert expected_r[3] == pytest.approx(0.1 - 0.0025) and expected_r[12] == pytest.approx(0.99)
    np.testing.assert_allclose(states.reward[0], expected_r, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(states.metrics["goal"][0], expected_x >= 9.0)
    np.testing.assert_array_equal(states.metrics["x_position"][0], expected_x)
    np.testing.assert_array_equal(states.done, 0.0)

    # Observation: one-hot of the cell, then the position within it.
    obs = np.asarray(states.obs[0])
    cells = np.floor(expected_x).astype(int)
    chex.assert_shape(obs, (17, 65))
    np.testing.assert_array_equal(obs[:, :64], np.eye(64, dtype=np.float32)[cells])
    np.testing.assert_array_equal(obs[:, 64], expected_x - cells)  # 0.5 at x = 0.5, 1.5, 2.5
    # Reset: x0 = 0, cell 0, goal 0; the state's structure is the step's.
    np.testing.assert_array_equal(first.obs[0], np.eye(65, dtype=np.float32)[0])
    assert set(first.metrics) == {"x_position", "goal"} and float(first.metrics["goal"][0]) == 0.0
    assert jax.tree.structure(first) == jax.tree.structure(jax.tree.map(lambda s: s[:, 0], states))
    assert states.obs.dtype == states.reward.dtype == states.metrics["goal"].dtype == jp.float32


def test_cells_are_exact_at_the_lattice_boundaries():
    env = DeepChain(DeepChainConfig(length=15.0, step_size=0.25, goal_radius=0.25, distractor_radius=0.25))
    k = np.arange(61)
    lattice = (k * 0.25).astype(np.float32)
    below = np.nextafter(lattice[1:], np.float32(0))  # one float32 ulp below each boundary
    cells = jax.jit(jax.vmap(env.cell))(jp.asarray(np.concatenate([lattice, below, lattice[:-1] + 0.125])))
    np.testing.assert_array_equal(cells, np.concatenate([k, k[:-1], k[:-1]]))


# -- known answers -----------------------------------------------------------------------------

CHAIN_FIELDS = dict(
    length=6.0, step_size=0.5, distractor_radius=1.25, distractor_reward=0.2, goal_radius=1.5,
    goal_reward=2.0, action_cost_weight=0.05, horizon=30,
)


@pytest.mark.parametrize("fields", [{}, {"length": 10.0}, {"length": 40.0, "horizon": 30}, CHAIN_FIELDS])
def test_reference_returns_are_the_chains(fields):
    deep, chain = DeepChain(DeepChainConfig(**fields)), ContinuousChain(ChainConfig(**{"length": 20.0, **fields}))
    assert deep.goal_return() == chain.goal_return()
    assert deep.distractor_return() == chain.distractor_return()
    assert deep.optimal_return() == chain.optimal_return()
    if not fields:  # default: L = 20, n = 19 steps at cost 0.01, then 82 steps paying r_g = 1
        assert deep.optimal_return() == pytest.approx(82 - 19 * 0.01)


def test_following_the_signs_attains_the_optimal_return():
    # delta = 0.5, n = 9 cells to cross, x = 0.5 and 1.0 pay r_d: 22 * 2 + 2 * 0.2 - 9 * 0.05.
    env = DeepChain(DeepChainConfig(**CHAIN_FIELDS))
    assert env.optimal_return() == env.goal_return() == pytest.approx(43.95)
    signs = jp.asarray(env.signs)

    @jax.jit
    def follow_signs():
        def body(state, _):
            x = state.pipeline_state.x
            action = jp.where(x >= env.config.goal_start, 0.0, signs[env.cell(x)])
            state = env.step(state, action[None])
            return state, state.reward

        return jax.lax.scan(body, env.reset(KEY), None, length=env.config.horizon)[1].sum()

    assert float(follow_signs()) == pytest.approx(env.goal_return(), rel=1e-6)


def test_reach_probability_by_hand():
    # L = 3, goal zone [2, 3]: n = 2. The random-sign walk from 0 (held at 0, absorbed at 2):
    # P(at 0, at 1, reached) after t steps: (1/2, 1/2, 0), (1/2, 1/4, 1/4), (3/8, 1/4, 3/8),
    # (5/16, 3/16, 1/2).
    for horizon, expected in [(1, 0.0), (2, 0.25), (3, 0.375), (4, 0.5)]:
        env = envs.make("deep_chain_3", horizon=horizon)
        assert env.reach_probability("random_sign") == expected
        assert env.reach_probability("committed_random") == (0.25 if horizon >= 2 else 0.0)
        assert env.reach_probability("constant") == 0.0
    # The walk's probability grows with the horizon towards 1 and falls steeply with the length.
    probabilities = [envs.make(f"deep_chain_{L}").reach_probability("random_sign") for L in (10, 20, 30, 40)]
    assert 1 > probabilities[0] > probabilities[1] > probabilities[2] > probabilities[3] > 0
    # n > H: nothing reaches.
    short = envs.make("deep_chain_10", horizon=8)
    assert short.reach_probability("random_sign") == short.reach_probability("committed_random") == 0.0
    assert envs.make("deep_chain_40").reach_probability("committed_random") == 2.0**-39
    with pytest.raises(ValueError, match="unknown policy 'uniform'; valid: random_sign, constant, committed_random"):
        short.reach_probability("uniform")
    with pytest.raises(ValueError, match=r"x0 = 0.*reset_noise_scale"):
        envs.make("deep_chain_10", reset_noise_scale=0.5).reach_probability("random_sign")


def test_reach_probabilities_match_monte_carlo():
    """20,000 episodes per policy as one jitted program: the random-sign walk (L = 10, H = 40,
    n = 9), committed random tables (L = 5, n = 4: 1/16) and, for a ~ U[-1, 1], the deep chain
    against the plain chain (same law: s a is again U[-1, 1])."""
    episodes = 20_000
    walk = envs.make("deep_chain_10", horizon=40)
    tables = envs.make("deep_chain_5", horizon=20)
    plain = ContinuousChain(ChainConfig(length=10.0, horizon=40))

    def reached(env, policy, key):
        """Whether one episode of `policy(x, key)` -> a enters the goal zone."""

        def body(state, step_key):
            state = env.step(state, policy(state.pipeline_state.x, step_key)[None])
            return state, state.metrics["goal"]

        keys = jax.random.split(key, env.config.horizon)
        return jax.lax.scan(body, env.reset(KEY), keys)[1].max()

    def random_sign(x, key):
        return jp.where(jax.random.bernoulli(key), 1.0, -1.0)

    def uniform(x, key):
        return jax.random.uniform(key, minval=-1.0, maxval=1.0)

    def committed(key):
        table = jp.where(jax.random.bernoulli(key, shape=(tables.config.num_cells,)), 1.0, -1.0)
        return reached(tables, lambda x, _: table[tables.cell(x)], key)

    @jax.jit
    def estimate(key):
        k1, k2, k3, k4 = (jax.random.split(k, episodes) for k in jax.random.split(key, 4))
        frequency = lambda f, keys: jp.mean(jax.vmap(f)(keys))  # noqa: E731
        return (
            frequency(lambda k: reached(walk, random_sign, k), k1),
            frequency(committed, k2),
            frequency(lambda k: reached(walk, uniform, k), k3),
            frequency(lambda k: reached(plain, uniform, k), k4),
        )

    walk_mc, committed_mc, uniform_deep, uniform_plain = map(float, estimate(jax.random.PRNGKey(7)))

    def within(estimate, p, sigmas=4.0):
        return abs(estimate - p) <= sigmas * math.sqrt(p * (1 - p) / episodes)

    p_walk = walk.reach_probability("random_sign")
    assert p_walk == pytest.approx(0.27113, abs=1e-5)
    assert within(walk_mc, p_walk), (walk_mc, p_walk)
    assert tables.reach_probability("committed_random") == 1 / 16
    assert within(committed_mc, 1 / 16), committed_mc
    # Two estimates of one probability: their difference has variance 2 p (1 - p) / episodes.
    p_uniform = (uniform_deep + uniform_plain) / 2
    assert 0.01 < p_uniform < 0.99
    assert abs(uniform_deep - uniform_plain) <= 4 * math.sqrt(2 * p_uniform * (1 - p_uniform) / episodes)


# -- per-member lengths, registry, wrappers -----------------------------------------------------


def test_lengths_are_per_member_task_constants():
    env, tasks = envs.make_family(["deep_chain_10", "deep_chain_20", "deep_chain_30", "deep_chain_40"])
    assert isinstance(env, DeepChain) and env.config.length == 10.0
    assert all(isinstance(task, DeepChainTask) for task in tasks)
    np.testing.assert_array_equal([t.length for t in tasks], [10.0, 20.0, 30.0, 40.0])
    assert tasks[0].length.dtype == jp.float32
    _, (default_task,) = envs.make_family(["deep_chain"])
    assert float(default_task.length) == 20.0

    env, tasks = envs.make_family(["deep_chain_10", "deep_chain_30"])
    stacked = jax.tree.map(lambda *leaves: jp.stack(leaves), *tasks)
    state = env.reset(KEY)

    @jax.jit
    @jax.vmap
    def step_from(task, x, action):
        member = env.with_task(task)
        return member.step(state.replace(pipeline_state=ChainState(x=x)), action[None])

    # Each member from x = 9.5 (cell 9, s = +1) standing still, then moving right by a full step.
    x0 = jp.asarray([9.5, 9.5, 9.5, 9.5])
    action = jp.asarray([0.0, 0.0, 1.0, 1.0])
    both = jax.tree.map(lambda leaf: jp.concatenate([leaf, leaf]), stacked)
    out = step_from(both, x0, action)
    np.testing.assert_array_equal(out.pipeline_state.x, [9.5, 9.5, 10.0, 10.5])  # clipped at L = 10
    np.testing.assert_array_equal(out.metrics["goal"], [1.0, 0.0, 1.0, 0.0])  # goal [9, 10] vs [29, 30]
    np.testing.assert_allclose(out.reward, [1.0, 0.0, 0.99, -0.01], rtol=1e-6)
    np.testing.assert_array_equal(out.obs[:, :64].argmax(axis=1), [9, 9, 10, 10])  # signs, cells: L-free

    with pytest.raises(ValueError, match="different envs"):
        envs.make_family(["deep_chain_10", "chain"])


def test_another_maze_cannot_share_a_program(monkeypatch):
    from envs import registry

    monkeypatch.setitem(registry._REGISTRY, "deep_chain_maze3", registry.EnvSpec(DeepChain, {"sign_seed": 3}, "test"))
    with pytest.raises(ValueError, match="differ in sign_seed, which is not a per-member task constant \\(length\\)"):
        envs.make_family(["deep_chain_10", "deep_chain_maze3"])


def test_parametric_names_through_the_registry():
    assert envs.config_of("deep_chain_30") == DeepChainConfig(length=30.0)
    assert envs.config_of("deep_chain") == DeepChainConfig()
    env = envs.make("deep_chain_30", horizon=50)
    assert isinstance(env, DeepChain) and env.config.length == 30.0 and env.episode_length == 50
    assert (env.observation_size, env.action_size, env.backend) == (65, 1, "jax")
    assert envs.config_of("deep_chain_100", num_cells=128).length == 100.0
    assert "deep_chain" in envs.registered_names()
    assert not any(name.startswith("deep_chain_") for name in envs.registered_names())
    described = envs.describe()
    assert described["deep_chain"].startswith("Deep-sea chain: a fixed random action sign per cell")
    assert described["deep_chain_<L>"] == "Deep-sea chain of length L = <L> (the maze of deep_chain)"
    for name in ("deep_chain_x", "deep_chain_", "deep_chain_1.5", "deep_chain_-3", "deep_chain_010", "deep_chian"):
        with pytest.raises(ValueError, match=rf"unknown environment '{name}'.*registered: ant,.*deep_chain_<L> for an integer L"):
            envs.make(name)
    with pytest.raises(ValueError, match=r"did you mean deep_chain"):
        envs.config_of("deep_chain_x")
    with pytest.raises(ValueError, match="num_cells is 64"):
        envs.make("deep_chain_70")
    with pytest.raises(ValueError, match=r"unknown override.*lenght"):
        envs.make("deep_chain_30", lenght=5.0)


def test_under_episode_autoreset():
    env = envs.make("deep_chain_4", horizon=3)  # goal [3, 4]; signs + - - ...
    batched = wrap_for_training(env, num_envs=2)
    # Instance 0 follows the signs (+1, -1, -1), instance 1 plays +1 throughout.
    plans = jp.asarray([[[1.0], [1.0]], [[-1.0], [1.0]], [[-1.0], [1.0]], [[1.0], [1.0]]])

    @jax.jit
    def run(key):
        def body(state, action):
            state = batched.step(state, action)
            return state, state

        return jax.lax.scan(body, batched.reset(key), plans)[1]

    states = run(KEY)
    np.testing.assert_array_equal(states.info["truncation"][:, 0], [0, 0, 1, 0])
    np.testing.assert_array_equal(states.metrics["goal"][:, 0], [0, 0, 1, 0])  # x = 3 on step 3
    np.testing.assert_array_equal(states.pipeline_state.x, [[1, 1], [2, 0], [0, 0], [1, 1]])  # reset after 3
    np.testing.assert_array_equal(states.info["final_obs"][2, 0, :65], np.eye(65)[3])  # x = 3, cell 3
    np.testing.assert_allclose(states.info["completed_return"][2, 0], -0.03 + 1.0, rtol=1e-6)
    np.testing.assert_array_equal(states.done, 0.0)
    chex.assert_shape(states.obs, (4, 2, 65))
