"""BootDQN-P (Osband et al. 2018, randomized prior functions) for continuous control, as the paper
adapts it (its appendix "BootDQN-P"; SPEC 3), as an `Algorithm`.

Shapes: K ensemble members, B samples of the minibatch, o observation and a action dimensions.

Critics. K trainable critics f_k and K fixed random prior networks p_k of the same shape (PBAC's
critic MLP, SPEC 2.1; the priors are initialised from their own key and never trained: no
optimiser state, no gradient, no Polyak averaging):

    Q_k(s, a)    = f_k(s, a)    + beta p_k(s, a)          beta = prior scale
    Qbar_k(s, a) = fbar_k(s, a) + beta p_k(s, a)          fbar_k = Polyak copies of f_k only

The prior scale multiplies a fixed network: it sets how far apart the members start and how much
of that disagreement survives where data is scarce. Exploration comes only from that diversity of
the heads, through posterior sampling (SPEC 2.4): an instance acts greedily with its active head,
with no action noise and no entropy bonus.

Actor. PBAC's shared trunk with K deterministic tanh heads, pi_k(s) = tanh(head_k(s)) [K, B, a].

One gradient step, in PBAC's order (critic, actor, Polyak; SPEC 2.3):

1. critic: targets from target critic k at head k's action (each member bootstraps with its own
   head, so the loop's `target_head` is unused),

       y[k, i] = r_i + gamma (1 - terminated_i) Qbar_k(s'_i, pi_k(s'_i))        [K, B]

   (truncated transitions bootstrap), a fresh bootstrap mask b[k, i] ~ Bernoulli(1 - kappa), and
   the masked Huber TD loss of `bootdqn_critic_loss` at q[k, i] = Q_k(s_i, a_i), one Adam step
   over all f_k (Osband et al.'s Eq. (6), with the Huber loss the paper applied to baselines);
2. actor: -mean_{k,i} Q_k(s_i, pi_k(s_i)) with the just-updated critics (prior included), one Adam
   step; gradients reach only the actor;
3. Polyak: fbar <- fbar + tau (f - fbar).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jp
import optax
from flax import struct

from mjx_pbac import losses
from mjx_pbac.algorithm import Algorithm, traced_hyperparams, update_metrics
from mjx_pbac.config import BootDQNPConfig
from mjx_pbac.networks import Actor, CriticEnsemble, make_actor, make_critic_ensemble
from mjx_pbac.losses import huber
from mjx_pbac.optim import adam_step, polyak
from mjx_pbac.replay import Transition

# -- the loss -----------------------------------------------------------------------------------



def bootdqn_critic_loss(
    q: jax.Array, y: jax.Array, mask: jax.Array, *, huber_delta: float | jax.Array
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Masked Huber TD loss of q, y, mask, each [K, B]; y gets no gradient:

        loss = mean_{k,i} mask[k,i] huber(q[k,i] - y[k,i], huber_delta)

    The mean runs over all K B entries, masked ones counting as zeros (as PBAC's diversity term),
    so a member's weight does not depend on how many of its samples the mask kept.
    Returns (loss, aux) with aux `q_mean` (mean of q) and `q_spread` (standard deviation of q over
    the K members, ddof 0, averaged over the batch), as `pbac_critic_loss` names them.
    """
    if q.ndim != 2 or q.shape != y.shape or q.shape != mask.shape:
        raise ValueError(f"q, y and mask must share one shape [K, B]; got {q.shape}, {y.shape}, {mask.shape}")
    y = jax.lax.stop_gradient(y)
    loss = jp.mean(mask.astype(q.dtype) * huber(q - y, huber_delta))
    aux = {"q_mean": jp.mean(q), "q_spread": jp.mean(jp.std(q, axis=0))}
    return loss, aux


# -- networks and the quantities built from them ------------------------------------------------


class BootDQNPNetworks(NamedTuple):
    critic: CriticEnsemble
    """One ensemble definition, applied to both the trainable f and the fixed priors p."""
    actor: Actor
    """Shared trunk, K deterministic tanh heads."""


def make_bootdqn_p_networks(config: BootDQNPConfig, action_size: int) -> BootDQNPNetworks:
    return BootDQNPNetworks(
        critic=make_critic_ensemble(config.num_critics, config.hidden_sizes),
        actor=make_actor(config.num_critics, config.hidden_sizes, action_size, deterministic=True),
    )


@struct.dataclass
class BootDQNPHyper:
    """The numeric knobs that may differ between members of one vmapped run (a sweep): traced
    scalars, so one compiled program serves every value."""

    bootstrap_rate: jax.Array
    prior_scale: jax.Array
    tau: jax.Array
    critic_lr: jax.Array
    actor_lr: jax.Array

    @classmethod
    def of(cls, config: BootDQNPConfig) -> "BootDQNPHyper":
        return traced_hyperparams(cls, config)


@struct.dataclass
class BootDQNPState:
    hyper: BootDQNPHyper
    """This member's hyperparameters (see `BootDQNPHyper`)."""
    critic_params: dict
    """The trainable critics f, leading axis K."""
    target_critic_params: dict
    """Polyak copies fbar of f (the priors are not averaged: they never change)."""
    prior_params: dict
    """The fixed random prior networks p, leading axis K; never updated."""
    actor_params: dict
    critic_opt_state: optax.OptState
    """Adam state of f only: the priors have none."""
    actor_opt_state: optax.OptState


def randomized_prior_q(
    critic: CriticEnsemble,
    critic_params: dict,
    prior_params: dict,
    prior_scale: jax.Array | float,
    obs: jax.Array,
    action: jax.Array,
) -> jax.Array:
    """Q_k = f_k + beta p_k -> [K, B] at obs [B, o] and action [B, a] (every member at the same
    action) or [K, B, a] (member k at action[k]). No gradient reaches the priors."""
    apply = critic.apply if action.ndim == 2 else critic.apply_per_member
    prior = apply(jax.lax.stop_gradient(prior_params), obs, action)
    return apply(critic_params, obs, action) + prior_scale * prior


def head_actions(actor: Actor, actor_params: dict, obs: jax.Array) -> jax.Array:
    """pi_k(s) = tanh(head_k(s)) for every head: [K, B, a] from obs [B, o]."""
    (pre_tanh,) = actor.apply(actor_params, obs)
    return jp.tanh(pre_tanh)


def bootdqn_targets(networks: BootDQNPNetworks, state: BootDQNPState, batch: Transition, gamma: float) -> jax.Array:
    """y[k, i] = r_i + gamma (1 - terminated_i) Qbar_k(s'_i, pi_k(s'_i)) -> [K, B]: target critic
    k (fbar_k + beta p_k) at the action of head k of the current actor; truncation bootstraps."""
    next_action = head_actions(networks.actor, state.actor_params, batch.next_obs)
    next_q = randomized_prior_q(
        networks.critic, state.target_critic_params, state.prior_params, state.hyper.prior_scale, batch.next_obs, next_action
    )
    no_entropy = jp.zeros_like(batch.reward)
    return losses.bellman_targets(batch.reward, batch.terminated, next_q, no_entropy, gamma=gamma, alpha=0.0)


# -- the algorithm ------------------------------------------------------------------------------


def make_bootdqn_p(config: BootDQNPConfig, obs_size: int, action_size: int) -> Algorithm:
    networks = make_bootdqn_p_networks(config, action_size)
    critic, actor = networks
    # Adam without its learning rate, which comes from the member's `BootDQNPHyper` at each step.
    critic_opt = actor_opt = optax.scale_by_adam()

    def init(key: jax.Array, hyper: BootDQNPHyper | None = None) -> BootDQNPState:
        """Parameters, priors, targets and optimiser states; `hyper` defaults to the config's values."""
        hyper = BootDQNPHyper.of(config) if hyper is None else hyper
        critic_key, prior_key, actor_key = jax.random.split(key, 3)
        obs, action = jp.zeros((1, obs_size)), jp.zeros((1, action_size))
        critic_params = critic.init(critic_key, obs, action)
        actor_params = actor.init(actor_key, obs)
        return BootDQNPState(
            hyper=hyper,
            critic_params=critic_params,
            target_critic_params=jax.tree.map(jp.copy, critic_params),
            prior_params=critic.init(prior_key, obs, action),
            actor_params=actor_params,
            critic_opt_state=critic_opt.init(critic_params),
            actor_opt_state=actor_opt.init(actor_params),
        )

    def act(state: BootDQNPState, obs: jax.Array, active_head: jax.Array, key: jax.Array) -> jax.Array:
        """Instance n acts greedily with its active head: tanh(head_{active_head[n]}(obs[n])); no noise."""
        del key
        return head_actions(actor, state.actor_params, obs)[active_head, jp.arange(obs.shape[0])]

    def eval_act(state: BootDQNPState, obs: jax.Array) -> jax.Array:
        # SPEC 2.4: the mean over heads of tanh(head_k(s)).
        return jp.mean(head_actions(actor, state.actor_params, obs), axis=0)

    def update(state: BootDQNPState, batch: Transition, key: jax.Array, target_head: jax.Array):
        del target_head  # critic k bootstraps with its own head k
        hyper = state.hyper

        # 1. critic (f only; the priors enter Q but receive no gradient)
        y = bootdqn_targets(networks, state, batch, config.gamma)
        mask = jax.random.bernoulli(key, 1.0 - hyper.bootstrap_rate, y.shape)

        def critic_objective(params):
            q = randomized_prior_q(critic, params, state.prior_params, hyper.prior_scale, batch.obs, batch.action)
            return bootdqn_critic_loss(q, y, mask, huber_delta=config.huber_delta)

        (critic_value, critic_aux), critic_grads = jax.value_and_grad(critic_objective, has_aux=True)(
            state.critic_params
        )
        critic_params, critic_opt_state = adam_step(
            critic_opt, critic_grads, state.critic_opt_state, state.critic_params, hyper.critic_lr
        )

        # 2. actor: head k scored by (the just updated) Q_k = f_k + beta p_k
        def actor_objective(params):
            action = head_actions(actor, params, batch.obs)
            q = randomized_prior_q(critic, critic_params, state.prior_params, hyper.prior_scale, batch.obs, action)
            return -jp.mean(q)

        actor_value, actor_grads = jax.value_and_grad(actor_objective)(state.actor_params)
        actor_params, actor_opt_state = adam_step(
            actor_opt, actor_grads, state.actor_opt_state, state.actor_params, hyper.actor_lr
        )

        # 3. Polyak (f only)
        target_critic_params = polyak(state.target_critic_params, critic_params, hyper.tau)
        new_state = state.replace(
            critic_params=critic_params,
            target_critic_params=target_critic_params,
            actor_params=actor_params,
            critic_opt_state=critic_opt_state,
            actor_opt_state=actor_opt_state,
        )
        zero = jp.zeros((), critic_value.dtype)  # no entropy term: alpha and entropy report 0
        metrics = update_metrics(critic_value, critic_aux, actor_value, zero, zero, y)
        return new_state, metrics

    def critic_values(state: BootDQNPState, obs: jax.Array, action: jax.Array) -> jax.Array:
        return randomized_prior_q(critic, state.critic_params, state.prior_params, state.hyper.prior_scale, obs, action)

    return Algorithm(
        num_heads=config.num_critics,
        hyperparams=BootDQNPHyper.of,
        init=init,
        act=act,
        eval_act=eval_act,
        update=update,
        critic_values=critic_values,
        head_actions=lambda state, obs: head_actions(actor, state.actor_params, obs),
    )
