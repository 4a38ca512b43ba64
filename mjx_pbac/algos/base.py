"""What every algorithm shares: its config as a pytree, the interface through which it plugs into
the loop, its acting state, and one gradient step.

**Configs are pytrees.** An algorithm's config is a frozen dataclass (`algorithm_config`) whose
fields are either *knobs*, declared with `knob(...)`: numeric values that may differ between the
members of one program (a sweep), which become traced leaves; or *fixed* fields (sizes, network
widths, loss forms, the discount): static, part of the compiled program. A sweep is then a vmap
over the stacked member configs (`stack_configs`), as rejax does, and the sweepable fields of an
algorithm are exactly its knobs (`knob_names`). Inside the program a member's config reads as
usual: `config.tau` is its traced scalar, `config.num_critics` a Python int.

**The interface** (`Algorithm`) is what the loop calls: `init`, `act`, `eval_act`, `update`, and
the algorithm's `Acting` rule, which owns whatever state acting needs between env steps
(posterior sampling's active heads and counters for PBAC and BootDQN-P; nothing for SAC), so
the loop knows no algorithm. `make_algorithm` builds one from functions that take only what they
use.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jp
import numpy as np
import optax
from flax import struct

AgentState = Any
"""A pytree (flax.struct.dataclass) owned by the algorithm: its parameters, targets, optimiser
states and `config` (this member's config, knobs traced)."""


# -- configs --------------------------------------------------------------------------------

_KNOB = "knob"
_AS_NUMBER = "as_number"


def knob(default: Any, as_number: Callable[[Any], float] | None = None) -> Any:
    """A dataclass field that may differ between the members of one program: a traced leaf of the
    config pytree (float32; int32 for an int field). `as_number` maps a non-numeric choice to
    the number the program uses (e.g. DRND's sign: "penalty" -> -1.0)."""
    return dataclasses.field(default=default, metadata={_KNOB: True, _AS_NUMBER: as_number})


def knob_names(cls: type) -> tuple[str, ...]:
    """The fields of an algorithm config class declared with `knob`: what a sweep may vary."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get(_KNOB))


def algorithm_config(cls: type) -> type:
    """`cls` as a frozen dataclass registered as a pytree: its knobs are the leaves (as float32 /
    int32 scalars, or whatever arrays a vmap or a stack put there), the other fields static."""
    cls = dataclasses.dataclass(frozen=True)(cls)
    fields = dataclasses.fields(cls)
    hints = typing.get_type_hints(cls)
    knobs = tuple(f for f in fields if f.metadata.get(_KNOB))
    fixed = tuple(f.name for f in fields if not f.metadata.get(_KNOB))

    def leaf(field: dataclasses.Field, value: Any) -> Any:
        if isinstance(value, (jax.Array, np.ndarray)) or not isinstance(value, (bool, int, float, str)):
            return value  # already an array (stacked, traced) or a placeholder of jax.tree's
        if field.metadata[_AS_NUMBER] is not None:
            value = field.metadata[_AS_NUMBER](value)
        return np.asarray(value, np.int32 if hints[field.name] is int else np.float32)

    def flatten(config):
        children = [(jax.tree_util.GetAttrKey(f.name), leaf(f, getattr(config, f.name))) for f in knobs]
        return children, tuple(getattr(config, name) for name in fixed)

    def unflatten(static: tuple, leaves: Any) -> Any:
        config = object.__new__(cls)  # no __post_init__: leaves may be tracers
        for f, value in zip(knobs, leaves):
            object.__setattr__(config, f.name, value)
        for name, value in zip(fixed, static):
            object.__setattr__(config, name, value)
        return config

    jax.tree_util.register_pytree_with_keys(cls, flatten, unflatten)
    return cls


def stack_configs(configs: list[Any]) -> Any:
    """The members' configs as one config whose knobs are arrays with a leading member axis, for
    `jax.vmap`. Fixed fields change shapes or code, so they must agree: a ValueError names the
    first that does not, and what may differ."""
    first = configs[0]
    for other in configs[1:]:
        for f in dataclasses.fields(first):
            if not f.metadata.get(_KNOB) and getattr(other, f.name) != getattr(first, f.name):
                raise ValueError(
                    f"{f.name} differs between members ({getattr(first, f.name)!r} vs {getattr(other, f.name)!r}) but "
                    f"is fixed for all members of one program (it changes shapes or code); members may differ in: "
                    f"{', '.join(knob_names(type(first)))}"
                )
    return jax.tree.map(lambda *leaves: jp.stack(leaves), *configs)


def traced(config: Any) -> Any:
    """`config` with its knobs as device scalars, as a member's program sees them."""
    return jax.tree.map(jp.asarray, config)


# -- acting state ---------------------------------------------------------------------------


class Acting(NamedTuple):
    """What an algorithm keeps between env steps to act (its acting state, one entry per env
    instance), and what it hands each gradient step from it. The loop calls these with keys of its
    own and never looks inside the state."""

    init: Callable[[jax.Array, Any, int], Any]
    """init(key, config, num_envs) -> acting state."""
    step: Callable[[Any, jax.Array, jax.Array], Any]
    """step(acting, episode_step[N], key) -> acting state for this env step (before acting)."""
    update_context: Callable[[Any, jax.Array, int], Any] | None = None
    """update_context(acting, key, num_updates) -> a pytree with leading axis num_updates, one
    slice per gradient step, passed to `update`; None passes nothing."""


@struct.dataclass
class PosteriorSampling:
    """Posterior sampling's acting state (paper section 3, "Posterior sampling"; docs/design.md
    "Posterior sampling and evaluation"): the head each instance follows."""

    active_head: jax.Array
    """[N] int32: the head (critic and actor head) instance n follows."""
    sampling_counter: jax.Array
    """[N] int32: env steps taken by each instance; a multiple of the rate triggers a redraw."""
    posterior_sampling_rate: jax.Array
    """PSR (int32): instances redraw their head every PSR steps."""


def redraw_heads(
    key: jax.Array, active_head: jax.Array, sampling_counter: jax.Array, episode_step: jax.Array, num_heads: int, psr: Any
) -> jax.Array:
    """The heads for this step: a fresh uniform draw where the instance starts an episode
    (`episode_step == 0`) or its counter is a multiple of `psr`; the old head elsewhere."""
    redraw = jp.logical_or(episode_step == 0, sampling_counter % psr == 0)
    fresh = jax.random.randint(key, active_head.shape, 0, num_heads, dtype=jp.int32)
    return jp.where(redraw, fresh, active_head)


def posterior_sampling(num_heads: int, target_heads: bool) -> Acting:
    """Instance n follows head `active_head[n]`, redrawn uniformly at the first step of each of its
    episodes and whenever its step counter (global, not reset by episodes) is a multiple of the
    config's `posterior_sampling_rate`. With `target_heads`, each gradient step gets the head whose
    policy forms the Bellman targets: the instance's active head with one instance, one head drawn
    uniformly per gradient step with many."""

    def init(key: jax.Array, config: Any, num_envs: int) -> PosteriorSampling:
        return PosteriorSampling(
            active_head=jax.random.randint(key, (num_envs,), 0, num_heads, dtype=jp.int32),
            sampling_counter=jp.zeros((num_envs,), jp.int32),
            posterior_sampling_rate=jp.asarray(config.posterior_sampling_rate, jp.int32),
        )

    def step(acting: PosteriorSampling, episode_step: jax.Array, key: jax.Array) -> PosteriorSampling:
        heads = redraw_heads(
            key, acting.active_head, acting.sampling_counter, episode_step, num_heads, acting.posterior_sampling_rate
        )
        return acting.replace(active_head=heads, sampling_counter=acting.sampling_counter + 1)

    def update_context(acting: PosteriorSampling, key: jax.Array, num_updates: int) -> jax.Array:
        if acting.active_head.shape[0] == 1:
            return jp.broadcast_to(acting.active_head[0], (num_updates,))
        return jax.random.randint(key, (num_updates,), 0, num_heads, dtype=jp.int32)

    return Acting(init=init, step=step, update_context=update_context if target_heads else None)


def _no_acting_state(*args: Any) -> None:
    return None


NO_ACTING = Acting(init=_no_acting_state, step=_no_acting_state)
"""For algorithms that need nothing between env steps (they act from their parameters and the key)."""


# -- the interface --------------------------------------------------------------------------


class Algorithm(NamedTuple):
    """An algorithm as the loop sees it. Build one with `make_algorithm`."""

    init: Callable[[jax.Array, Any], AgentState]
    """init(key, config) -> agent state (parameters, targets, optimiser states, `config`)."""
    act: Callable[[AgentState, Any, jax.Array, jax.Array], jax.Array]
    """act(agent, acting, obs[N, o], key) -> actions[N, a] in [-1, 1] (exploration)."""
    eval_act: Callable[[AgentState, jax.Array], jax.Array]
    """eval_act(agent, obs[E, o]) -> actions[E, a] in [-1, 1], deterministic."""
    update: Callable[[AgentState, Any, jax.Array, Any], tuple[AgentState, dict[str, jax.Array]]]
    """update(agent, batch, key, context) -> (agent, scalar metrics): one gradient step; context
    is this step's slice of `acting.update_context` (None without one)."""
    acting: Acting
    critic_values: Callable[[AgentState, jax.Array, jax.Array], jax.Array] | None
    """critic_values(agent, obs[B, o], action[B, a]) -> q[C, B]: every critic of the ensemble at
    the same inputs, as the algorithm scores actions (BootDQN-P: prior included). Read by
    `mjx_pbac.disagreement` for the ensemble-disagreement metrics; None reports none."""
    head_actions: Callable[[AgentState, jax.Array], jax.Array] | None
    """head_actions(agent, obs[B, o]) -> actions[H, B, a]: each actor head's deterministic action
    (tanh of the mean for a Gaussian head); H = 1 for a single actor."""


def make_algorithm(
    *,
    init: Callable,
    act: Callable,
    eval_act: Callable,
    update: Callable,
    acting: Acting | None = None,
    critic_values: Callable | None = None,
    head_actions: Callable | None = None,
) -> Algorithm:
    """An `Algorithm` from functions that take only what they use: without `acting`,
    act(agent, obs, key); with it, act(agent, acting_state, obs, key). Without an update context
    (no `acting.update_context`), update(agent, batch, key); with one, update(agent, batch, key,
    context)."""
    if acting is None:
        acting, stateless_act = NO_ACTING, act

        def act(agent, acting_state, obs, key):  # the loop's signature
            return stateless_act(agent, obs, key)

    if acting.update_context is None:
        plain_update = update

        def update(agent, batch, key, context):  # the loop's signature
            return plain_update(agent, batch, key)

    return Algorithm(init, act, eval_act, update, acting, critic_values, head_actions)


# -- one gradient step ----------------------------------------------------------------------

adam = optax.inject_hyperparams(optax.adam, static_args=("b1", "b2", "eps", "eps_root", "nesterov"))
"""Adam with PyTorch's defaults (b1 0.9, b2 0.999, eps 1e-8) and its learning rate held in its
state, so each member of a program keeps its own (a sweep may vary it). Only the learning rate
is injected: traced b1, b2 and eps would be rounded to float32 before (1 - b1) is formed, where
constants are exact, which changes results in the last bits."""

_adam_update = adam(learning_rate=0.0).update  # the learning rate comes from the state


def adam_state(params: Any, learning_rate: Any) -> optax.OptState:
    """Adam's state for `params`, holding `learning_rate` (a member's traced knob)."""
    return adam(learning_rate=learning_rate).init(params)


def gradient_step(
    objective: Callable[[Any], tuple[jax.Array, Any]], params: Any, opt_state: optax.OptState, weight_decay: Any = None
):
    """One Adam step on `objective(params) -> (loss, aux)`: (params, opt_state, loss, aux).

    With `weight_decay` (a member's traced knob; None for none), the step is AdamW's (Loshchilov
    and Hutter 2019; `optax.adamw`, PyTorch's `AdamW`): decoupled weight decay on every parameter,
    params <- params - lr (adam_direction + weight_decay params), with the learning rate the
    state holds. A weight decay of 0 leaves every parameter as Adam's step does."""
    (loss, aux), grads = jax.value_and_grad(objective, has_aux=True)(params)
    updates, opt_state = _adam_update(grads, opt_state, params)
    if weight_decay is not None:
        decay = opt_state.hyperparams["learning_rate"] * weight_decay
        updates = jax.tree.map(lambda update, param: update - decay * param, updates, params)
    return optax.apply_updates(params, updates), opt_state, loss, aux


def weight_decay_rule(config: Any) -> Callable[[Any], Any]:
    """decay(member_config) -> the `weight_decay` to pass `gradient_step`: the member's traced knob
    when any member of the program (`config`: every member's stacked, as `make` receives them) has
    a non-zero one, else None, so that the paper's programs (no decay anywhere) hold no decay ops."""
    if bool(np.any(np.asarray(config.weight_decay) != 0)):
        return lambda member: member.weight_decay
    return lambda member: None


def polyak(target: Any, online: Any, tau: jax.Array) -> Any:
    """target + tau (online - target), leaf by leaf."""
    return jax.tree.map(lambda t, o: t + tau * (o - t), target, online)


def temperature_step(log_alpha: jax.Array, opt_state: optax.OptState, log_prob: jax.Array, target_entropy: float):
    """(log alpha, optimiser state) after one Adam step on `losses.temperature_loss`."""
    from mjx_pbac.losses import temperature_loss

    log_alpha, opt_state, _, _ = gradient_step(
        lambda value: (temperature_loss(value, log_prob, target_entropy), None), log_alpha, opt_state
    )
    return log_alpha, opt_state


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
    return {
        "critic_loss": critic_loss,
        **{f"critic_{name}": value for name, value in critic_aux.items()},
        "actor_loss": actor_loss,
        "alpha": alpha,
        "entropy": -jp.mean(log_prob),
        "target_mean": jp.mean(targets),
    }
