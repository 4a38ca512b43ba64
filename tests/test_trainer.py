"""The shared loop: replay ring, posterior sampling schedule, what gets stored, no retracing and no
host transfers inside a chunk, and the truncation/termination distinction in PBAC's targets."""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jp
import numpy as np
import pytest

import envs
from mjx_pbac import replay
from mjx_pbac.config import PBACConfig, TrainConfig
from mjx_pbac.hlo import program_stats
from mjx_pbac.loop import make_trainer, member_inputs, redraw_heads
from mjx_pbac.pbac import make_pbac
from tests.probe_envs import CountingEnv, value_batch

SMALL = PBACConfig(num_critics=3, hidden_sizes=(8,))


def _one_member(trainer, algorithm, config=SMALL, seed=0):
    """The initial state of a one-member run (leading member axis of size 1)."""
    return trainer.init(*member_inputs(algorithm, [(seed, config)]))


def _member(tree, index=0):
    return jax.tree.map(lambda leaf: leaf[index], jax.device_get(tree))




# -- replay ---------------------------------------------------------------------------------


def test_replay_ring_wraps_around_without_shifting():
    buffer = replay.init(capacity=5, obs_size=2, action_size=1)
    buffer = replay.insert(buffer, value_batch([1, 2, 3]))
    assert int(buffer.position) == 3 and int(buffer.size) == 3
    buffer = replay.insert(buffer, value_batch([4, 5, 6]))
    # 6 overwrote the oldest (1) in slot 0; the others did not move.
    np.testing.assert_array_equal(buffer.data.reward, [6, 2, 3, 4, 5])
    assert int(buffer.position) == 1 and int(buffer.size) == 5
    buffer = replay.insert(buffer, value_batch([7, 8, 9, 10]))
    np.testing.assert_array_equal(buffer.data.reward, [6, 7, 8, 9, 10])
    assert int(buffer.position) == 0 and int(buffer.size) == 5
    np.testing.assert_array_equal(buffer.data.next_obs[:, 0], buffer.data.reward + 0.5)
    np.testing.assert_array_equal(buffer.data.truncated, 1.0)
    np.testing.assert_array_equal(buffer.data.terminated, 0.0)


def test_replay_samples_uniformly_from_stored_transitions_only():
    buffer = replay.init(capacity=100, obs_size=2, action_size=1)
    buffer = replay.insert(buffer, value_batch([1, 2, 3, 4]))
    batch = replay.sample(buffer, jax.random.key(0), 4000)
    chex.assert_shape(batch.obs, (4000, 2))
    values, counts = np.unique(np.asarray(batch.reward), return_counts=True)
    np.testing.assert_array_equal(values, [1, 2, 3, 4])  # never an empty slot (reward 0)
    assert counts.min() > 850 and counts.max() < 1150  # 1000 expected each, sd ~27
    np.testing.assert_array_equal(batch.action[:, 0], batch.reward)  # rows stay together


def test_replay_refuses_more_than_capacity():
    with pytest.raises(ValueError, match="capacity 2"):
        replay.insert(replay.init(2, 2, 1), value_batch([1, 2, 3]))


# -- posterior sampling ---------------------------------------------------------------------


def test_heads_redrawn_at_episode_start_and_every_psr_steps_per_instance():
    psr, num_heads = 3, 1000  # many heads: a redraw keeps the old head with probability 1e-3
    heads = jp.arange(4, dtype=jp.int32)
    # instance 0: mid-episode, counter 4 -> keep; 1: counter 6 (multiple of 3) -> redraw;
    # 2: episode_step 0 (new episode), counter 7 -> redraw; 3: mid-episode, counter 0 -> redraw.
    counter = jp.asarray([4, 6, 7, 0])
    episode_step = jp.asarray([2, 5, 0, 9])
    new = redraw_heads(jax.random.key(1), heads, counter, episode_step, num_heads, psr)
    assert int(new[0]) == 0
    assert int(new[1]) != 1 and int(new[2]) != 2 and int(new[3]) != 3
    assert len(set(np.asarray(new[1:]).tolist())) == 3  # each instance draws its own head


def test_head_schedule_over_time_follows_counter_not_episode():
    """Simulated over 12 steps of one instance with PSR 5 and an episode boundary at step 7:
    redraws at counters 0, 5, 10 and at the episode start (step 7), nowhere else."""
    psr, num_heads = 5, 10_000
    episode_step = [0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4]
    head = jp.asarray([-1], jp.int32)
    redraw_steps = []
    for t in range(12):
        new = redraw_heads(jax.random.key(t), head, jp.asarray([t]), jp.asarray([episode_step[t]]), num_heads, psr)
        if int(new[0]) != int(head[0]):
            redraw_steps.append(t)
        head = new
    assert redraw_steps == [0, 5, 7, 10]


def test_head_draws_are_uniform():
    draws = redraw_heads(jax.random.key(0), jp.zeros(50_000, jp.int32), jp.zeros(50_000, jp.int32), jp.ones(50_000, jp.int32), 10, 5)
    counts = np.bincount(np.asarray(draws), minlength=10)
    assert counts.min() > 4700 and counts.max() < 5300  # 5000 expected, sd ~67


# -- what the loop stores -------------------------------------------------------------------


def _counting_trainer(terminate_at, num_envs=2, chunk_steps=16):
    env = CountingEnv(episode_length=5, terminate_at=terminate_at)
    train = TrainConfig(
        env="probe", total_steps=4 * chunk_steps, num_envs=num_envs, batch_size=4, updates_per_step=1,
        buffer_size=64, warmup_steps=chunk_steps, chunk_steps=chunk_steps, eval_interval=chunk_steps,
        eval_episodes=2, checkpoint_interval=chunk_steps,
    )
    algorithm = make_pbac(SMALL, env.observation_size, env.action_size)
    trainer = make_trainer(train, env, algorithm)
    return trainer, _one_member(trainer, algorithm, dataclasses.replace(SMALL, posterior_sampling_rate=2))


def test_truncation_stores_final_obs_and_is_not_termination():
    trainer, state = _counting_trainer(terminate_at=None, num_envs=1, chunk_steps=8)
    state, metrics = _member(trainer.warmup_chunk(state))
    data = state.buffer.data
    # Steps t = 0..4 then a reset: obs[0] = 0,1,2,3,4,0,1,2 ; next_obs[0] = 1..5,1,2,3.
    np.testing.assert_array_equal(data.obs[:8, 0], [0, 1, 2, 3, 4, 0, 1, 2])
    np.testing.assert_array_equal(data.next_obs[:8, 0], [1, 2, 3, 4, 5, 1, 2, 3])
    np.testing.assert_array_equal(data.truncated[:8], [0, 0, 0, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(data.terminated[:8], 0)
    np.testing.assert_array_equal(data.reward[:8], [1, 2, 3, 4, 5, 1, 2, 3])
    np.testing.assert_array_equal(data.next_obs[:8, 1], data.action[:8, 0])  # the action taken
    assert int(metrics["episodes"]) == 1 and float(metrics["return_sum"]) == 15.0


def test_termination_is_stored_as_terminated_with_its_final_obs():
    trainer, state = _counting_trainer(terminate_at=3, num_envs=2, chunk_steps=8)
    state, metrics = _member(trainer.warmup_chunk(state))
    data = state.buffer.data
    # Two instances interleaved per vector step: rows (2t, 2t+1) hold step t of instances 0, 1.
    obs = data.obs[:8, 0].reshape(4, 2)[:, 0]
    next_obs = data.next_obs[:8, 0].reshape(4, 2)[:, 0]
    np.testing.assert_array_equal(obs, [0, 1, 2, 0])
    np.testing.assert_array_equal(next_obs, [1, 2, 3, 1])
    np.testing.assert_array_equal(data.terminated[:8].reshape(4, 2)[:, 0], [0, 0, 1, 0])
    np.testing.assert_array_equal(data.truncated[:8], 0)
    assert int(metrics["episodes"]) == 2 and float(metrics["return_sum"]) == 12.0  # 2 x (1+2+3)


def test_sampling_counter_and_env_steps_advance_per_vector_step():
    trainer, state = _counting_trainer(terminate_at=None, num_envs=2, chunk_steps=16)
    state, _ = trainer.warmup_chunk(state)
    state, _ = _member(trainer.train_chunk(state))
    np.testing.assert_array_equal(state.sampling_counter, [16, 16])
    assert int(state.env_steps) == 32 and int(state.updates) == 8
    assert int(state.buffer.size) == 32


def test_pbac_targets_bootstrap_through_truncation_not_termination():
    env = CountingEnv()
    algorithm = make_pbac(SMALL, env.observation_size, env.action_size)
    agent = algorithm.init(jax.random.key(0))
    batch = value_batch([1.0, 2.0, 3.0])
    terminated = batch.replace(terminated=jp.ones(3), truncated=jp.zeros(3))
    _, metrics = algorithm.update(agent, terminated, jax.random.key(1), jp.asarray(0))
    assert float(metrics["target_mean"]) == pytest.approx(2.0, abs=1e-6)  # y = r exactly
    truncated = batch.replace(terminated=jp.zeros(3), truncated=jp.ones(3))
    _, metrics = algorithm.update(agent, truncated, jax.random.key(1), jp.asarray(0))
    assert abs(float(metrics["target_mean"]) - 2.0) > 1e-3  # bootstrapped


# -- compiled once, nothing crosses to the host --------------------------------------------


def test_chunks_compile_once_and_stay_on_device():
    env = envs.make("chain")
    train = TrainConfig(
        env="chain", total_steps=200, num_envs=4, batch_size=16, updates_per_step=2, buffer_size=400,
        warmup_steps=40, chunk_steps=40, eval_interval=40, eval_episodes=2, checkpoint_interval=40,
    )
    algorithm = make_pbac(SMALL, env.observation_size, env.action_size)
    trainer = make_trainer(train, env, algorithm)
    state = _one_member(trainer, algorithm)
    state, _ = trainer.warmup_chunk(state)
    with jax.transfer_guard("disallow"):
        for _ in range(3):
            state, metrics = trainer.train_chunk(state)
        result = trainer.evaluate(state)
    # One program each for warm-up and training, each compiled once; neither branches on data.
    assert trainer.warmup_chunk._cache_size() == 1 and trainer.train_chunk._cache_size() == 1
    for chunk in (trainer.warmup_chunk, trainer.train_chunk):
        stats = program_stats(chunk.lower(state).compile())
        assert stats["data_dependent_loops"] == 0 and stats["conditionals"] == 0, stats
    chex.assert_shape(result["returns"], (1, 2))
    assert np.isfinite(float(metrics["critic_loss"][0]))
    assert int(state.env_steps[0]) == 160


@pytest.mark.parametrize(
    "pbac",
    [
        PBACConfig(num_critics=3, hidden_sizes=(8,), loss_form="paper"),
        PBACConfig(num_critics=3, hidden_sizes=(8,), actor="deterministic", use_propagation=False),
    ],
    ids=["paper-form", "deterministic-no-propagation"],
)
def test_variants_train_without_nan(pbac):
    env = envs.make("chain")
    train = TrainConfig(
        env="chain", total_steps=200, num_envs=2, batch_size=16, updates_per_step=1, buffer_size=400,
        warmup_steps=100, chunk_steps=100, eval_interval=100, eval_episodes=2, checkpoint_interval=100,
    )
    algorithm = make_pbac(pbac, env.observation_size, env.action_size)
    trainer = make_trainer(train, env, algorithm)
    state, _ = trainer.warmup_chunk(_one_member(trainer, algorithm, pbac))
    state, metrics = _member(trainer.train_chunk(state))
    for name, value in metrics.items():
        assert np.all(np.isfinite(value)), name
    if pbac.actor == "deterministic":
        assert float(metrics["alpha"]) == 0.0 and float(metrics["entropy"]) == 0.0


def test_each_loss_moves_only_its_own_parameters():
    """One PBAC update under different learning rates: the actor lr changes only the actor, the
    temperature lr only log alpha, the critic lr the critics, their Polyak targets and (because
    the actor step scores heads with the just-updated critics, SPEC 2.3's order) the actor, never
    alpha. So the actor and temperature losses send no gradient into the critics."""
    env = CountingEnv()
    batch = value_batch([1.0, 2.0, 3.0, 4.0])

    def updated(**lrs):
        config = dataclasses.replace(SMALL, **lrs)
        algorithm = make_pbac(config, env.observation_size, env.action_size)
        agent = algorithm.init(jax.random.key(0))
        new, _ = algorithm.update(agent, batch, jax.random.key(1), jp.asarray(1))
        return agent, new

    def same(a, b):
        return all(bool(jp.array_equal(x, y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))

    before, base = updated()
    assert not same(before.critic_params, base.critic_params)
    assert not same(before.actor_params, base.actor_params)
    assert not same(before.log_alpha, base.log_alpha)
    groups = {
        "critic_lr": ("critic_params", "target_critic_params", "actor_params"),
        "actor_lr": ("actor_params",),
        "alpha_lr": ("log_alpha",),
    }
    for lr, moved in groups.items():
        _, other = updated(**{lr: 0.1})
        for name in ("critic_params", "target_critic_params", "actor_params", "log_alpha"):
            assert same(getattr(base, name), getattr(other, name)) == (name not in moved), (lr, name)


def test_matmul_precision_reaches_every_matrix_product_of_the_chunk():
    """float32 (the default) is written into the program's dot products; "default" leaves XLA's
    choice (TF32 on recent NVIDIA GPUs), so the programs differ."""
    env = envs.make("chain")
    algorithm = make_pbac(SMALL, env.observation_size, env.action_size)
    texts = {}
    for precision in ("float32", "default"):
        train = TrainConfig(
            env="chain", total_steps=8, num_envs=1, batch_size=4, updates_per_step=1, buffer_size=16,
            warmup_steps=4, chunk_steps=4, eval_interval=4, eval_episodes=1, checkpoint_interval=4,
            matmul_precision=precision,
        )
        trainer = make_trainer(train, env, algorithm)
        texts[precision] = trainer.train_chunk.lower(_one_member(trainer, algorithm)).as_text()
    dots = [line for line in texts["float32"].splitlines() if "dot_general" in line]
    assert dots and all("HIGHEST" in line for line in dots)
    assert "HIGHEST" not in texts["default"]
