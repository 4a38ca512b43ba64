"""BootDQN-P (`mjx_pbac.algos.bootdqn_p`; paper appendix "Baselines", BootDQN-P): the masked Huber
loss by hand, the fixed priors (Q = f + beta p, never trained), targets from target critic k at
head k, and short training runs on `chain`."""

from __future__ import annotations

import dataclasses
import math

import chex
import jax
import jax.numpy as jp
import numpy as np
import optax
import pytest

import envs
from mjx_pbac import replay
from mjx_pbac.algos import bootdqn_p
from mjx_pbac.algos.base import traced
from mjx_pbac.algos.bootdqn_p import (
    State,
    bootdqn_critic_loss,
    bootdqn_targets,
    head_actions,
    huber,
    make_networks,
    randomized_prior_q,
)
from mjx_pbac.config import TrainConfig
from mjx_pbac.loop import make_trainer, member_inputs
from tests.probe_envs import same_tree

SMALL = bootdqn_p.Config(num_critics=3, hidden_sizes=(8,))
OBS_SIZE, ACTION_SIZE = 2, 1




def _batch(n=4, terminated=0.0, truncated=0.0) -> replay.Transition:
    values = jp.linspace(-1.0, 1.0, n)
    return replay.Transition(
        obs=jp.stack([values, 0.5 * values], axis=1),
        action=0.7 * values[:, None],
        reward=1.0 + values,
        next_obs=jp.stack([values + 0.25, -values], axis=1),
        terminated=jp.full((n,), terminated),
        truncated=jp.full((n,), truncated),
    )


# -- the loss by hand ---------------------------------------------------------------------------
#
# K = 3 members (rows), B = 2 samples (columns).
#   q    = [[1,  3], [0, 2], [4, -1]]
#   y    = [[0.5, 0], [0, 4], [1,  1]]
#   mask = [[1,  1], [1, 0], [1,  1]]          (entry [1, 1] masked)
#   q - y = [[0.5, 3], [0, -2], [3, -2]]
Q = jp.array([[1.0, 3.0], [0.0, 2.0], [4.0, -1.0]])
Y = jp.array([[0.5, 0.0], [0.0, 4.0], [1.0, 1.0]])
MASK = jp.array([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])

# delta = 1: huber(0.5) = 0.5 * 0.25 = 1/8 (quadratic); huber(3) = 1 * (3 - 1/2) = 5/2 (linear);
#   huber(0) = 0; [1, 1] masked; huber(3) = 5/2; huber(-2) = 1 * (2 - 1/2) = 3/2 (linear).
#   sum = 1/8 + 5/2 + 0 + 5/2 + 3/2 = 53/8, mean over all K B = 6 entries: 53/48.
LOSS_DELTA_1 = 53.0 / 48.0
# delta = 2: huber(0.5) = 1/8; huber(3) = 2 * (3 - 1) = 4; huber(0) = 0; huber(3) = 4;
#   huber(-2) = 0.5 * 4 = 2 (|x| = delta: both branches give 2).  sum = 81/8, / 6 = 27/16.
LOSS_DELTA_2 = 27.0 / 16.0
# q_mean = (1 + 3 + 0 + 2 + 4 - 1) / 6 = 9/6 = 3/2.
# q_spread: column 0 = [1, 0, 4], mean 5/3, squares 4/9 + 25/9 + 49/9 = 26/3, / 3 -> std sqrt(26)/3;
#   column 1 = [3, 2, -1], mean 4/3, squares 25/9 + 4/9 + 49/9 = 26/3 -> also sqrt(26)/3.
Q_MEAN = 1.5
Q_SPREAD = math.sqrt(26.0) / 3.0


def test_mse_form_by_hand():
    # the authors' code's squared error: errors q - y = [[0.5, 3], [0, -2], [3, -2]], mask drops
    # [1, 1]: (0.25 + 9 + 0 + 9 + 4) / 6 = 22.25 / 6
    loss, _ = bootdqn_critic_loss(Q, Y, MASK, huber_delta=1.0, loss="mse")
    assert float(loss) == pytest.approx(22.25 / 6.0, rel=1e-6)


@pytest.mark.parametrize("delta, expected", [(1.0, LOSS_DELTA_1), (2.0, LOSS_DELTA_2)])
def test_critic_loss_hand_worked(delta, expected):
    loss, aux = bootdqn_critic_loss(Q, Y, MASK, huber_delta=delta)
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    assert float(aux["q_mean"]) == pytest.approx(Q_MEAN, rel=1e-6)
    assert float(aux["q_spread"]) == pytest.approx(Q_SPREAD, rel=1e-6)


def test_critic_loss_gradients():
    # d loss / d q = mask * clip(q - y, -delta, delta) / 6 with delta = 1:
    #   [[0.5, 1], [0, (masked) 0], [1, -1]] / 6.  Unmasked, entry [1, 1] would be -1/6.
    grad_q, grad_y = jax.grad(lambda q, y: bootdqn_critic_loss(q, y, MASK, huber_delta=1.0)[0], argnums=(0, 1))(Q, Y)
    np.testing.assert_allclose(grad_q, np.array([[0.5, 1.0], [0.0, 0.0], [1.0, -1.0]]) / 6.0, rtol=1e-6)
    np.testing.assert_array_equal(grad_y, 0.0)
    unmasked = jax.grad(lambda q: bootdqn_critic_loss(q, Y, jp.ones_like(MASK), huber_delta=1.0)[0])(Q)
    assert float(unmasked[1, 1]) == pytest.approx(-1.0 / 6.0)


def test_huber_matches_optax():
    x = jax.random.normal(jax.random.key(0), (1000,)) * 3.0
    for delta in (0.5, 1.0, 2.0):
        np.testing.assert_allclose(huber(x, delta), optax.losses.huber_loss(x, delta=delta), rtol=1e-6, atol=1e-6)


def test_critic_loss_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"\[K, B\]"):
        bootdqn_critic_loss(Q, Y[:, :1], MASK, huber_delta=1.0)


# -- priors: Q = f + beta p, never trained ------------------------------------------------------


def _algorithm(config=SMALL):
    return bootdqn_p.make(config, OBS_SIZE, ACTION_SIZE)


def test_state_shapes_and_priors_are_their_own_network():
    state = _algorithm().init(jax.random.key(0), SMALL)
    assert isinstance(state, State)
    for leaf in jax.tree.leaves(state.prior_params):
        assert leaf.shape[0] == SMALL.num_critics
    chex.assert_trees_all_equal_shapes(state.prior_params, state.critic_params)
    assert not same_tree(state.prior_params, state.critic_params)  # own init key
    assert same_tree(state.target_critic_params, state.critic_params)
    # No optimiser state for the priors: Adam's moments mirror f and the actor only (plus Adam's
    # step count, and the injected learning rate with its own count).
    n_critic = len(jax.tree.leaves(state.critic_params))
    n_actor = len(jax.tree.leaves(state.actor_params))
    assert len(jax.tree.leaves(state.critic_opt_state)) == 2 * n_critic + 3
    assert len(jax.tree.leaves(state.actor_opt_state)) == 2 * n_actor + 3


def test_q_is_f_plus_beta_p():
    config = dataclasses.replace(SMALL, prior_scale=5.0)
    algorithm = _algorithm(config)
    networks = make_networks(config, ACTION_SIZE)
    state = algorithm.init(jax.random.key(0), config)
    batch = _batch()
    p = networks.critic.apply(state.prior_params, batch.obs, batch.action)  # [K, B]
    chex.assert_shape(p, (3, 4))
    q0 = randomized_prior_q(networks.critic, state.critic_params, state.prior_params, 0.0, batch.obs, batch.action)
    q5 = randomized_prior_q(networks.critic, state.critic_params, state.prior_params, 5.0, batch.obs, batch.action)
    np.testing.assert_allclose(q5 - q0, 5.0 * p, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(q0, networks.critic.apply(state.critic_params, batch.obs, batch.action))
    # The update scores replay actions with the same Q: same params and batch, beta 0 vs 5.
    update = jax.jit(algorithm.update)  # one program for both: the prior scale is traced
    zero_beta = traced(dataclasses.replace(config, prior_scale=0.0))
    _, m0 = update(state.replace(config=zero_beta), batch, jax.random.key(1), None)
    _, m5 = update(state, batch, jax.random.key(1), None)
    assert float(m5["critic_q_mean"] - m0["critic_q_mean"]) == pytest.approx(5.0 * float(jp.mean(p)), abs=1e-5)


def test_priors_never_change_over_updates_while_f_and_targets_move():
    algorithm = _algorithm()
    initial = algorithm.init(jax.random.key(0), SMALL)
    update = jax.jit(algorithm.update)
    state = initial
    for step in range(5):
        state, metrics = update(state, _batch(8), jax.random.key(step + 1), None)
    assert same_tree(state.prior_params, initial.prior_params)
    assert not same_tree(state.critic_params, initial.critic_params)
    assert not same_tree(state.target_critic_params, initial.target_critic_params)
    assert not same_tree(state.actor_params, initial.actor_params)
    assert float(metrics["alpha"]) == 0.0 and float(metrics["entropy"]) == 0.0


def test_each_loss_moves_only_its_own_parameters():
    """The actor lr changes only the actor; the critic lr changes f, its targets and (the actor
    step scores heads with the just-updated critics) the actor; the priors never move."""
    batch = _batch()

    def updated(**lrs):
        config = dataclasses.replace(SMALL, **lrs)
        agent = _algorithm(config).init(jax.random.key(0), config)
        return jax.jit(_algorithm(config).update)(agent, batch, jax.random.key(1), None)[0]

    base = updated()
    groups = {"critic_lr": ("critic_params", "target_critic_params", "actor_params"), "actor_lr": ("actor_params",)}
    names = ("critic_params", "target_critic_params", "prior_params", "actor_params")
    for lr, moved in groups.items():
        other = updated(**{lr: 0.1})
        for name in names:
            assert same_tree(getattr(base, name), getattr(other, name)) == (name not in moved), (lr, name)


# -- targets ------------------------------------------------------------------------------------


def _perturbed_state(config=SMALL):
    """An initial state whose targets differ from the online critics (so a test can tell them
    apart) and whose heads act differently on the batch."""
    state = _algorithm(config).init(jax.random.key(3), config)
    targets = jax.tree.map(lambda leaf: 1.5 * leaf + 0.1, state.target_critic_params)
    return state.replace(target_critic_params=targets)


def test_critic_k_bootstraps_with_head_k():
    config = dataclasses.replace(SMALL, gamma=0.9, prior_scale=5.0)
    networks = make_networks(config, ACTION_SIZE)
    state = _perturbed_state(config)
    batch = _batch()
    y = bootdqn_targets(networks, state, batch, config.gamma)
    chex.assert_shape(y, (3, 4))

    next_action = head_actions(networks.actor, state.actor_params, batch.next_obs)  # [K, B, 1]
    assert float(jp.min(jp.abs(next_action[0] - next_action[1]))) > 1e-3  # heads disagree

    def manual(k, head, params):
        """r + gamma (fbar_k + 5 p_k)(s', pi_head(s')) computed member by member."""
        def member(tree):
            return jax.tree.map(lambda leaf: leaf[k : k + 1], tree)

        action = next_action[head]
        f = networks.critic.apply(member(params), batch.next_obs, action)[0]
        p = networks.critic.apply(member(state.prior_params), batch.next_obs, action)[0]
        return batch.reward + 0.9 * (f + 5.0 * p)

    for k in range(3):
        np.testing.assert_allclose(y[k], manual(k, k, state.target_critic_params), rtol=1e-5, atol=1e-6)
        other = (k + 1) % 3
        assert float(jp.max(jp.abs(y[k] - manual(k, other, state.target_critic_params)))) > 1e-4
        assert float(jp.max(jp.abs(y[k] - manual(k, k, state.critic_params)))) > 1e-4  # targets, not online
    # The update uses these targets: it takes no target head (its acting rule hands it none).
    algorithm = _algorithm(config)
    assert algorithm.acting.update_context is None
    _, metrics = jax.jit(algorithm.update)(state, batch, jax.random.key(1), None)
    assert float(metrics["target_mean"]) == pytest.approx(float(jp.mean(y)), rel=1e-6)


def test_targets_bootstrap_through_truncation_not_termination():
    networks = make_networks(SMALL, ACTION_SIZE)
    state = _perturbed_state()
    # reward = 1 + linspace(-1, 1, 4) = [0, 2/3, 4/3, 2]
    terminated = _batch(terminated=1.0, truncated=0.0)
    y = bootdqn_targets(networks, state, terminated, SMALL.gamma)
    np.testing.assert_array_equal(y, jp.broadcast_to(terminated.reward, (3, 4)))  # y = r exactly
    truncated = _batch(terminated=0.0, truncated=1.0)
    y = bootdqn_targets(networks, state, truncated, SMALL.gamma)
    assert float(jp.min(jp.abs(y - truncated.reward))) > 1e-4  # bootstrapped
    _, metrics = jax.jit(_algorithm().update)(state, terminated, jax.random.key(1), None)
    assert float(metrics["target_mean"]) == pytest.approx(1.0, abs=1e-6)  # mean of [0, 2/3, 4/3, 2]


# -- acting -------------------------------------------------------------------------------------


def test_act_follows_the_active_head_and_eval_averages_heads():
    algorithm = _algorithm()
    state = algorithm.init(jax.random.key(0), SMALL)
    obs = _batch().obs
    heads = head_actions(make_networks(SMALL, ACTION_SIZE).actor, state.actor_params, obs)  # [3, 4, 1]
    active = jp.asarray([2, 0, 1, 2])
    acting = algorithm.acting.init(jax.random.key(0), SMALL, 4).replace(active_head=active)
    action = algorithm.act(state, acting, obs, jax.random.key(5))
    chex.assert_shape(action, (4, 1))
    np.testing.assert_array_equal(action, heads[active, jp.arange(4)])
    # Greedy: no noise, the key does not matter.
    np.testing.assert_array_equal(action, algorithm.act(state, acting, obs, jax.random.key(6)))
    np.testing.assert_allclose(algorithm.eval_act(state, obs), jp.mean(heads, axis=0), rtol=1e-6)


# -- training on chain through the shared loop --------------------------------------------------


@pytest.fixture(scope="module")
def chain_run():
    """Two seeds of a short chain run: (initial agent on the host, final state, last metrics)."""
    env = envs.make("chain")
    train = TrainConfig(
        env="chain", total_steps=200, num_envs=2, batch_size=16, updates_per_step=1, buffer_size=400,
        warmup_steps=100, chunk_steps=100, eval_interval=100, eval_episodes=2, checkpoint_interval=100,
    )
    config = dataclasses.replace(SMALL, bootstrap_rate=0.1, posterior_sampling_rate=2)
    algorithm = bootdqn_p.make(config, env.observation_size, env.action_size)
    trainer = make_trainer(train, env, algorithm)
    state = trainer.init(*member_inputs([(0, config), (1, config)]))
    initial = jax.device_get(state.agent)  # the chunks donate the state's buffers
    state, _ = trainer.warmup_chunk(state)
    state, metrics = trainer.train_chunk(state)
    returns = trainer.evaluate(state)["returns"]
    return initial, jax.device_get(state), jax.device_get(metrics), jax.device_get(returns)


@pytest.mark.slow
def test_chain_training_keeps_priors_and_moves_f(chain_run):
    initial, state, _, _ = chain_run
    assert same_tree(state.agent.prior_params, initial.prior_params)
    assert not same_tree(state.agent.critic_params, initial.critic_params)
    assert not same_tree(state.agent.target_critic_params, initial.target_critic_params)
    assert int(state.updates[0]) == 50  # 50 vector steps x 1 update in the training chunk


@pytest.mark.slow
def test_chain_training_metrics_finite_and_seeds_differ(chain_run):
    initial, state, metrics, returns = chain_run
    for name in ("critic_loss", "critic_q_mean", "critic_q_spread", "actor_loss", "alpha", "entropy", "target_mean"):
        chex.assert_shape(metrics[name], (2,))
        assert np.all(np.isfinite(metrics[name])), name
    np.testing.assert_array_equal(metrics["alpha"], 0.0)
    assert np.all(np.isfinite(returns))
    assert metrics["critic_loss"][0] != metrics["critic_loss"][1]
    for tree in (initial.prior_params, state.agent.critic_params, state.agent.actor_params):
        first, second = (jax.tree.map(lambda leaf, m=m: leaf[m], tree) for m in (0, 1))
        assert not same_tree(first, second)
