"""PBAC's networks (paper Tables 7 and 8): MLP structure and init, CReLU, critic ensemble, actor
heads and the squashed Gaussian's density (cross-checked against scipy in float64)."""

from __future__ import annotations

import math

import chex
import jax
import jax.numpy as jp
import numpy as np
import pytest
from scipy import stats

from mjx_pbac.networks import (
    LOG_STD_MAX,
    LOG_STD_MIN,
    MLP,
    crelu,
    make_actor,
    make_critic_ensemble,
    squashed_gaussian_log_prob,
    squashed_gaussian_sample,
)

KEY = jax.random.PRNGKey(0)
SMALL = (8, 8)


def dense_layers(params):
    """[(kernel, bias)] of an MLP's Dense layers, in order."""
    p = params["params"]
    return [(p[f"TorchDense_{i}"]["Dense_0"]["kernel"], p[f"TorchDense_{i}"]["Dense_0"]["bias"]) for i in range(len(p))]


# -- MLP ---------------------------------------------------------------------------------------


def test_mlp_parameter_shapes_and_no_layernorm_params():
    params = MLP((256, 256), 1).init(KEY, jp.zeros((1, 35)))
    # Three Dense layers and nothing else: LayerNorm has neither scale nor bias.
    assert set(params["params"]) == {"TorchDense_0", "TorchDense_1", "TorchDense_2"}
    assert len(jax.tree.leaves(params)) == 6
    assert not any("LayerNorm" in jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_leaves_with_path(params))
    (k0, b0), (k1, b1), (k2, b2) = dense_layers(params)
    # 35 -> 256; CReLU doubles to 512 -> 256; CReLU doubles to 512 -> 1.
    chex.assert_shape([k0, b0, k1, b1, k2, b2], [(35, 256), (256,), (512, 256), (256,), (512, 1), (1,)])
    chex.assert_type(jax.tree.leaves(params), jp.float32)


def test_mlp_init_like_pytorch_linear():
    params = MLP((256, 256), 1).init(KEY, jp.zeros((1, 35)))
    for (kernel, bias), fan_in in zip(dense_layers(params), (35, 512, 512)):
        bound = 1.0 / math.sqrt(fan_in)
        assert float(jp.max(jp.abs(kernel))) <= bound
        assert float(jp.max(jp.abs(bias))) <= bound
    # U(-b, b) has variance b^2 / 3 = 1 / (3 fan_in). The 512 x 256 kernel: 131072 draws, the
    # variance estimate's relative standard error is sqrt(0.8 / 131072) ~ 0.25%; allow 2%.
    kernel = np.asarray(dense_layers(params)[1][0], np.float64)
    np.testing.assert_allclose(kernel.var(), 1.0 / (3 * 512), rtol=0.02)
    assert abs(kernel.mean()) < 3 * math.sqrt(1.0 / (3 * 512) / kernel.size)
    # Not degenerate: the draws fill the interval.
    assert kernel.max() > 0.99 / math.sqrt(512) and kernel.min() < -0.99 / math.sqrt(512)


def test_mlp_forward_matches_manual_composition():
    # Dense -> LayerNorm (no scale/bias, eps 1e-5, biased variance) -> CReLU, twice, then Dense;
    # written out in float64 numpy from the same parameters.
    mlp = MLP((4, 3), 2)
    x = jax.random.normal(jax.random.PRNGKey(1), (5, 6))
    params = mlp.init(KEY, x)
    h = np.asarray(x, np.float64)
    layers = [(np.asarray(k, np.float64), np.asarray(b, np.float64)) for k, b in dense_layers(params)]
    for kernel, bias in layers[:-1]:
        h = h @ kernel + bias
        h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5)
        h = np.maximum(np.concatenate([h, -h], -1), 0.0)
    h = h @ layers[-1][0] + layers[-1][1]
    out = mlp.apply(params, x)
    chex.assert_shape(out, (5, 2))
    np.testing.assert_allclose(out, h, rtol=1e-5, atol=1e-5)


# -- CReLU -------------------------------------------------------------------------------------


def test_crelu_hand_worked():
    # concat(x, -x) = [1, -2, 0, 3.5, -1, 2, -0, -3.5] -> relu -> [1, 0, 0, 3.5, 0, 2, 0, 0]
    x = jp.array([1.0, -2.0, 0.0, 3.5])
    np.testing.assert_array_equal(crelu(x), [1.0, 0.0, 0.0, 3.5, 0.0, 2.0, 0.0, 0.0])
    # Concatenates on the last axis only.
    xb = jp.stack([x, -x])
    out = crelu(xb)
    chex.assert_shape(out, (2, 8))
    np.testing.assert_array_equal(out[1], [0.0, 2.0, 0.0, 0.0, 1.0, 0.0, 0.0, 3.5])


# -- critic ensemble ---------------------------------------------------------------------------

K, B, OBS, ACT = 4, 5, 3, 2


def critic_inputs():
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(2), 3)
    obs = jax.random.normal(k1, (B, OBS))
    action = jax.random.uniform(k2, (B, ACT), minval=-1, maxval=1)
    actions = jax.random.uniform(k3, (K, B, ACT), minval=-1, maxval=1)
    return obs, action, actions


def member(params, k):
    return jax.tree.map(lambda p: p[k], params)


@pytest.mark.slow
def test_critic_ensemble_shapes_and_independent_members():
    ensemble = make_critic_ensemble(K, SMALL)
    obs, action, _ = critic_inputs()
    params = ensemble.init(KEY, obs, action)
    single = MLP(SMALL, 1).init(KEY, jp.concatenate([obs, action], -1))
    # Every leaf is a single critic's leaf with a leading axis K.
    chex.assert_trees_all_equal_shapes(jax.tree.map(lambda p: p[0], params), single)
    for leaf in jax.tree.leaves(params):
        assert leaf.shape[0] == K
    q = jax.jit(ensemble.apply)(params, obs, action)
    chex.assert_shape(q, (K, B))
    # Independent initialisation: every pair of members differs in parameters and outputs.
    for i in range(K):
        for j in range(i + 1, K):
            assert not np.allclose(q[i], q[j], atol=1e-3), (i, j)
            assert not np.allclose(params["params"]["TorchDense_0"]["Dense_0"]["kernel"][i],
                                   params["params"]["TorchDense_0"]["Dense_0"]["kernel"][j])
    # Different keys give different ensembles.
    other = ensemble.init(jax.random.PRNGKey(1), obs, action)
    assert not np.allclose(ensemble.apply(other, obs, action), q, atol=1e-3)


def test_critic_ensemble_apply_matches_single_members():
    ensemble = make_critic_ensemble(K, SMALL)
    mlp = MLP(SMALL, 1)
    obs, action, actions = critic_inputs()
    params = ensemble.init(KEY, obs, action)

    q = ensemble.apply(params, obs, action)
    q_per = jax.jit(ensemble.apply_per_member)(params, obs, actions)
    chex.assert_shape([q, q_per], [(K, B), (K, B)])
    for k in range(K):
        # Member k alone, through the plain MLP on concat(obs, action).
        alone = mlp.apply(member(params, k), jp.concatenate([obs, action], -1))[:, 0]
        np.testing.assert_allclose(q[k], alone, rtol=1e-5, atol=1e-6)
        alone_k = mlp.apply(member(params, k), jp.concatenate([obs, actions[k]], -1))[:, 0]
        np.testing.assert_allclose(q_per[k], alone_k, rtol=1e-5, atol=1e-6)
    # Per-member actions that are all the same action reproduce `apply`.
    same = ensemble.apply_per_member(params, obs, jp.broadcast_to(action, (K, B, ACT)))
    np.testing.assert_allclose(same, q, rtol=1e-5, atol=1e-6)


# -- actor -------------------------------------------------------------------------------------


def scale_last_kernel(params, factor):
    """Multiply the output layer's kernel so the heads' raw outputs become huge."""
    last = f"TorchDense_{len(params['params']) - 1}"
    return jax.tree_util.tree_map_with_path(
        lambda path, p: p * factor if last in jax.tree_util.keystr(path) and "kernel" in jax.tree_util.keystr(path) else p,
        params,
    )


def test_soft_actor_shapes_clamp_and_distinct_heads():
    heads, act = 3, 2
    actor = make_actor(heads, SMALL, act, deterministic=False)
    assert actor.num_heads == heads and not actor.deterministic
    obs = jax.random.normal(jax.random.PRNGKey(3), (B, OBS))
    params = actor.init(KEY, obs)
    mean, log_std = jax.jit(actor.apply)(params, obs)
    chex.assert_shape([mean, log_std], [(heads, B, act), (heads, B, act)])
    for i in range(heads):
        for j in range(i + 1, heads):
            assert not np.allclose(mean[i], mean[j], atol=1e-3), (i, j)
            assert not np.allclose(log_std[i], log_std[j], atol=1e-3), (i, j)

    # Huge inputs, and huge raw outputs (output kernel x 1000): log_std stays in [-20, 2] and
    # reaches both bounds; the mean is not clamped.
    big = scale_last_kernel(params, 1000.0)
    for p, x in ((params, obs * 1e6), (big, obs), (big, obs * 1e6)):
        mean, log_std = actor.apply(p, x)
        assert np.all(np.isfinite(mean)) and np.all(np.isfinite(log_std))
        assert float(jp.min(log_std)) >= LOG_STD_MIN and float(jp.max(log_std)) <= LOG_STD_MAX
    assert (LOG_STD_MIN, LOG_STD_MAX) == (-20.0, 2.0)
    mean, log_std = actor.apply(big, obs)
    assert float(jp.min(log_std)) == -20.0 and float(jp.max(log_std)) == 2.0
    assert float(jp.max(jp.abs(mean))) > 20.0


def test_deterministic_actor_one_tuple_distinct_heads():
    heads, act = 3, 2
    actor = make_actor(heads, SMALL, act, deterministic=True)
    assert actor.deterministic
    obs = jax.random.normal(jax.random.PRNGKey(3), (B, OBS))
    params = actor.init(KEY, obs)
    # The output layer has K * A columns (no log-std).
    chex.assert_shape(dense_layers(params)[-1][0], (2 * SMALL[-1], heads * act))
    out = actor.apply(params, obs)
    assert isinstance(out, tuple) and len(out) == 1
    chex.assert_shape(out[0], (heads, B, act))
    for i in range(heads):
        for j in range(i + 1, heads):
            assert not np.allclose(out[0][i], out[0][j], atol=1e-3), (i, j)


# -- squashed Gaussian -------------------------------------------------------------------------


def reference_log_prob(u, mean, log_std):
    """float64 log N(u; m, s) - log(1 - tanh(u)^2), the Jacobian in the stable form
    log(1 - tanh(u)^2) = log sech(u)^2 = 2 (log 2 - |u| - log1p(exp(-2|u|)))."""
    u, mean, log_std = (np.asarray(a, np.float64) for a in (u, mean, log_std))
    log_jac = 2.0 * (math.log(2.0) - np.abs(u) - np.log1p(np.exp(-2.0 * np.abs(u))))
    return stats.norm.logpdf(u, loc=mean, scale=np.exp(log_std)) - log_jac


def test_log_prob_fixed_points_against_float64():
    # A = 1, a few fixed pre-tanh values; for moderate u the naive float64 Jacobian agrees too.
    u = np.array([-2.0, -0.5, 0.0, 0.3, 1.7], np.float32)
    mean, log_std = np.float32(0.2), np.float32(-0.5)
    got = squashed_gaussian_log_prob(jp.asarray(u)[:, None], jp.full((5, 1), mean), jp.full((5, 1), log_std))
    chex.assert_shape(got, (5,))
    u64, m64, s64 = u.astype(np.float64), np.float64(mean), np.exp(np.float64(log_std))
    naive = stats.norm.logpdf(u64, m64, s64) - np.log(1 - np.tanh(u64) ** 2)
    np.testing.assert_allclose(reference_log_prob(u, mean, log_std), naive, rtol=1e-12)
    np.testing.assert_allclose(got, naive, rtol=1e-5, atol=1e-5)
    # Hand-worked at u = 0, m = 0, log_std = 0: log N(0; 0, 1) - log 1 = -log(2 pi)/2 = -0.9189385.
    np.testing.assert_allclose(squashed_gaussian_log_prob(jp.zeros((1,)), jp.zeros((1,)), jp.zeros((1,))),
                               -0.5 * math.log(2 * math.pi), rtol=1e-6)
    # The log-prob sums over the last (action) axis: A = 3 equals the sum of three A = 1 terms.
    u3 = jp.array([[-0.4, 0.9, 2.1]])
    m3 = jp.array([[0.1, -0.3, 1.0]])
    s3 = jp.array([[-1.0, 0.0, 0.5]])
    np.testing.assert_allclose(squashed_gaussian_log_prob(u3, m3, s3)[0],
                               reference_log_prob(u3, m3, s3).sum(), rtol=1e-5)


def test_sample_in_range_and_log_prob_consistent():
    heads, batch, act = 3, 64, 2
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(4), 3)
    mean = jax.random.uniform(k1, (heads, batch, act), minval=-0.5, maxval=0.5)
    log_std = jax.random.uniform(k2, (heads, batch, act), minval=-1.5, maxval=-0.5)
    action, log_prob = jax.jit(squashed_gaussian_sample)(k3, mean, log_std)
    chex.assert_shape([action, log_prob], [(heads, batch, act), (heads, batch)])
    assert np.all(np.abs(action) < 1.0)
    # Recover the pre-tanh sample (moderate values: |u| < 2.5 here, arctanh well conditioned).
    u = np.arctanh(np.asarray(action, np.float64))
    assert np.max(np.abs(u)) < 3.0
    np.testing.assert_allclose(log_prob, squashed_gaussian_log_prob(jp.asarray(u, jp.float32), mean, log_std),
                               rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(log_prob, reference_log_prob(u, mean, log_std).sum(-1), rtol=1e-3, atol=1e-3)
    # Different keys, different samples; the samples actually vary within a batch.
    action2, _ = squashed_gaussian_sample(k1, mean, log_std)
    assert not np.allclose(action, action2)


@pytest.mark.parametrize("centre", [30.0, -30.0])
def test_log_prob_finite_for_saturated_tanh(centre):
    # At |u| ~ 30, 1 - tanh(u)^2 ~ 4e-26 rounds to 0 (even in float64), so the naive
    # log(1 - tanh(u)^2) would be -inf and the log-prob +inf.
    with np.errstate(divide="ignore"):
        assert np.isinf(np.log(1 - np.tanh(np.float64(centre)) ** 2))
    mean = jp.full((2, 16, 1), centre, jp.float32)
    log_std = jp.zeros((2, 16, 1), jp.float32)
    action, log_prob = squashed_gaussian_sample(jax.random.PRNGKey(5), mean, log_std)
    assert np.all(np.isfinite(log_prob))
    assert np.all(np.abs(action) <= 1.0)  # float32 tanh saturates to exactly +-1 here
    # Fixed u: matches the stable float64 formula; e.g. u = m = 30, log_std = 0:
    #   -log(2 pi)/2 - 2 (log 2 - 30 - log1p(e^-60)) = -0.918939 + 58.613706 = 57.694767.
    u = jp.array([[centre], [centre + 1.5], [centre - 2.0]], jp.float32)
    got = squashed_gaussian_log_prob(u, jp.full((3, 1), centre), jp.zeros((3, 1)))
    np.testing.assert_allclose(got, reference_log_prob(u, centre, 0.0)[:, 0], rtol=1e-5)
    np.testing.assert_allclose(got[0], -0.5 * math.log(2 * math.pi) - 2 * (math.log(2) - 30.0), rtol=1e-5)
    # Gradients stay finite too (they feed the actor loss).
    grad = jax.grad(lambda m: squashed_gaussian_sample(jax.random.PRNGKey(5), m, log_std)[1].sum())(mean)
    assert np.all(np.isfinite(grad))
