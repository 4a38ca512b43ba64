"""BootDQN-P (Osband et al. 2018, randomized prior functions) for continuous control, as the paper
adapts it (appendix "Baselines"; per-task values in its table "Hyperparameters specific to
BootDQN-P").

Shapes: K ensemble members, B samples of the minibatch, o observation and a action dimensions.

Critics. K trainable critics f_k and K fixed random prior networks p_k of the same shape (PBAC's
critic MLP, paper Table 8; the priors are initialised from their own key and never trained: no
optimiser state, no gradient, no Polyak averaging):

    Q_k(s, a)    = f_k(s, a)    + beta p_k(s, a)          beta = prior scale
    Qbar_k(s, a) = fbar_k(s, a) + beta p_k(s, a)          fbar_k = Polyak copies of f_k only

The prior scale multiplies a fixed network: it sets how far apart the members start and how much
of that disagreement survives where data is scarce. Exploration comes only from that diversity of
the heads, through posterior sampling as PBAC's (paper section 3.3 and appendix "Baselines";
`base.posterior_sampling`): an instance acts greedily with its active head, with no action noise
and no entropy bonus.

Actor. PBAC's shared trunk with K deterministic tanh heads, pi_k(s) = tanh(head_k(s)) [K, B, a].

One gradient step, in PBAC's order (critic, actor, Polyak):

1. critic: targets from target critic k at head k's action (each member bootstraps with its own
   head, so it needs no target head from the acting state),

       y[k, i] = r_i + gamma (1 - terminated_i) Qbar_k(s'_i, pi_k(s'_i))        [K, B]

   (truncated transitions bootstrap), a fresh bootstrap mask b[k, i] ~ Bernoulli(1 - kappa), and
   the masked TD loss of `bootdqn_critic_loss` at q[k, i] = Q_k(s_i, a_i), one Adam step over
   all f_k (Osband et al.'s Eq. (6)); Huber, the loss the paper applied to every baseline, or
   (`loss = "mse"`) the squared error of the authors' code (adinlab/adinrl);
2. actor: -mean_{k,i} Q_k(s_i, pi_k(s_i)) with the just-updated critics (prior included), one Adam
   step; gradients reach only the actor;
3. Polyak: fbar <- fbar + tau (f - fbar).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax
import jax.numpy as jp
import optax
from flax import struct

from mjx_pbac import losses
from mjx_pbac.algos.base import (
    Algorithm,
    PosteriorSampling,
    adam_state,
    algorithm_config,
    gradient_step,
    knob,
    make_algorithm,
    polyak,
    posterior_sampling,
    traced,
    update_metrics,
    weight_decay_rule,
)
from mjx_pbac.losses import huber
from mjx_pbac.networks import Actor, CriticEnsemble, LayerNormChoice, make_actor, make_critic_ensemble
from mjx_pbac.replay import Transition
from mjx_pbac.schema import check_actor_critic, check_choice, check_numbers, check_positive, require


@algorithm_config
class Config:
    """BootDQN-P adapted to continuous control: K critics Q_k = f_k + beta p_k with p_k a fixed
    random prior network, a deterministic K-head actor, bootstrap masks and posterior sampling as
    PBAC, Huber TD loss."""

    num_critics: int = 10
    """K: critics (each with its own fixed prior network) and actor heads."""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """Widths of the Dense layers of every MLP (LayerNorm + CReLU after each)."""
    gamma: float = knob(0.99)
    """Discount factor."""
    tau: float = knob(0.005)
    """Polyak rate of the target critics (the priors never change)."""
    bootstrap_rate: float = knob(0.05)
    """kappa: each (critic, sample) pair is masked out with this probability per gradient step."""
    posterior_sampling_rate: int = knob(5)
    """PSR: an instance redraws its active head every PSR env steps (and at every episode start)."""
    prior_scale: float = knob(5.0)
    """beta: weight of the fixed prior network in Q_k = f_k + beta p_k."""
    loss: Literal["huber", "mse"] = "huber"
    """The masked TD loss: "huber" (the paper: Huber for every baseline) or "mse" (the authors'
    code: mask (q - y)^2)."""
    huber_delta: float = 1.0
    """Huber loss threshold of the TD error."""
    critic_lr: float = knob(3e-4)
    """Adam learning rate of the trainable critics f_k."""
    actor_lr: float = knob(3e-4)
    """Adam learning rate of the actor."""
    weight_decay: float = knob(0.0)
    """AdamW's decoupled weight decay of the critics' and the actor's parameters, per unit of
    learning rate (`base.gradient_step`); 0 is Adam, the paper's (docs/design.md "Recipe options
    beyond the paper")."""
    layer_norm: LayerNormChoice = "plain"
    """Normalisation of every hidden layer (`networks.MLP`): "plain" the paper's LayerNorm without
    scale and bias, "affine" with a learned scale and bias, "none" without LayerNorm."""

    def __post_init__(self) -> None:
        check_numbers(self)
        require(self.num_critics >= 1, f"num_critics must be >= 1, got {self.num_critics}")
        check_actor_critic(self)
        require(0.0 <= self.bootstrap_rate < 1.0, f"bootstrap_rate must lie in [0, 1), got {self.bootstrap_rate}")
        require(self.posterior_sampling_rate >= 1, f"posterior_sampling_rate must be >= 1, got {self.posterior_sampling_rate}")
        require(self.prior_scale >= 0, f"prior_scale must be >= 0, got {self.prior_scale}")
        check_choice(self, "loss")
        require(self.huber_delta > 0, f"huber_delta must be > 0, got {self.huber_delta}")
        check_positive(self, "critic_lr", "actor_lr")


# -- the loss -----------------------------------------------------------------------------------



def bootdqn_critic_loss(
    q: jax.Array, y: jax.Array, mask: jax.Array, *, huber_delta: float | jax.Array, loss: Literal["huber", "mse"] = "huber"
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Masked TD loss of q, y, mask, each [K, B]; y gets no gradient:

        loss = mean_{k,i} mask[k,i] huber(q[k,i] - y[k,i], huber_delta)      ("huber")
        loss = mean_{k,i} mask[k,i] (q[k,i] - y[k,i])^2                       ("mse")

    The mean runs over all K B entries, masked ones counting as zeros (as PBAC's diversity term),
    so a member's weight does not depend on how many of its samples the mask kept.
    Returns (loss, aux) with aux `q_mean` (mean of q) and `q_spread` (standard deviation of q over
    the K members, ddof 0, averaged over the batch), as `pbac_critic_loss` names them.
    """
    if q.ndim != 2 or q.shape != y.shape or q.shape != mask.shape:
        raise ValueError(f"q, y and mask must share one shape [K, B]; got {q.shape}, {y.shape}, {mask.shape}")
    error = q - jax.lax.stop_gradient(y)
    per_pair = huber(error, huber_delta) if loss == "huber" else jp.square(error)
    aux = {"q_mean": jp.mean(q), "q_spread": jp.mean(jp.std(q, axis=0))}
    return jp.mean(mask.astype(q.dtype) * per_pair), aux


# -- networks and the quantities built from them ------------------------------------------------


class BootDQNPNetworks(NamedTuple):
    critic: CriticEnsemble
    """One ensemble definition, applied to both the trainable f and the fixed priors p."""
    actor: Actor
    """Shared trunk, K deterministic tanh heads."""


def make_networks(config: Config, action_size: int) -> BootDQNPNetworks:
    return BootDQNPNetworks(
        critic=make_critic_ensemble(config.num_critics, config.hidden_sizes, layer_norm=config.layer_norm),
        actor=make_actor(config.num_critics, config.hidden_sizes, action_size, deterministic=True, layer_norm=config.layer_norm),
    )


@struct.dataclass
class State:
    config: Config
    """This member's config (knobs traced)."""
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


def bootdqn_targets(networks: BootDQNPNetworks, state: State, batch: Transition, gamma: float) -> jax.Array:
    """y[k, i] = r_i + gamma (1 - terminated_i) Qbar_k(s'_i, pi_k(s'_i)) -> [K, B]: target critic
    k (fbar_k + beta p_k) at the action of head k of the current actor; truncation bootstraps."""
    next_action = head_actions(networks.actor, state.actor_params, batch.next_obs)
    next_q = randomized_prior_q(
        networks.critic, state.target_critic_params, state.prior_params, state.config.prior_scale, batch.next_obs, next_action
    )
    no_entropy = jp.zeros_like(batch.reward)
    return losses.bellman_targets(batch.reward, batch.terminated, next_q, no_entropy, gamma=gamma, alpha=0.0)


# -- the algorithm ------------------------------------------------------------------------------


def make(config: Config, obs_size: int, action_size: int) -> Algorithm:
    networks = make_networks(config, action_size)
    critic, actor = networks
    decay = weight_decay_rule(config)

    def init(key: jax.Array, member: Config) -> State:
        """Parameters, priors, targets and optimiser states of a member with config `member`."""
        member = traced(member)
        critic_key, prior_key, actor_key = jax.random.split(key, 3)
        obs, action = jp.zeros((1, obs_size)), jp.zeros((1, action_size))
        critic_params = critic.init(critic_key, obs, action)
        actor_params = actor.init(actor_key, obs)
        return State(
            config=member,
            critic_params=critic_params,
            target_critic_params=jax.tree.map(jp.copy, critic_params),
            prior_params=critic.init(prior_key, obs, action),
            actor_params=actor_params,
            critic_opt_state=adam_state(critic_params, member.critic_lr),
            actor_opt_state=adam_state(actor_params, member.actor_lr),
        )

    def act(state: State, acting: PosteriorSampling, obs: jax.Array, key: jax.Array) -> jax.Array:
        """Instance n acts greedily with its active head: tanh(head_{active_head[n]}(obs[n])); no noise."""
        del key  # greedy: exploration comes from the heads' diversity alone
        return head_actions(actor, state.actor_params, obs)[acting.active_head, jp.arange(obs.shape[0])]

    def eval_act(state: State, obs: jax.Array) -> jax.Array:
        # As PBAC's (docs/design.md "Posterior sampling and evaluation"): the mean over
        # heads of tanh(head_k(s)).
        return jp.mean(head_actions(actor, state.actor_params, obs), axis=0)

    def update(state: State, batch: Transition, key: jax.Array):
        config = state.config

        # 1. critic (f only; the priors enter Q but receive no gradient)
        y = bootdqn_targets(networks, state, batch, config.gamma)
        mask = jax.random.bernoulli(key, 1.0 - config.bootstrap_rate, y.shape)

        def critic_objective(params):
            q = randomized_prior_q(critic, params, state.prior_params, config.prior_scale, batch.obs, batch.action)
            return bootdqn_critic_loss(q, y, mask, huber_delta=config.huber_delta, loss=config.loss)

        critic_params, critic_opt_state, critic_value, critic_aux = gradient_step(
            critic_objective, state.critic_params, state.critic_opt_state, decay(config)
        )

        # 2. actor: head k scored by (the just updated) Q_k = f_k + beta p_k
        def actor_objective(params):
            action = head_actions(actor, params, batch.obs)
            q = randomized_prior_q(critic, critic_params, state.prior_params, config.prior_scale, batch.obs, action)
            return -jp.mean(q), None

        actor_params, actor_opt_state, actor_value, _ = gradient_step(
            actor_objective, state.actor_params, state.actor_opt_state, decay(config)
        )

        # 3. Polyak (f only)
        new_state = state.replace(
            critic_params=critic_params,
            target_critic_params=polyak(state.target_critic_params, critic_params, config.tau),
            actor_params=actor_params,
            critic_opt_state=critic_opt_state,
            actor_opt_state=actor_opt_state,
        )
        zero = jp.zeros((), critic_value.dtype)  # no entropy term: alpha and entropy report 0
        return new_state, update_metrics(critic_value, critic_aux, actor_value, zero, zero, y)

    def critic_values(state: State, obs: jax.Array, action: jax.Array) -> jax.Array:
        return randomized_prior_q(critic, state.critic_params, state.prior_params, state.config.prior_scale, obs, action)

    return make_algorithm(
        init=init,
        act=act,
        eval_act=eval_act,
        update=update,
        acting=posterior_sampling(config.num_critics, target_heads=False),
        critic_values=critic_values,
        head_actions=lambda state, obs: head_actions(actor, state.actor_params, obs),
    )
