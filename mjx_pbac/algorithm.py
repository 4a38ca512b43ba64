"""The one small interface through which an algorithm plugs into the shared loop.

The loop (`mjx_pbac.loop`), the replay buffer, evaluation, logging and checkpoints know nothing
of any one algorithm: they see an `Algorithm`, i.e. its number of heads (for posterior sampling),
how it initialises its state, how it acts during training and evaluation, and one gradient step.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax

from mjx_pbac.replay import Transition

AgentState = Any  # a pytree (flax.struct.dataclass) owned by the algorithm


class Algorithm(NamedTuple):
    num_heads: int
    """K: members an instance can follow; the loop draws `active_head` in [0, K) (SPEC 2.4)."""
    hyperparams: Callable[[Any], Any]
    """hyperparams(config) -> pytree of traced scalars: the knobs that may differ between the
    members of one vmapped run (a sweep); stored in the agent state."""
    init: Callable[..., AgentState]
    """init(key, hyper=None) -> agent state (parameters, targets, optimiser states, hyper)."""
    act: Callable[[AgentState, jax.Array, jax.Array, jax.Array], jax.Array]
    """act(state, obs[N, o], active_head[N], key) -> actions[N, a] in [-1, 1] (exploration)."""
    eval_act: Callable[[AgentState, jax.Array], jax.Array]
    """eval_act(state, obs[E, o]) -> actions[E, a] in [-1, 1], deterministic."""
    update: Callable[[AgentState, Transition, jax.Array, jax.Array], tuple[AgentState, dict[str, jax.Array]]]
    """update(state, batch, key, target_head) -> (state, scalar metrics): one gradient step."""
    critic_values: Callable[[AgentState, jax.Array, jax.Array], jax.Array] | None = None
    """critic_values(state, obs[B, o], action[B, a]) -> q[C, B]: every critic of the ensemble at
    the same inputs, as the algorithm scores actions (BootDQN-P: prior included). Read by
    `mjx_pbac.disagreement` for the ensemble-disagreement metrics; None reports none."""
    head_actions: Callable[[AgentState, jax.Array], jax.Array] | None = None
    """head_actions(state, obs[B, o]) -> actions[H, B, a]: each actor head's deterministic action
    (tanh of the mean for a Gaussian head); H = 1 for a single actor."""


def traced_hyperparams(cls: type, config: Any, **values: float) -> Any:
    """`cls` (a struct dataclass of hyperparameters) with every field a float32 scalar: `values`
    where given, else the config's field of the same name. Traced values let the members of one
    vmapped run differ (a sweep) under one compiled program."""
    import dataclasses

    import jax.numpy as jp

    def scalar(name: str):
        return jp.asarray(float(values[name] if name in values else getattr(config, name)), jp.float32)

    return cls(**{field.name: scalar(field.name) for field in dataclasses.fields(cls)})


def update_metrics(
    critic_loss: jax.Array,
    critic_aux: dict[str, jax.Array],
    actor_loss: jax.Array,
    alpha: jax.Array,
    log_prob: jax.Array,
    targets: jax.Array,
) -> dict[str, jax.Array]:
    """The metrics every algorithm's `update` reports, under the same names, so that logs,
    TensorBoard and reports read alike: critic loss and its parts (critic_*), actor loss,
    alpha, entropy (-mean log pi; 0 for deterministic heads) and the mean Bellman target."""
    import jax.numpy as jp

    return {
        "critic_loss": critic_loss,
        **{f"critic_{name}": value for name, value in critic_aux.items()},
        "actor_loss": actor_loss,
        "alpha": alpha,
        "entropy": -jp.mean(log_prob),
        "target_mean": jp.mean(targets),
    }
