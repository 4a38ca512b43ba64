"""SAC baseline (`mjx_pbac.algos.sac`; paper appendix "Hyperparameters and architectures": the
Huber loss for every baseline): Huber TD loss by hand, min-over-critics targets that bootstrap
through truncation only, each loss moving only its own parameters, and a short run through the
shared loop.

Expected numbers are worked out by hand in the comments; nothing re-implements the losses.
"""

from __future__ import annotations

import dataclasses

import chex
import jax
import jax.numpy as jp
import numpy as np
import optax
import pytest

import envs
from mjx_pbac.algos import sac
from mjx_pbac.algos.sac import huber, sac_critic_loss, sac_targets
from mjx_pbac.config import TrainConfig
from mjx_pbac.loop import make_trainer, member_inputs
from tests.probe_envs import CountingEnv, same_tree, value_batch

SMALL = sac.Config(hidden_sizes=(8,))






# -- Huber ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x, delta, value, slope",
    [
        (0.5, 1.0, 0.125, 0.5),  # quadratic: 0.5 * 0.5^2 = 0.125; slope x = 0.5
        (-0.8, 1.0, 0.32, -0.8),  # 0.5 * 0.64 = 0.32; slope -0.8
        (1.0, 1.0, 0.5, 1.0),  # at delta both pieces give 0.5 * 1 = 1 * (1 - 0.5); slope 1
        (3.0, 1.0, 2.5, 1.0),  # linear: 1 * (3 - 0.5) = 2.5; slope delta = 1
        (-2.0, 1.0, 1.5, -1.0),  # 1 * (2 - 0.5) = 1.5; slope -delta = -1
        (1.5, 2.0, 1.125, 1.5),  # inside delta 2: 0.5 * 2.25 = 1.125; slope 1.5
        (-5.0, 2.0, 8.0, -2.0),  # 2 * (5 - 1) = 8; slope -2
    ],
)
def test_huber_values_and_gradient(x, delta, value, slope):
    x = jp.asarray(x, jp.float32)
    assert float(huber(x, delta)) == pytest.approx(value, abs=1e-6)
    assert float(jax.grad(huber)(x, delta)) == pytest.approx(slope, abs=1e-6)
    # Cross-check against optax's implementation of the same convention.
    assert float(huber(x, delta)) == pytest.approx(float(optax.losses.huber_loss(x, delta=delta)), abs=1e-6)


# -- critic loss ----------------------------------------------------------------------------
#
# K = 2 critics (rows), B = 3 samples (columns), delta = 1.
#   q = [[0,  3, 0  ],
#        [2, -1, 4  ]]
#   y =  [0.5, 1, 2.5]
#   q - y = [[-0.5,  2, -2.5],
#            [ 1.5, -2,  1.5]]
#   huber = [[0.5 * 0.25 = 0.125, 2 - 0.5 = 1.5, 2.5 - 0.5 = 2.0],
#            [1.5 - 0.5 = 1.0,    2 - 0.5 = 1.5, 1.5 - 0.5 = 1.0]]
#   sum = 0.125 + 1.5 + 2 + 1 + 1.5 + 1 = 7.125 = 57/8;  mean over the 6 entries = 57/48 = 19/16
#   d loss / d q = huber'(q - y) / 6 = [[-0.5, 1, -1], [1, -1, 1]] / 6
#   td_abs = (0.5 + 2 + 2.5 + 1.5 + 2 + 1.5) / 6 = 10/6 = 5/3
#   q_mean = (0 + 3 + 0 + 2 - 1 + 4) / 6 = 8/6 = 4/3
#   q_spread: std over 2 critics = |q0 - q1| / 2 = [1, 2, 2] -> mean 5/3
Q = jp.array([[0.0, 3.0, 0.0], [2.0, -1.0, 4.0]], jp.float32)
Y = jp.array([0.5, 1.0, 2.5], jp.float32)


def test_sac_critic_loss_by_hand():
    loss, aux = sac_critic_loss(Q, Y, huber_delta=1.0)
    assert float(loss) == pytest.approx(19.0 / 16.0, abs=1e-6)
    assert float(aux["td_abs"]) == pytest.approx(5.0 / 3.0, abs=1e-6)
    assert float(aux["q_mean"]) == pytest.approx(4.0 / 3.0, abs=1e-6)
    assert float(aux["q_spread"]) == pytest.approx(5.0 / 3.0, abs=1e-6)
    grad_q = jax.grad(lambda q: sac_critic_loss(q, Y, huber_delta=1.0)[0])(Q)
    np.testing.assert_allclose(grad_q, np.array([[-0.5, 1.0, -1.0], [1.0, -1.0, 1.0]]) / 6.0, atol=1e-6)


def test_sac_critic_loss_sends_no_gradient_to_the_target():
    grad_y = jax.grad(lambda y: sac_critic_loss(Q, y, huber_delta=1.0)[0])(Y)
    np.testing.assert_array_equal(grad_y, np.zeros(3))


def test_sac_critic_loss_checks_shapes():
    with pytest.raises(ValueError, match=r"\[K, B\]"):
        sac_critic_loss(Q, Q, huber_delta=1.0)


# -- targets --------------------------------------------------------------------------------


def test_targets_use_min_over_critics_and_stop_at_termination():
    # next_q = [[1, 5, 0], [3, 2, -4]] -> min over critics [1, 2, -4]; gamma 1/2, alpha 1/4.
    #   row 0: 1 + 1/2 (1 - 1/4 * 2)     = 1 + 1/2 * 1/2      = 1.25
    #   row 1: terminated -> y = r       = 2
    #   row 2: 3 + 1/2 (-4 - 1/4 * 1/2)  = 3 + 1/2 * (-4.125) = 0.9375
    y = sac_targets(
        reward=jp.array([1.0, 2.0, 3.0]),
        terminated=jp.array([0.0, 1.0, 0.0]),
        next_q=jp.array([[1.0, 5.0, 0.0], [3.0, 2.0, -4.0]]),
        next_log_prob=jp.array([2.0, -1.0, 0.5]),
        gamma=0.5,
        alpha=0.25,
    )
    chex.assert_shape(y, (3,))
    np.testing.assert_allclose(y, [1.25, 2.0, 0.9375], atol=1e-6)


def _constant_target_critics(params, values):
    """Target critic k outputs values[k] everywhere: last layer's kernel 0, bias values[k]."""
    layers = params["params"]
    last = max(layers, key=lambda name: int(name.split("_")[-1]))
    dense = layers[last]["Dense_0"]
    constant = {"kernel": jp.zeros_like(dense["kernel"]), "bias": jp.asarray(values, jp.float32)[:, None]}
    return {"params": {**layers, last: {"Dense_0": constant}}}


def test_update_targets_min_over_target_critics_bootstrap_through_truncation_not_termination():
    env = CountingEnv()
    config = dataclasses.replace(SMALL, gamma=0.5)
    algorithm = sac.make(config, env.observation_size, env.action_size)
    update = jax.jit(algorithm.update)  # one compile serves both calls (eager dispatch is slower)
    agent = algorithm.init(jax.random.key(0), config)
    # Target critics 3 and -2 everywhere; alpha = e^-100 ~ 0 so the entropy term vanishes.
    agent = agent.replace(
        target_critic_params=_constant_target_critics(agent.target_critic_params, [3.0, -2.0]),
        log_alpha=jp.asarray(-100.0, jp.float32),
    )
    batch = value_batch([1.0, 2.0, 3.0]).replace(
        terminated=jp.array([1.0, 0.0, 0.0]), truncated=jp.array([0.0, 1.0, 0.0])
    )
    _, metrics = update(agent, batch, jax.random.key(1), None)
    # min(3, -2) = -2:  y = [1 (terminated), 2 + 1/2 (-2) = 1 (truncated), 3 + 1/2 (-2) = 2]
    # mean 4/3. (The max, 3, would give (1 + 3.5 + 4.5)/3 = 3; the mean, 1/2, (1 + 2.25 + 3.25)/3 = 13/6.)
    assert float(metrics["target_mean"]) == pytest.approx(4.0 / 3.0, abs=1e-5)

    # Every row terminated: y = r exactly, whatever the critics, the policy and alpha.
    fresh = algorithm.init(jax.random.key(0), config)
    terminated = value_batch([1.0, 2.0, 3.0]).replace(terminated=jp.ones(3), truncated=jp.zeros(3))
    _, metrics = update(fresh, terminated, jax.random.key(1), None)
    assert float(metrics["target_mean"]) == pytest.approx(2.0, abs=1e-6)


# -- acting ---------------------------------------------------------------------------------


def test_acting_needs_no_state_and_eval_is_deterministic():
    env = CountingEnv()
    algorithm = sac.make(SMALL, env.observation_size, env.action_size)
    assert algorithm.acting.init(jax.random.key(0), SMALL, 3) is None  # one head: nothing to keep
    assert algorithm.acting.update_context is None
    agent = algorithm.init(jax.random.key(0), SMALL)
    obs = jp.array([[0.0, 0.0], [1.0, -1.0], [2.0, 0.5]])
    key = jax.random.key(3)
    action = algorithm.act(agent, None, obs, key)
    chex.assert_shape(action, (3, 1))
    np.testing.assert_array_equal(action, algorithm.act(agent, None, obs, key))
    assert not np.array_equal(action, algorithm.act(agent, None, obs, jax.random.key(4)))  # sampled
    assert np.all(np.abs(action) <= 1.0)
    eval_action = algorithm.eval_act(agent, obs)
    chex.assert_shape(eval_action, (3, 1))
    np.testing.assert_array_equal(eval_action, algorithm.eval_act(agent, obs))
    assert not np.array_equal(action, eval_action)  # a sample, not the mode


def test_state_holds_the_members_config_and_its_learning_rates():
    config = dataclasses.replace(SMALL, tau=0.01, critic_lr=1e-3)
    agent = sac.make(config, 2, 1).init(jax.random.key(0), config)
    assert float(agent.config.tau) == pytest.approx(0.01) and float(agent.config.critic_lr) == pytest.approx(1e-3)
    assert float(agent.config.actor_lr) == pytest.approx(3e-4) and float(agent.config.alpha_lr) == pytest.approx(3e-4)
    assert float(agent.critic_opt_state.hyperparams["learning_rate"]) == pytest.approx(1e-3)
    assert float(agent.actor_opt_state.hyperparams["learning_rate"]) == pytest.approx(3e-4)


# -- which loss moves what ------------------------------------------------------------------


def test_each_loss_moves_only_its_own_parameters():
    """One SAC update under different learning rates: the actor lr changes only the actor, the
    temperature lr only log alpha, the critic lr the critics, their Polyak targets and (because
    the actor is scored by the just-updated critics) the actor, never alpha. So the actor and
    temperature losses send no gradient into the critics."""
    env = CountingEnv()
    batch = value_batch([1.0, 2.0, 3.0, 4.0])

    algorithm = sac.make(SMALL, env.observation_size, env.action_size)
    update = jax.jit(algorithm.update)  # learning rates are traced knobs: one compile for all

    def updated(**lrs):
        agent = algorithm.init(jax.random.key(0), dataclasses.replace(SMALL, **lrs))
        new, _ = update(agent, batch, jax.random.key(1), None)
        return agent, new

    before, base = updated()
    for name in ("critic_params", "target_critic_params", "actor_params", "log_alpha"):
        assert not same_tree(getattr(before, name), getattr(base, name)), name
    groups = {
        "critic_lr": ("critic_params", "target_critic_params", "actor_params"),
        "actor_lr": ("actor_params",),
        "alpha_lr": ("log_alpha",),
    }
    for lr, moved in groups.items():
        _, other = updated(**{lr: 0.1})
        for name in ("critic_params", "target_critic_params", "actor_params", "log_alpha"):
            assert same_tree(getattr(base, name), getattr(other, name)) == (name not in moved), (lr, name)


# -- through the shared loop ----------------------------------------------------------------


@pytest.mark.slow
def test_short_chain_run_is_finite_and_seeds_differ():
    env = envs.make("chain")
    train = TrainConfig(
        env="chain", total_steps=200, num_envs=1, batch_size=16, updates_per_step=1, buffer_size=400,
        warmup_steps=100, chunk_steps=100, eval_interval=100, eval_episodes=2, checkpoint_interval=100,
    )
    algorithm = sac.make(SMALL, env.observation_size, env.action_size)
    trainer = make_trainer(train, env, algorithm)
    state = trainer.init(*member_inputs([(0, SMALL), (1, SMALL)]))
    state, _ = trainer.warmup_chunk(state)
    state, metrics = trainer.train_chunk(state)
    assert set(metrics) >= {
        "critic_loss", "critic_q_mean", "critic_q_spread", "critic_td_abs",
        "actor_loss", "alpha", "entropy", "target_mean",
    }
    for name, value in metrics.items():
        assert np.all(np.isfinite(np.asarray(value))), name
    assert state.acting is None  # SAC keeps no acting state
    assert int(state.updates[0]) == 100
    returns = trainer.evaluate(state)["returns"]
    chex.assert_shape(returns, (2, 2))
    assert np.all(np.isfinite(returns))
    # Seed independence: the two members' parameters and losses differ.
    actor = jax.tree.leaves(state.agent.actor_params)
    assert not all(np.array_equal(leaf[0], leaf[1]) for leaf in actor)
    assert float(metrics["critic_loss"][0]) != float(metrics["critic_loss"][1])
