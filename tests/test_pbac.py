"""PBAC (`mjx_pbac.algos.pbac`): its targets bootstrap through truncation only, each loss moves only
its own parameters, its variants train without NaN."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np
import pytest

import envs
from mjx_pbac.algos import pbac
from mjx_pbac.config import TrainConfig
from mjx_pbac.loop import make_trainer, member_inputs
from tests.probe_envs import CountingEnv, same_tree, value_batch

SMALL = pbac.Config(num_critics=3, hidden_sizes=(8,))


def _one_member(trainer, config=SMALL, seed=0):
    """The initial state of a one-member run (leading member axis of size 1)."""
    return trainer.init(*member_inputs([(seed, config)]))


def _member(tree, index=0):
    return jax.tree.map(lambda leaf: leaf[index], jax.device_get(tree))


@pytest.mark.slow
def test_pbac_targets_bootstrap_through_truncation_not_termination():
    env = CountingEnv()
    algorithm = pbac.make(SMALL, env.observation_size, env.action_size)
    update = jax.jit(algorithm.update)  # one compile serves both calls (eager dispatch is slower)
    agent = algorithm.init(jax.random.key(0), SMALL)
    batch = value_batch([1.0, 2.0, 3.0])
    terminated = batch.replace(terminated=jp.ones(3), truncated=jp.zeros(3))
    _, metrics = update(agent, terminated, jax.random.key(1), jp.asarray(0))
    assert float(metrics["target_mean"]) == pytest.approx(2.0, abs=1e-6)  # y = r exactly
    truncated = batch.replace(terminated=jp.zeros(3), truncated=jp.ones(3))
    _, metrics = update(agent, truncated, jax.random.key(1), jp.asarray(0))
    assert abs(float(metrics["target_mean"]) - 2.0) > 1e-3  # bootstrapped


@pytest.mark.parametrize(
    "variant",
    [
        pbac.Config(num_critics=3, hidden_sizes=(8,), loss_form="paper"),
        pbac.Config(num_critics=3, hidden_sizes=(8,), actor="deterministic", use_propagation=False),
    ],
    ids=["paper-form", "deterministic-no-propagation"],
)
def test_variants_train_without_nan(variant):
    env = envs.make("chain")
    train = TrainConfig(
        env="chain", total_steps=200, num_envs=2, batch_size=16, updates_per_step=1, buffer_size=400,
        warmup_steps=100, chunk_steps=100, eval_interval=100, eval_episodes=2, checkpoint_interval=100,
    )
    algorithm = pbac.make(variant, env.observation_size, env.action_size)
    trainer = make_trainer(train, env, algorithm)
    state = _one_member(trainer, variant)
    initial = _member(state.agent)  # a host copy: the chunks donate the state's buffers
    state, _ = trainer.warmup_chunk(state)
    state, metrics = _member(trainer.train_chunk(state))
    for name, value in metrics.items():
        assert np.all(np.isfinite(value)), name
    # 50 gradient steps (one per vector step of 2 envs) moved the critics, their targets and the
    # actor, and left them finite.
    assert int(state.updates) == 50
    for name in ("critic_params", "target_critic_params", "actor_params"):
        assert not same_tree(getattr(initial, name), getattr(state.agent, name)), name
        assert all(np.all(np.isfinite(leaf)) for leaf in jax.tree.leaves(getattr(state.agent, name))), name
    if variant.actor == "deterministic":
        assert float(metrics["alpha"]) == 0.0 and float(metrics["entropy"]) == 0.0


@pytest.mark.slow
def test_each_loss_moves_only_its_own_parameters():
    """One PBAC update under different learning rates: the actor lr changes only the actor, the
    temperature lr only log alpha, the critic lr the critics and their Polyak targets, never
    alpha. So the actor and temperature losses send no gradient into the critics. The critic lr
    also reaches the actor (its step scores heads with the just-updated critics, Algorithm 1's
    order), which shows after two updates: within one, Adam's first step is about lr x sign(grad)
    and hides the critics' change but for last-bit rounding."""
    env = CountingEnv()
    batch = value_batch([1.0, 2.0, 3.0, 4.0])

    def updated(steps=1, **lrs):
        config = dataclasses.replace(SMALL, **lrs)
        algorithm = pbac.make(config, env.observation_size, env.action_size)
        agent = new = algorithm.init(jax.random.key(0), config)
        for step in range(steps):
            new, _ = algorithm.update(new, batch, jax.random.key(1 + step), jp.asarray(1))
        return agent, new

    def same(a, b):
        return all(bool(jp.array_equal(x, y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))

    before, base = updated()
    assert not same(before.critic_params, base.critic_params)
    assert not same(before.actor_params, base.actor_params)
    assert not same(before.log_alpha, base.log_alpha)
    groups = {
        "critic_lr": ("critic_params", "target_critic_params"),
        "actor_lr": ("actor_params",),
        "alpha_lr": ("log_alpha",),
    }
    for lr, moved in groups.items():
        _, other = updated(**{lr: 0.1})
        for name in ("critic_params", "target_critic_params", "actor_params", "log_alpha"):
            if lr == "critic_lr" and name == "actor_params":
                continue  # within one update only through rounding; see below
            assert same(getattr(base, name), getattr(other, name)) == (name not in moved), (lr, name)
    _, twice = updated(steps=2)
    _, twice_fast_critics = updated(steps=2, critic_lr=0.1)
    assert not same(twice.actor_params, twice_fast_critics.actor_params)
