"""`envs.gym_api`: the Gymnasium vector env over the jitted batch, and the registered ids.

Most checks run on the pure-JAX chain (compiles in about a second), with a short horizon and
reset noise so that seeds matter; one test builds the MJX Hopper through `gymnasium.make_vec`
(the one slow compile here). Where Gymnasium has its own notion of the right answer, the test
asks Gymnasium: `RecordEpisodeStatistics` for episode returns, `SyncVectorEnv` in same-step mode
for the layout of `final_obs`, the passive checker for the spaces.
"""

from __future__ import annotations

import warnings

import chex
import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_space_limit, data_equivalence
from gymnasium.utils.passive_env_checker import (
    check_action_space,
    check_observation_space,
    data_shares_objects,
)
from gymnasium.vector import AutoresetMode

import envs
from envs.gym_api import MjxVectorEnv, gymnasium_id, register_gymnasium_envs

NUM_ENVS = 3
HORIZON = 4
# Length 10, step 1, start uniform in [0, 2]: four steps right never reach the wall at x = 10.
CHAIN = dict(horizon=HORIZON, reset_noise_scale=2.0)


def make_chain(**kwargs) -> MjxVectorEnv:
    # Instances with equal name, overrides and batch size share one compilation.
    return MjxVectorEnv("chain", NUM_ENVS, **CHAIN, **kwargs)


@pytest.fixture(scope="module")
def chain() -> MjxVectorEnv:
    return make_chain()


def rollout(vec: MjxVectorEnv, seed: int, actions: np.ndarray) -> list:
    """(reset output, then every step output) for a fixed action sequence."""
    outputs = [vec.reset(seed=seed)]
    outputs += [vec.step(action) for action in actions]
    return outputs


def test_spaces_dtypes_and_shapes(chain: MjxVectorEnv) -> None:
    assert chain.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert chain.single_observation_space == gymnasium.spaces.Box(
        -np.inf, np.inf, (1,), np.float32
    )
    assert chain.single_action_space == gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
    assert chain.observation_space.shape == (NUM_ENVS, 1)
    assert chain.action_space.shape == (NUM_ENVS, 1)
    assert chain.observation_space.dtype == chain.action_space.dtype == np.float32
    check_observation_space(chain.single_observation_space)
    check_action_space(chain.single_action_space)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Gymnasium warns about unnormalised action boxes
        check_space_limit(chain.single_action_space, "action")

    obs, info = chain.reset(seed=0)
    chex.assert_shape(obs, (NUM_ENVS, 1))
    assert obs.dtype == np.float32 and obs in chain.observation_space
    assert isinstance(info, dict)

    chain.action_space.seed(0)
    obs, reward, terminated, truncated, info = chain.step(chain.action_space.sample())
    chex.assert_shape(obs, (NUM_ENVS, 1))
    chex.assert_shape([reward, terminated, truncated], (NUM_ENVS,))
    assert obs.dtype == reward.dtype == np.float32
    assert terminated.dtype == truncated.dtype == np.bool_
    assert obs in chain.observation_space
    # Step metrics come with Gymnasium's per-key masks.
    chex.assert_shape(info["x_position"], (NUM_ENVS,))
    np.testing.assert_array_equal(info["_x_position"], np.ones(NUM_ENVS, bool))


def test_reset_seed_is_deterministic_across_episodes(chain: MjxVectorEnv) -> None:
    # 3 episodes of 4 steps: the seed must fix the autoreset episodes too, not only the first.
    actions = np.random.default_rng(0).uniform(-1, 1, (3 * HORIZON, NUM_ENVS, 1)).astype(np.float32)
    first = rollout(chain, 7, actions)
    again = rollout(chain, 7, actions)
    other_instance = rollout(make_chain(), 7, actions)
    for output in (again, other_instance):
        for a, b in zip(first, output, strict=True):
            assert data_equivalence(a, b, exact=True) or _equal_but_times(a, b)

    other_seed = rollout(chain, 8, actions)
    assert not np.array_equal(first[0][0], other_seed[0][0])
    # Each env of the batch draws its own reset noise.
    assert len(np.unique(first[0][0])) == NUM_ENVS


def _equal_but_times(a: tuple, b: tuple) -> bool:
    """Step outputs equal up to the wall-clock episode time `info["episode"]["t"]`."""
    a_info, b_info = a[-1], b[-1]
    if "episode" not in a_info:
        return False
    a_info = {**a_info, "episode": {**a_info["episode"], "t": None}}
    b_info = {**b_info, "episode": {**b_info["episode"], "t": None}}
    return data_equivalence((*a[:-1], a_info), (*b[:-1], b_info), exact=True)


def test_constructor_seed_fixes_the_first_unseeded_reset() -> None:
    seeded = make_chain(seed=3)
    obs, _ = seeded.reset()
    np.testing.assert_array_equal(obs, seeded.reset(seed=3)[0])
    # A reset without a seed continues the seeded stream: a new episode, still repeatable.
    follow_up = seeded.reset()[0]
    assert not np.array_equal(obs, follow_up)
    seeded.reset(seed=3)
    seeded.reset()
    np.testing.assert_array_equal(seeded.reset(seed=3)[0], obs)


def test_reset_and_step_compile_once(chain: MjxVectorEnv) -> None:
    chain.reset(seed=1)
    for _ in range(2 * HORIZON + 1):  # through two autoresets
        chain.step(np.ones((NUM_ENVS, 1)))  # float64 in: converted, no retrace
    chain.reset()
    chain.step([[0.5]] * NUM_ENVS)
    assert chain._compiled.reset._cache_size() == 1
    assert chain._compiled.step._cache_size() == 1


def test_returned_data_is_not_reused(chain: MjxVectorEnv) -> None:
    # The vector form of Gymnasium's `check_returned_data_not_reused`.
    calls = [chain.reset(seed=0)]
    for _ in range(HORIZON):  # the last step ends the episodes, so final_obs is covered too
        obs, _, _, _, info = chain.step(np.zeros((NUM_ENVS, 1), np.float32))
        calls.append((obs, info))
    calls.append(chain.reset(seed=0))
    assert "final_obs" in calls[HORIZON][1]
    for i, (obs_1, info_1) in enumerate(calls):
        for obs_2, info_2 in calls[i + 1 :]:
            assert not data_shares_objects(obs_1, obs_2)
            assert not data_shares_objects(info_1, info_2)
    calls[0][0][:] = 123.0  # returned arrays are the caller's to write to


def test_same_step_autoreset_at_the_time_limit(chain: MjxVectorEnv) -> None:
    obs_0, _ = chain.reset(seed=2)
    right = np.ones((NUM_ENVS, 1), np.float32)
    rewards = []
    for _ in range(HORIZON - 1):
        obs, reward, terminated, truncated, info = chain.step(right)
        rewards.append(reward)
        assert not terminated.any() and not truncated.any()
        assert "final_obs" not in info and "episode" not in info
    obs, reward, terminated, truncated, info = chain.step(right)
    rewards.append(reward)

    assert truncated.all() and not terminated.any()
    np.testing.assert_array_equal(info["_final_obs"], np.ones(NUM_ENVS, bool))
    final_obs = np.stack(info["final_obs"][info["_final_obs"]])
    assert final_obs.dtype == np.float32
    # Hand-worked: obs = 2 x / 10 - 1 and x0 in [0, 2], so 4 steps of +1 give x0 + 4 (below the
    # wall) and the final obs is obs_0 + 0.8; the new obs is a fresh start, again in [-1, -0.6].
    np.testing.assert_allclose(final_obs, obs_0 + 0.8, atol=1e-6)
    assert np.all((obs >= -1.0) & (obs <= -0.6))
    assert not np.allclose(obs, final_obs)
    # Episode statistics of the finished episodes.
    np.testing.assert_array_equal(info["_episode"], np.ones(NUM_ENVS, bool))
    np.testing.assert_array_equal(info["episode"]["l"], np.full(NUM_ENVS, HORIZON))
    np.testing.assert_allclose(info["episode"]["r"], np.sum(rewards, axis=0), rtol=1e-6)
    # The step after an autoreset belongs to the new episode.
    obs_next, *_, info = chain.step(np.zeros((NUM_ENVS, 1), np.float32))
    assert "final_obs" not in info
    np.testing.assert_allclose(obs_next, obs, atol=1e-6)  # a = 0 does not move


def test_episode_statistics_match_gymnasiums_wrapper(chain: MjxVectorEnv) -> None:
    wrapped = gymnasium.wrappers.vector.RecordEpisodeStatistics(
        make_chain(record_episode_statistics=False)
    )
    actions = np.random.default_rng(1).uniform(-1, 1, (2 * HORIZON, NUM_ENVS, 1)).astype(np.float32)
    ours = rollout(chain, 4, actions)
    theirs = rollout(wrapped, 4, actions)
    ended_steps = 0
    for (*_, info_ours), (*_, info_theirs) in zip(ours[1:], theirs[1:], strict=True):
        assert ("episode" in info_ours) == ("episode" in info_theirs)
        if "episode" in info_ours:
            ended_steps += 1
            np.testing.assert_array_equal(info_ours["_episode"], info_theirs["_episode"])
            np.testing.assert_allclose(
                info_ours["episode"]["r"], info_theirs["episode"]["r"], rtol=1e-6
            )
            np.testing.assert_array_equal(info_ours["episode"]["l"], info_theirs["episode"]["l"])
    assert ended_steps == 2


def test_final_obs_layout_matches_sync_vector_env(chain: MjxVectorEnv) -> None:
    sync = gymnasium.make_vec(
        "CartPole-v1",
        num_envs=NUM_ENVS,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        max_episode_steps=HORIZON,
    )
    sync.reset(seed=0)
    chain.reset(seed=0)
    for _ in range(HORIZON):
        *_, sync_info = sync.step(np.zeros(NUM_ENVS, np.int64))
        *_, info = chain.step(np.zeros((NUM_ENVS, 1), np.float32))
    for key in ("final_obs", "_final_obs", "final_info", "_final_info"):
        assert key in sync_info and key in info
        assert type(info[key]) is type(sync_info[key])
        if isinstance(info[key], np.ndarray):
            assert info[key].dtype == sync_info[key].dtype
            assert info[key].shape == sync_info[key].shape
    # final_obs: an object array holding one observation per ended env (all ended here).
    assert info["final_obs"].dtype == object and info["_final_obs"].all()
    assert all(isinstance(obs, np.ndarray) for obs in info["final_obs"])
    sync.close()


def test_bad_calls_give_clear_errors() -> None:
    vec = make_chain()
    with pytest.raises(gymnasium.error.ResetNeeded):
        vec.step(np.zeros((NUM_ENVS, 1)))
    vec.reset(seed=0)
    for shape in [(NUM_ENVS,), (NUM_ENVS - 1, 1), (NUM_ENVS, 2), (1, NUM_ENVS, 1)]:
        with pytest.raises(ValueError, match=r"actions must have shape \(3, 1\).*got"):
            vec.step(np.zeros(shape))
    with pytest.raises(ValueError, match="numeric array"):
        vec.step([["left"]] * NUM_ENVS)
    with pytest.raises(ValueError, match="takes no options"):
        vec.reset(options={"reset_mask": np.ones(NUM_ENVS, bool)})
    with pytest.raises(ValueError, match="unknown override"):
        MjxVectorEnv("chain", 2, horizn=5)
    with pytest.raises(ValueError, match="only to a registered env name"):
        MjxVectorEnv(envs.make("chain"), 2, horizon=5)
    with pytest.raises(ValueError, match="num_envs"):
        MjxVectorEnv("chain", 0)


def test_every_env_has_an_id_and_registering_is_idempotent(monkeypatch) -> None:
    names = envs.registered_names()
    ids = [gymnasium_id(name) for name in names]
    assert all(env_id in gymnasium.registry for env_id in ids)
    assert gymnasium_id("ant_delayed") == "mjx_pbac/ant_delayed-v0"
    specs_before = [gymnasium.registry[env_id] for env_id in ids]

    def built(*args, **kwargs):
        raise AssertionError("registering built an env")

    for module in (envs, envs.registry, envs.gym_api):  # nothing built, so nothing compiled
        monkeypatch.setattr(module, "make", built)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Gymnasium warns when an id is overridden
        assert register_gymnasium_envs() == ids
    assert all(gymnasium.registry[i] is s for i, s in zip(ids, specs_before, strict=True))
    spec = gymnasium.spec("mjx_pbac/chain-v0")
    assert spec.vector_entry_point == "envs.gym_api:MjxVectorEnv"
    assert spec.kwargs == {"env": "chain"}


@pytest.mark.slow
def test_make_vec_through_registered_ids() -> None:
    # The chain through the default mode and the "module:id" form; kwargs reach the config.
    vec = gymnasium.make_vec("envs:mjx_pbac/chain-v0", num_envs=NUM_ENVS, seed=0, **CHAIN)
    assert isinstance(vec, MjxVectorEnv) and vec.spec.id == "mjx_pbac/chain-v0"
    assert vec.episode_length == HORIZON
    vec.close()

    # The MJX Hopper (the slow compile of this file: about 35 s on 2 CPU cores with the cheap
    # solver settings below, 55 s with the model's RK4), its time limit cut to 3 steps.
    vec = gymnasium.make_vec(
        "mjx_pbac/hopper-v0",
        num_envs=2,
        vectorization_mode="vector_entry_point",
        episode_length=3,
        integrator="euler",
        iterations=1,
        ls_iterations=4,
    )
    assert isinstance(vec, MjxVectorEnv)
    assert repr(vec) == "MjxVectorEnv(mjx_pbac/hopper-v0, num_envs=2)"
    assert vec.single_observation_space.shape == (11,) and vec.single_action_space.shape == (3,)
    _obs, _ = vec.reset(seed=0)
    for _ in range(3):
        next_obs, reward, terminated, truncated, info = vec.step(np.zeros((2, 3), np.float32))
        assert next_obs in vec.observation_space and np.isfinite(reward).all()
    assert truncated.all() and not terminated.any()  # standing still for 3 steps does not fall
    final_obs = np.stack(info["final_obs"][info["_final_obs"]])
    chex.assert_shape(final_obs, (2, 11))
    assert not np.allclose(final_obs, next_obs)
    np.testing.assert_array_equal(info["episode"]["l"], [3, 3])
    vec.close()
    assert vec.closed
