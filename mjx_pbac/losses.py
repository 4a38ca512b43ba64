"""PBAC's losses as pure functions of arrays (paper Eq. (4) (critic_loss), section 3.3, Algorithm 1 lines 12-15).

Shapes: K ensemble members, B samples of the minibatch, A action dimensions.

Critic (docs/design.md "Critic loss"), with q[k, i] = Q_k(s_i, a_i), Bellman targets y[k, i] (no gradient) and
bootstrap mask b[k, i] in {0, 1}:

    diversity   = mean_{k,i} b[k,i] (q[k,i] - y[k,i])^2
    coherence   = mean_{k,i} b[k,i] (q[k,i] - ybar[i])^2 / (2 s)
    propagation = -(gamma^2 + 1/2) mean_i log sigma2[i]
    loss        = diversity + coherence + propagation   (each term can be switched off)

form "reference" (the authors' code): s = sigma0^2, ybar[i] = mean_k y[k,i],
sigma2[i] = max(1e-6, var_k(b[k,i] q[k,i])) with ddof 1 (masked entries count as zeros).

form "paper" (the printed equation, moments after masking): s = gamma^2 sigma0^2,
ybar[i] = mean of y[k,i] over the unmasked k (the plain mean when none is unmasked),
sigma2[i] = max(1e-6, unbiased variance of q[k,i] over the unmasked k), 1e-6 with fewer than two.
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jp

VARIANCE_FLOOR = 1e-6


def pbac_critic_loss(
    q: jax.Array,
    y: jax.Array,
    mask: jax.Array,
    *,
    gamma: float,
    prior_variance: float,
    form: Literal["reference", "paper"] = "reference",
    use_diversity: bool | jax.Array = True,
    use_coherence: bool | jax.Array = True,
    use_propagation: bool | jax.Array = True,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """PBAC critic loss (module docstring) of q, y, mask, each [K, B]; y gets no gradient.

    gamma and prior_variance may be traced scalars; the switches bools or traced 0/1 scalars.
    Returns (loss, aux) with aux the three terms (whether switched on or not), the ensemble's
    per-sample standard deviation of q averaged over the batch (`q_spread`) and the mean q.
    """
    if q.ndim != 2 or q.shape != y.shape or q.shape != mask.shape:
        raise ValueError(f"q, y and mask must share one shape [K, B]; got {q.shape}, {y.shape}, {mask.shape}")
    if form not in ("reference", "paper"):
        raise ValueError(f"form must be 'reference' or 'paper', got {form!r}")
    y = jax.lax.stop_gradient(y)
    mask = mask.astype(q.dtype)

    if form == "reference":
        y_bar = jp.mean(y, axis=0)
        coherence_scale = 2.0 * prior_variance
        variance = jp.var(mask * q, axis=0, ddof=1)
    else:
        count = jp.sum(mask, axis=0)
        y_bar = jp.where(count > 0, jp.sum(mask * y, axis=0) / jp.maximum(count, 1.0), jp.mean(y, axis=0))
        coherence_scale = 2.0 * gamma**2 * prior_variance
        q_mean = jp.sum(mask * q, axis=0) / jp.maximum(count, 1.0)
        squares = jp.sum(mask * jp.square(q - q_mean), axis=0)
        variance = jp.where(count >= 2, squares / jp.maximum(count - 1.0, 1.0), VARIANCE_FLOOR)

    diversity = jp.mean(mask * jp.square(q - y))
    coherence = jp.mean(mask * jp.square(q - y_bar)) / coherence_scale
    propagation = -(gamma**2 + 0.5) * jp.mean(jp.log(jp.maximum(variance, VARIANCE_FLOOR)))

    # Switches may be Python bools or traced 0/1 arrays (so a sweep can vary them per member).
    loss = (
        jp.asarray(use_diversity, q.dtype) * diversity
        + jp.asarray(use_coherence, q.dtype) * coherence
        + jp.asarray(use_propagation, q.dtype) * propagation
    )
    aux = {
        "diversity": diversity,
        "coherence": coherence,
        "propagation": propagation,
        "q_mean": jp.mean(q),
        "q_spread": jp.mean(jp.std(q, axis=0)),
    }
    return loss, aux


def huber(x: jax.Array, delta: float | jax.Array) -> jax.Array:
    """Elementwise 0.5 x^2 where |x| <= delta, delta (|x| - 0.5 delta) elsewhere: PyTorch's
    HuberLoss(delta), the TD loss the paper applied to its baselines."""
    magnitude = jp.abs(x)
    return jp.where(magnitude <= delta, 0.5 * jp.square(x), delta * (magnitude - 0.5 * delta))


def bellman_targets(
    reward: jax.Array,
    terminated: jax.Array,
    next_q: jax.Array,
    next_log_prob: jax.Array,
    *,
    gamma: float,
    alpha: jax.Array | float,
) -> jax.Array:
    """y[k, i] = r_i + gamma (1 - terminated_i) (next_q[k, i] - alpha next_log_prob[i]).

    reward, terminated, next_log_prob: [B]; next_q: [K, B] from the target critics at a' drawn
    from the target head. Truncation is not an argument: a truncated transition bootstraps.
    """
    soft_value = next_q - alpha * next_log_prob[None, :]
    return reward[None, :] + gamma * (1.0 - terminated[None, :]) * soft_value


def soft_actor_loss(q: jax.Array, log_prob: jax.Array, alpha: jax.Array | float) -> jax.Array:
    """mean_{k,i} [alpha log pi_k(a_ik | s_i) - Q_k(s_i, a_ik)], q and log_prob of shape [K, B]
    (head k's reparameterised sample scored by critic k). With alpha = 0 and log_prob = 0 this is
    the deterministic actor's loss.
    """
    return jp.mean(alpha * log_prob - q)


def temperature_loss(log_alpha: jax.Array, log_prob: jax.Array, target_entropy: float) -> jax.Array:
    """-log_alpha * mean(stop_grad(log pi + H_target)), H_target = -action_size by convention."""
    return -log_alpha * jp.mean(jax.lax.stop_gradient(log_prob + target_entropy))
