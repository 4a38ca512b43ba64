"""Optimiser steps shared by every algorithm.

Learning rates are per-member traced values (a sweep may vary them), so Adam runs as optax's
`scale_by_adam` direction times -learning_rate from the member's hyperparameters.
"""

from __future__ import annotations

from typing import Any

import jax
import optax

adam = optax.scale_by_adam
"""Adam without its learning rate (PyTorch's defaults: b1 0.9, b2 0.999, eps 1e-8)."""


def adam_step(optimizer: optax.GradientTransformation, grads: Any, opt_state: Any, params: Any, learning_rate: jax.Array):
    """(new params, new optimiser state) after one step of `optimizer` scaled by -learning_rate."""
    direction, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, jax.tree.map(lambda d: -learning_rate * d, direction)), opt_state


def polyak(target: Any, online: Any, tau: jax.Array) -> Any:
    """target + tau (online - target), leaf by leaf."""
    return jax.tree.map(lambda t, o: t + tau * (o - t), target, online)


def temperature_step(optimizer, opt_state, log_alpha, log_prob, target_entropy: float, learning_rate):
    """(new log alpha, new optimiser state) after one step on `losses.temperature_loss`."""
    from mjx_pbac.losses import temperature_loss

    grad = jax.grad(temperature_loss)(log_alpha, log_prob, target_entropy)
    return adam_step(optimizer, grad, opt_state, log_alpha, learning_rate)
