"""BEN baseline (`mjx_pbac.algos.ben`; paper appendix "Baselines", BEN): the Gaussian KL equals the
closed form and numerical integration, the Gaussian Bellman target and the masked loss by hand, the
deterministic critic learns from the ensemble's mean alone and alone trains the actor, and the
exploration noise is N(0, 0.1^2).

Expected numbers are worked out by hand in the comments; nothing re-implements the losses.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jp
import numpy as np
import pytest
from scipy import integrate, stats

from mjx_pbac.algos import ben
from mjx_pbac.algos.ben import (
    ben_critic_loss,
    ben_targets,
    bounded_log_variance,
    deterministic_critic_loss,
    gaussian_kl,
)
from tests.probe_envs import CountingEnv, same_tree, value_batch

SMALL = ben.Config(num_critics=4, hidden_sizes=(8,))




# -- the KL ---------------------------------------------------------------------------------


def test_kl_by_hand():
    # KL(N(1, 4) || N(0, 1)) = 1/2 [0 - log 4 + (4 + 1) / 1 - 1] = 1/2 (4 - 1.3862944) = 1.3068528
    assert float(gaussian_kl(1.0, 4.0, 0.0, 0.0)) == pytest.approx(1.3068528, abs=1e-6)
    # KL(N(0, 1) || N(2, e^2)) = 1/2 [2 - 0 + (1 + 4) e^-2 - 1] = 1/2 (1 + 0.6766764) = 0.8383382
    assert float(gaussian_kl(0.0, 1.0, 2.0, 2.0)) == pytest.approx(0.8383382, abs=1e-6)
    # identical Gaussians: 0
    assert float(gaussian_kl(3.0, 0.5, 3.0, math.log(0.5))) == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("mu_t, var_t, m, log_var", [(0.3, 0.7, -0.4, 0.2), (2.0, 0.05, 1.5, -1.0), (-1.0, 3.0, 0.0, 1.5)])
def test_kl_equals_numerical_integration(mu_t, var_t, m, log_var):
    """int p(x) log(p(x) / q(x)) dx with p the target N(mu_t, var_t), q the model N(m, e^log_var)."""
    p = stats.norm(mu_t, math.sqrt(var_t))
    q = stats.norm(m, math.exp(0.5 * log_var))
    numeric, _ = integrate.quad(lambda x: p.pdf(x) * (p.logpdf(x) - q.logpdf(x)), -np.inf, np.inf)
    assert float(gaussian_kl(mu_t, var_t, m, log_var)) == pytest.approx(numeric, rel=1e-5)


def test_kl_gradient_and_moment_matching_minimum():
    # d/dm = (m - mu_t) e^-l; d/dl = 1/2 [1 - (v_t + (mu_t - m)^2) e^-l]
    # at mu_t = 1, v_t = 2, m = 0, l = 0: d/dm = -1; d/dl = 1/2 (1 - 3) = -1
    dm, dl = jax.grad(lambda m, l: gaussian_kl(1.0, 2.0, m, l), argnums=(0, 1))(0.0, 0.0)
    assert (float(dm), float(dl)) == pytest.approx((-1.0, -1.0), abs=1e-6)
    # Gradient descent on (m, l) reaches the target's moments: m = 1, l = log 2.
    m, l = 0.0, 0.0
    step = jax.jit(jax.grad(lambda m, l: gaussian_kl(1.0, 2.0, m, l), argnums=(0, 1)))
    for _ in range(2000):
        dm, dl = step(m, l)
        m, l = m - 0.1 * dm, l - 0.1 * dl
    assert (float(m), float(l)) == pytest.approx((1.0, math.log(2.0)), abs=1e-4)


def test_bounded_log_variance_is_smooth_identity_inside_the_bounds():
    raw = jp.array([-100.0, -3.0, 0.0, 3.0, 100.0])
    bounded = bounded_log_variance(raw)
    np.testing.assert_allclose(bounded[1:4], raw[1:4], atol=1e-2)
    assert -10.0 <= float(bounded[0]) < -9.9 and 9.9 < float(bounded[4]) <= 10.0
    assert float(jax.grad(bounded_log_variance)(0.0)) == pytest.approx(1.0, abs=1e-2)


# -- targets and the masked loss ------------------------------------------------------------


def test_gaussian_bellman_target_by_hand():
    # gamma 0.5; row 0 truncated: mean 1 + 0.5 * 2 = 2, var 0.25 * 4 = 1;
    # row 1 terminated: mean r = 2, var 0.
    mean, var = ben_targets(
        jp.array([1.0, 2.0]), jp.array([0.0, 1.0]), jp.array([[2.0, 5.0]]), jp.log(jp.array([[4.0, 7.0]])), gamma=0.5
    )
    np.testing.assert_allclose(mean, [[2.0, 2.0]], rtol=1e-6)
    np.testing.assert_allclose(var, [[1.0, 0.0]], rtol=1e-6)


# M = 2 critics (rows), B = 2 samples (columns), log_var = 0 everywhere.
#   mean        = [[0, 1], [1, 1]]     target_mean = [[1, 1], [1, 1]]     target_var = [[1, 1], [1, 0]]
#   KL entries: (0,0): 1/2 [0 - 0 + (1 + 1) - 1] = 0.5;  (0,1) and (1,0): 1/2 (1 - 1) = 0
#   (1,1): target_var 0 -> floored at 1e-6 inside the log: 1/2 [13.8155106 + 1e-6 - 1] = 6.4077558
#   mask [[1, 1], [1, 0]]: loss = (0.5 + 0 + 0 + 0) / 4 = 0.125;  no mask: (0.5 + 6.4077558) / 4 = 1.7269390
#   q_mean = 3/4; q_spread = mean over columns of std over rows = (0.5 + 0) / 2 = 0.25
MEAN = jp.array([[0.0, 1.0], [1.0, 1.0]])
LOG_VAR = jp.zeros((2, 2))
TARGET_MEAN = jp.ones((2, 2))
TARGET_VAR = jp.array([[1.0, 1.0], [1.0, 0.0]])


def test_masked_kl_loss_by_hand():
    loss, aux = ben_critic_loss(MEAN, LOG_VAR, TARGET_MEAN, TARGET_VAR, jp.array([[1, 1], [1, 0]]))
    assert float(loss) == pytest.approx(0.125, abs=1e-6)
    assert (float(aux["q_mean"]), float(aux["q_spread"]), float(aux["log_var_mean"])) == pytest.approx((0.75, 0.25, 0.0))
    loss, _ = ben_critic_loss(MEAN, LOG_VAR, TARGET_MEAN, TARGET_VAR, jp.ones((2, 2)))
    assert float(loss) == pytest.approx(1.7269390, rel=1e-6)


def test_masked_kl_gradients_and_no_gradient_to_targets():
    mask = jp.array([[1, 1], [1, 0]])

    def loss(*args):
        return ben_critic_loss(*args, mask)[0]

    d_mean, d_log_var, d_target_mean, d_target_var = jax.grad(loss, argnums=(0, 1, 2, 3))(
        MEAN, LOG_VAR, TARGET_MEAN, TARGET_VAR
    )
    # d/dm = mask (m - mu_t) e^-l / 4 -> only (0,0): -1/4
    np.testing.assert_allclose(d_mean, [[-0.25, 0.0], [0.0, 0.0]], atol=1e-7)
    # d/dl = mask 1/2 [1 - (v_t + (mu_t - m)^2) e^-l] / 4: (0,0) 1/2 (1 - 2) / 4 = -1/8; others 0
    np.testing.assert_allclose(d_log_var, [[-0.125, 0.0], [0.0, 0.0]], atol=1e-7)
    np.testing.assert_array_equal(d_target_mean, 0.0)
    np.testing.assert_array_equal(d_target_var, 0.0)


def test_critic_loss_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"\[M, B\]"):
        ben_critic_loss(MEAN, LOG_VAR, TARGET_MEAN, TARGET_VAR, jp.ones((2, 3)))


def test_deterministic_critic_loss_by_hand():
    # q - mean = [-1, 3], delta 1: huber [0.5, 2.5] -> mean 1.5; d/dq = [-1, 1] / 2; none to the mean
    q, ensemble_mean = jp.array([0.0, 3.0]), jp.array([1.0, 0.0])
    assert float(deterministic_critic_loss(q, ensemble_mean, huber_delta=1.0)) == pytest.approx(1.5)
    grad_q, grad_mean = jax.grad(lambda a, b: deterministic_critic_loss(a, b, huber_delta=1.0), argnums=(0, 1))(
        q, ensemble_mean
    )
    np.testing.assert_allclose(grad_q, [-0.5, 0.5])
    np.testing.assert_array_equal(grad_mean, 0.0)


# -- the update -----------------------------------------------------------------------------


@pytest.mark.slow
def test_state_holds_k_minus_one_heteroscedastic_critics_and_one_deterministic():
    env = CountingEnv()
    agent = ben.make(SMALL, env.observation_size, env.action_size).init(jax.random.key(0), SMALL)
    ensemble_out = jax.tree.leaves(agent.critic_params["ensemble"])
    assert {leaf.shape[0] for leaf in ensemble_out} == {3}
    assert {leaf.shape[0] for leaf in jax.tree.leaves(agent.critic_params["deterministic"])} == {1}
    assert same_tree(agent.target_ensemble_params, agent.critic_params["ensemble"])
    # The last Dense of each heteroscedastic critic has two outputs (mean, log-variance).
    assert ensemble_out[-1].shape[-1] == 2 and ensemble_out[-2].shape[-1] == 2  # kernel, bias


def test_reward_reaches_the_actor_only_through_the_ensemble():
    """The deterministic critic regresses on the ensemble's mean at (s, a) before this step's
    update, and the actor follows the deterministic critic: changing the rewards changes the
    ensemble's update and its targets' Polyak step, but neither the deterministic critic nor the
    actor in the same step."""
    env = CountingEnv()
    algorithm = ben.make(SMALL, env.observation_size, env.action_size)
    update = jax.jit(algorithm.update)
    agent = algorithm.init(jax.random.key(0), SMALL)
    batch = value_batch([1.0, 2.0, 3.0, 4.0])
    a, metrics_a = update(agent, batch, jax.random.key(1), None)
    b, metrics_b = update(agent, batch.replace(reward=batch.reward + 10.0), jax.random.key(1), None)
    assert float(metrics_b["target_mean"]) == pytest.approx(float(metrics_a["target_mean"]) + 10.0, abs=1e-4)
    assert not same_tree(a.critic_params["ensemble"], b.critic_params["ensemble"])
    assert not same_tree(a.target_ensemble_params, b.target_ensemble_params)
    assert same_tree(a.critic_params["deterministic"], b.critic_params["deterministic"])
    assert same_tree(a.actor_params, b.actor_params)
    # ... and one step later it does: the ensemble's new mean is the deterministic critic's target.
    a2, _ = update(a, batch, jax.random.key(2), None)
    b2, _ = update(b, batch, jax.random.key(2), None)
    assert not same_tree(a2.critic_params["deterministic"], b2.critic_params["deterministic"])


def test_learning_rates_move_their_own_parameters_and_polyak_moves_targets_by_tau():
    env = CountingEnv()
    algorithm = ben.make(SMALL, env.observation_size, env.action_size)
    update = jax.jit(algorithm.update)
    batch = value_batch([1.0, 2.0, 3.0])

    def updated(**changes):
        agent = algorithm.init(jax.random.key(0), dataclasses.replace(SMALL, **changes))
        return agent, update(agent, batch, jax.random.key(1), None)[0]

    before, base = updated()
    _, faster_actor = updated(actor_lr=0.1)
    assert same_tree(base.critic_params, faster_actor.critic_params)
    assert not same_tree(base.actor_params, faster_actor.actor_params)
    _, faster_critic = updated(critic_lr=0.1)
    assert not same_tree(base.critic_params["ensemble"], faster_critic.critic_params["ensemble"])
    assert not same_tree(base.critic_params["deterministic"], faster_critic.critic_params["deterministic"])
    # target <- target + tau (online - target), from target == online before the step
    for t0, t1, online in zip(
        jax.tree.leaves(before.target_ensemble_params),
        jax.tree.leaves(base.target_ensemble_params),
        jax.tree.leaves(base.critic_params["ensemble"]),
    ):
        np.testing.assert_allclose(t1, t0 + SMALL.tau * (online - t0), rtol=1e-5, atol=1e-7)


def test_exploration_noise_is_gaussian_with_the_configured_scale_and_eval_is_the_mean():
    env = CountingEnv()
    algorithm = ben.make(SMALL, env.observation_size, env.action_size)
    agent = algorithm.init(jax.random.key(0), SMALL)
    obs = jp.tile(jp.array([[0.3, -0.2]]), (4000, 1))
    greedy = algorithm.eval_act(agent, obs)
    np.testing.assert_array_equal(greedy, greedy[:1].repeat(4000, 0))
    assert abs(float(greedy[0, 0])) < 0.6  # far enough from the bounds that the clip is rare
    noisy = algorithm.act(agent, None, obs, jax.random.key(1))
    assert np.all(np.abs(noisy) <= 1.0)
    noise = np.asarray(noisy - greedy)[:, 0]
    assert abs(noise.mean()) < 0.01 and noise.std() == pytest.approx(0.1, rel=0.05)
    quiet = algorithm.init(jax.random.key(0), dataclasses.replace(SMALL, action_noise=0.0))
    np.testing.assert_array_equal(algorithm.act(quiet, None, obs, jax.random.key(1)), greedy)
