"""BEN baseline (`mjx_pbac.algos.ben`; paper appendix "Baselines", BEN): the Gaussian KL equals the
closed form and numerical integration, the authors' code's KL by hand, the shared moment-matched
and the per-member Gaussian Bellman targets and the masked loss by hand, the deterministic critic
learns from the ensemble's mean alone and alone trains the actor, and the exploration noise is
N(0, 0.1^2).

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
    critic_variance,
    deterministic_critic_loss,
    gaussian_kl,
    per_member_targets,
    reference_kl,
    shared_target,
)
from tests.probe_envs import CountingEnv, same_tree, value_batch

SMALL = ben.Config(num_critics=4, hidden_sizes=(8,))




# -- the KL ---------------------------------------------------------------------------------


def test_kl_by_hand():
    # KL(N(1, 4) || N(0, 1)) = 1/2 [0 - log 4 + (4 + 1) / 1 - 1] = 1/2 (4 - 1.3862944) = 1.3068528
    assert float(gaussian_kl(1.0, 4.0, 0.0, 1.0)) == pytest.approx(1.3068528, abs=1e-6)
    # KL(N(0, 1) || N(2, e^2)) = 1/2 [2 - 0 + (1 + 4) e^-2 - 1] = 1/2 (1 + 0.6766764) = 0.8383382
    assert float(gaussian_kl(0.0, 1.0, 2.0, math.exp(2.0))) == pytest.approx(0.8383382, abs=1e-6)
    # identical Gaussians: 0
    assert float(gaussian_kl(3.0, 0.5, 3.0, 0.5)) == pytest.approx(0.0, abs=1e-6)


def test_reference_kl_by_hand():
    # The authors' code: var1 = clip(exp(target_var), 1e-4, 10), log v - log var1 + (var1 + d^2) / (2 v) - 1/2.
    # target N(1, 0.5), model N(0, 2): var1 = e^0.5 = 1.6487213;
    #   log 2 - 0.5 + (1.6487213 + 1) / 4 - 0.5 = 0.6931472 - 1 + 0.6621803 = 0.3553275
    assert float(reference_kl(1.0, 0.5, 0.0, 2.0)) == pytest.approx(0.3553275, abs=1e-6)
    # a target variance of 3 reads as e^3 = 20.1 -> clipped to 10:
    #   log 1 - log 10 + (10 + 0) / 2 - 0.5 = -2.3025851 + 4.5 = 2.1974149
    assert float(reference_kl(0.0, 3.0, 0.0, 1.0)) == pytest.approx(2.1974149, abs=1e-6)
    # ... where the exact KL of N(0, 3) to N(0, 1) is 1/2 (0 - log 3 + 3 - 1) = 0.4506939
    assert float(gaussian_kl(0.0, 3.0, 0.0, 1.0)) == pytest.approx(0.4506939, abs=1e-6)


def test_critic_variance_is_the_clipped_exponential():
    np.testing.assert_allclose(critic_variance(jp.array([-20.0, 0.0, 1.0, 5.0])), [1e-4, 1.0, math.e, 10.0], rtol=1e-6)


def test_critic_variance_has_finite_zero_gradient_where_exp_overflows():
    """A log-variance past ~88.7 overflows exp to inf; clip(exp(l)) then has gradient 0 * inf =
    NaN (a BEN run diverged so), the capped form the clipped value's gradient 0, and the same
    values and gradients elsewhere."""
    log_var = jp.array([-200.0, -20.0, 0.0, 1.0, 2.0, 3.0, 89.0, 200.0])
    naive = lambda l: jp.clip(jp.exp(l), 1e-4, 10.0)  # noqa: E731
    grad = jax.vmap(jax.grad(critic_variance))(log_var)
    naive_grad = jax.vmap(jax.grad(naive))(log_var)
    assert np.isnan(naive_grad[-2:]).all()  # the failure the cap removes
    np.testing.assert_allclose(grad, [0.0, 0.0, 1.0, math.e, math.e**2, 0.0, 0.0, 0.0], rtol=1e-6, atol=0)
    np.testing.assert_array_equal(critic_variance(log_var), naive(log_var))
    np.testing.assert_array_equal(grad[:-2], naive_grad[:-2])


@pytest.mark.parametrize("mu_t, var_t, m, log_var", [(0.3, 0.7, -0.4, 0.2), (2.0, 0.05, 1.5, -1.0), (-1.0, 3.0, 0.0, 1.5)])
def test_kl_equals_numerical_integration(mu_t, var_t, m, log_var):
    """int p(x) log(p(x) / q(x)) dx with p the target N(mu_t, var_t), q the model N(m, e^log_var)."""
    p = stats.norm(mu_t, math.sqrt(var_t))
    q = stats.norm(m, math.exp(0.5 * log_var))
    numeric, _ = integrate.quad(lambda x: p.pdf(x) * (p.logpdf(x) - q.logpdf(x)), -np.inf, np.inf)
    assert float(gaussian_kl(mu_t, var_t, m, math.exp(log_var))) == pytest.approx(numeric, rel=1e-5)


def test_kl_gradient_and_moment_matching_minimum():
    # d/dm = (m - mu_t) / v; d/dv = 1/2 [1/v - (v_t + (mu_t - m)^2) / v^2]
    # at mu_t = 1, v_t = 2, m = 0, v = 1: d/dm = -1; d/dv = 1/2 (1 - 3) = -1
    dm, dv = jax.grad(lambda m, v: gaussian_kl(1.0, 2.0, m, v), argnums=(0, 1))(0.0, 1.0)
    assert (float(dm), float(dv)) == pytest.approx((-1.0, -1.0), abs=1e-6)
    # Gradient descent on (m, l) reaches the target's moments: m = 1, l = log 2.
    m, l = 0.0, 0.0
    step = jax.jit(jax.grad(lambda m, l: gaussian_kl(1.0, 2.0, m, critic_variance(l)), argnums=(0, 1)))
    for _ in range(2000):
        dm, dl = step(m, l)
        m, l = m - 0.1 * dm, l - 0.1 * dl
    assert (float(m), float(l)) == pytest.approx((1.0, math.log(2.0)), abs=1e-4)


# -- targets and the masked loss ------------------------------------------------------------


def test_shared_target_by_hand():
    # gamma 0.5, M = 2 target critics, B = 2 samples.
    #   next means [[2, 0], [4, 0]], next variances [[1, 0.5], [3, 0.5]]
    #   sample 0 (truncated): mu' = 3, var' = Var([2, 4]) + mean([1, 3]) = 1 + 2 = 3
    #       y_mean = 1 + 0.5 * 3 = 2.5, y_var = 0.25 * 3 = 0.75
    #   sample 1 (terminated): y_mean = r = 2, y_var = 0 -> clipped up to 1e-2
    mean, var = shared_target(
        jp.array([1.0, 2.0]), jp.array([0.0, 1.0]), jp.array([[2.0, 0.0], [4.0, 0.0]]), jp.array([[1.0, 0.5], [3.0, 0.5]]), gamma=0.5
    )
    np.testing.assert_allclose(mean, [2.5, 2.0], rtol=1e-6)
    np.testing.assert_allclose(var, [0.75, 1e-2], rtol=1e-6)
    # a large spread is clipped to 1e2: Var([0, 100]) = 2500, gamma 1 -> 100
    _, wide = shared_target(jp.zeros(1), jp.zeros(1), jp.array([[0.0], [100.0]]), jp.ones((2, 1)), gamma=1.0)
    np.testing.assert_allclose(wide, [100.0])


def test_per_member_target_by_hand():
    # gamma 0.5; row 0 truncated: mean 1 + 0.5 * 2 = 2, var 0.25 * 4 = 1;
    # row 1 terminated: mean r = 2, var 0 -> clipped up to 1e-2.
    mean, var = per_member_targets(
        jp.array([1.0, 2.0]), jp.array([0.0, 1.0]), jp.array([[2.0, 5.0]]), jp.array([[4.0, 7.0]]), gamma=0.5
    )
    np.testing.assert_allclose(mean, [[2.0, 2.0]], rtol=1e-6)
    np.testing.assert_allclose(var, [[1.0, 1e-2]], rtol=1e-6)


# M = 2 critics (rows), B = 2 samples (columns), variance 1 everywhere.
#   mean        = [[0, 1], [1, 1]]     target_mean = [[1, 1], [1, 1]]     target_var = [[1, 1], [1, 0.01]]
#   KL entries: (0,0): 1/2 [0 - 0 + (1 + 1) - 1] = 0.5;  (0,1) and (1,0): 1/2 (1 - 1) = 0
#   (1,1): 1/2 [0 - log 0.01 + 0.01 - 1] = 1/2 (4.6051702 - 0.99) = 1.8075851
#   mask [[1, 1], [1, 0]]: loss = (0.5 + 0 + 0 + 0) / 4 = 0.125;  no mask: (0.5 + 1.8075851) / 4 = 0.5768963
#   q_mean = 3/4; q_spread = mean over columns of std over rows = (0.5 + 0) / 2 = 0.25
MEAN = jp.array([[0.0, 1.0], [1.0, 1.0]])
VAR = jp.ones((2, 2))
TARGET_MEAN = jp.ones((2, 2))
TARGET_VAR = jp.array([[1.0, 1.0], [1.0, 0.01]])


def test_masked_kl_loss_by_hand():
    loss, aux = ben_critic_loss(MEAN, VAR, TARGET_MEAN, TARGET_VAR, jp.array([[1, 1], [1, 0]]))
    assert float(loss) == pytest.approx(0.125, abs=1e-6)
    assert (float(aux["q_mean"]), float(aux["q_spread"]), float(aux["var_mean"])) == pytest.approx((0.75, 0.25, 1.0))
    loss, _ = ben_critic_loss(MEAN, VAR, TARGET_MEAN, TARGET_VAR, jp.ones((2, 2)))
    assert float(loss) == pytest.approx(0.5768963, rel=1e-6)


def test_shared_target_is_broadcast_over_the_critics_and_the_reference_kl_selectable():
    # One target per sample, mean [1, 1] and variance [1, 0.01], for both critics: the entries
    # are (0,0) 0.5, (0,1) 1.8075851 (m = 1 against N(1, 0.01)), (1,0) 0, (1,1) 1.8075851.
    # mask [[1, 1], [1, 0]] -> (0.5 + 1.8075851) / 4 = 0.5768963
    loss, _ = ben_critic_loss(MEAN, VAR, jp.ones(2), jp.array([1.0, 0.01]), jp.array([[1, 1], [1, 0]]))
    assert float(loss) == pytest.approx(0.5768963, rel=1e-6)
    # "reference" at (0,0) alone: var1 = e^1; log 1 - 1 + (e + 1) / 2 - 1/2 = 0.3591409 -> / 4
    loss, _ = ben_critic_loss(MEAN, VAR, TARGET_MEAN, TARGET_VAR, jp.array([[1, 0], [0, 0]]), kl="reference")
    assert float(loss) == pytest.approx(0.3591409 / 4, rel=1e-6)


def test_masked_kl_gradients_and_no_gradient_to_targets():
    mask = jp.array([[1, 1], [1, 0]])

    def loss(*args):
        return ben_critic_loss(*args, mask)[0]

    d_mean, d_var, d_target_mean, d_target_var = jax.grad(loss, argnums=(0, 1, 2, 3))(MEAN, VAR, TARGET_MEAN, TARGET_VAR)
    # d/dm = mask (m - mu_t) / v / 4 -> only (0,0): -1/4
    np.testing.assert_allclose(d_mean, [[-0.25, 0.0], [0.0, 0.0]], atol=1e-7)
    # d/dv = mask 1/2 [1/v - (v_t + (mu_t - m)^2) / v^2] / 4: (0,0) 1/2 (1 - 2) / 4 = -1/8; others 0
    np.testing.assert_allclose(d_var, [[-0.125, 0.0], [0.0, 0.0]], atol=1e-7)
    np.testing.assert_array_equal(d_target_mean, 0.0)
    np.testing.assert_array_equal(d_target_var, 0.0)


def test_critic_loss_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"\[M, B\]"):
        ben_critic_loss(MEAN, VAR, TARGET_MEAN, TARGET_VAR, jp.ones((2, 3)))
    with pytest.raises(ValueError, match=r"\[B\] or \[M, B\]"):
        ben_critic_loss(MEAN, VAR, jp.ones(3), jp.ones(3), jp.ones((2, 2)))


def test_deterministic_critic_loss_by_hand():
    # q - mean = [-1, 3], delta 1: huber [0.5, 2.5] -> mean 1.5; d/dq = [-1, 1] / 2; none to the mean
    q, ensemble_mean = jp.array([0.0, 3.0]), jp.array([1.0, 0.0])
    assert float(deterministic_critic_loss(q, ensemble_mean, huber_delta=1.0)) == pytest.approx(1.5)
    # "mse": (1 + 9) / 2 = 5
    assert float(deterministic_critic_loss(q, ensemble_mean, loss="mse")) == pytest.approx(5.0)
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


def test_update_fits_every_critic_to_the_ensembles_shared_target():
    """Without target noise the target is r + gamma (1 - terminated) times the target critics' mean
    at (s', pi(s')) (target copies equal the critics at init); per-member targets have the same
    mean but another KL, and the target noise enters the actor's objective."""
    env = CountingEnv()
    algorithm = ben.make(SMALL, env.observation_size, env.action_size)
    update = jax.jit(algorithm.update)
    batch = value_batch([1.0, 2.0, 3.0, 4.0])
    quiet = dataclasses.replace(SMALL, target_noise=0.0)
    agent = algorithm.init(jax.random.key(0), quiet)
    next_means = algorithm.critic_values(agent, batch.next_obs, algorithm.eval_act(agent, batch.next_obs))  # [M, B]
    expected = batch.reward + SMALL.gamma * (1.0 - batch.terminated) * jp.mean(next_means, axis=0)
    _, metrics = update(agent, batch, jax.random.key(1), None)
    assert float(metrics["target_mean"]) == pytest.approx(float(jp.mean(expected)), rel=1e-5)

    per_member = ben.make(dataclasses.replace(quiet, target="per_member"), env.observation_size, env.action_size)
    _, other = jax.jit(per_member.update)(agent, batch, jax.random.key(1), None)
    assert float(other["target_mean"]) == pytest.approx(float(metrics["target_mean"]), rel=1e-5)
    assert float(other["critic_kl"]) != pytest.approx(float(metrics["critic_kl"]), rel=1e-3)

    # the actor's objective is scored at its noisy action (Adam's first step is sign-like, so
    # compare the objectives)
    _, noisy = update(algorithm.init(jax.random.key(0), SMALL), batch, jax.random.key(1), None)
    assert float(noisy["actor_loss"]) != pytest.approx(float(metrics["actor_loss"]), rel=1e-4)


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
