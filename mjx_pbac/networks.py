"""PBAC's networks (paper Table 8; docs/design.md "Networks"): the CReLU + LayerNorm MLP, a critic ensemble with
K on a leading parameter axis, and a shared-trunk actor with K heads (squashed Gaussian or tanh).

    MLP(x) = Dense(out) . [CReLU . LayerNorm . Dense(h)] for h in hidden_sizes
    CReLU(x) = relu(concat(x, -x))          (doubles the width)

Kernels and biases are initialised like PyTorch's default `nn.Linear`, U(+-1/sqrt(fan_in)), so
that results compare with the authors' code.

`layer_norm` chooses the normalisation of every hidden layer: "plain" is the paper's (no scale, no
bias); "affine" learns a scale and a bias per unit (Flax's and PyTorch's LayerNorm defaults, the
layer-norm critics of FastSAC and MuJoCo Playground's SAC); "none" drops it (a plain CReLU MLP).
Only "plain" is the paper's network (docs/design.md "Recipe options beyond the paper").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jp

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0

LayerNormChoice = Literal["plain", "affine", "none"]
"""The hidden layers' normalisation: the paper's LayerNorm without scale and bias, one with a
learned scale and bias, or none (see the module docstring)."""


def crelu(x: jax.Array) -> jax.Array:
    return nn.relu(jp.concatenate([x, -x], axis=-1))


def _torch_uniform(fan_in: int) -> Callable:
    bound = 1.0 / math.sqrt(fan_in)

    def init(key, shape, dtype=jp.float32):
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


class TorchDense(nn.Module):
    """Dense layer with PyTorch's default initialisation of kernel and bias."""

    features: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        init = _torch_uniform(x.shape[-1])
        return nn.Dense(self.features, kernel_init=init, bias_init=init)(x)


class MLP(nn.Module):
    """Dense -> LayerNorm (eps 1e-5; the paper's has no scale and no bias) -> CReLU per hidden
    size, then Dense(out)."""

    hidden_sizes: tuple[int, ...]
    out_size: int
    layer_norm: LayerNormChoice = "plain"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        affine = self.layer_norm == "affine"
        for width in self.hidden_sizes:
            x = TorchDense(width)(x)
            if self.layer_norm != "none":
                x = nn.LayerNorm(epsilon=1e-5, use_scale=affine, use_bias=affine)(x)
            x = crelu(x)
        return TorchDense(self.out_size)(x)


class CriticEnsemble(NamedTuple):
    """K critics Q_k(s, a); parameters carry a leading axis of size K.

    `init(key, obs, action)` -> params with leading axis K.
    `apply(params, obs[B, o], action[B, a])` -> q[K, B]: every critic on the same inputs.
    `apply_per_member(params, obs[B, o], action[K, B, a])` -> q[K, B]: critic k on action[k].
    """

    init: Callable
    apply: Callable
    apply_per_member: Callable


def make_critic_ensemble(
    num_critics: int, hidden_sizes: tuple[int, ...], outputs: int = 1, layer_norm: LayerNormChoice = "plain"
) -> CriticEnsemble:
    """K critics with one output each (q [K, B]) or `outputs` > 1 each (e.g. BEN's mean and
    log-variance: [K, B, outputs])."""
    mlp = MLP(hidden_sizes, outputs, layer_norm)

    def single(params, obs, action):
        out = mlp.apply(params, jp.concatenate([obs, action], axis=-1))
        return out[..., 0] if outputs == 1 else out

    def init(key, obs, action):
        keys = jax.random.split(key, num_critics)
        return jax.vmap(lambda k: mlp.init(k, jp.concatenate([obs, action], axis=-1)))(keys)

    apply = jax.vmap(single, in_axes=(0, None, None))
    apply_per_member = jax.vmap(single, in_axes=(0, None, 0))
    return CriticEnsemble(init, apply, apply_per_member)


class Actor(NamedTuple):
    """One shared trunk, K heads. `apply(params, obs[B, o])` -> head outputs, each [K, B, a]:
    (mean, log_std) for a soft actor (log_std clamped to [-20, 2]); (pre_tanh,) for a
    deterministic one (its action is tanh(pre_tanh)).
    """

    init: Callable
    apply: Callable
    num_heads: int
    deterministic: bool


def make_actor(
    num_heads: int, hidden_sizes: tuple[int, ...], action_size: int, deterministic: bool, layer_norm: LayerNormChoice = "plain"
) -> Actor:
    per_head = action_size if deterministic else 2 * action_size
    # One Dense(K * per_head) after the trunk is K independent linear heads: head k owns its
    # columns of the kernel, all with the same fan-in.
    mlp = MLP(hidden_sizes, num_heads * per_head, layer_norm)

    def apply(params, obs):
        out = mlp.apply(params, obs).reshape(obs.shape[:-1] + (num_heads, per_head))
        out = jp.moveaxis(out, -2, 0)  # [K, ..., per_head]
        if deterministic:
            return (out,)
        mean, log_std = jp.split(out, 2, axis=-1)
        return mean, jp.clip(log_std, LOG_STD_MIN, LOG_STD_MAX)

    return Actor(mlp.init, apply, num_heads, deterministic)


# -- the squashed Gaussian ----------------------------------------------------------------------


def squashed_gaussian_sample(key: jax.Array, mean: jax.Array, log_std: jax.Array) -> tuple[jax.Array, jax.Array]:
    """a = tanh(mean + std * eps) and its exact log-density log pi(a) summed over the last axis.

    log pi(a) = sum_d [log N(u_d; mean_d, std_d) - log(1 - tanh(u_d)^2)], with
    log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)) (no 1e-6 fudge, finite for any u).
    """
    std = jp.exp(log_std)
    eps = jax.random.normal(key, mean.shape, mean.dtype)
    u = mean + std * eps
    log_normal = -0.5 * jp.square(eps) - log_std - 0.5 * math.log(2 * math.pi)
    log_det = 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))
    return jp.tanh(u), jp.sum(log_normal - log_det, axis=-1)


def squashed_gaussian_log_prob(action_pre_tanh: jax.Array, mean: jax.Array, log_std: jax.Array) -> jax.Array:
    """log pi(tanh(u)) for a given pre-tanh u (used by tests to check the sampler's density)."""
    eps = (action_pre_tanh - mean) * jp.exp(-log_std)
    log_normal = -0.5 * jp.square(eps) - log_std - 0.5 * math.log(2 * math.pi)
    u = action_pre_tanh
    log_det = 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))
    return jp.sum(log_normal - log_det, axis=-1)
