"""PBAC: PAC-Bayesian Actor-Critic (paper section 3.2, Eq. (critic_loss), Algorithm 1; the soft
actor of section 3.3).

One gradient step, in this order (Algorithm 1, after the minibatch is sampled):
1. critic: Bellman targets from the target critics at a' ~ pi_j(s') with j the target head (the
   instance's active head: section 3.3, "the Bellman targets are computed with the active behavior
   policy"), a fresh bootstrap mask b ~ Bernoulli(1 - kappa)^{K x B}, `losses.pbac_critic_loss`
   (Eq. (critic_loss)), one Adam step over all K critics;
2. actor: head k against critic k (`losses.soft_actor_loss`, section 3.3's empirical objective
   with SAC's entropy term); gradients reach only the actor;
3. temperature (soft actor only): `losses.temperature_loss` with H_target = -action_size;
4. Polyak averaging of the target critics.

Acting: posterior sampling (section 3.3; Algorithm 1's PSR lines), as `base.posterior_sampling`;
evaluation acts with the mean over heads of tanh(mean_k(s)) (docs/design.md "Posterior sampling and evaluation").

Beyond the paper, `prior_scale` beta > 0 gives every critic a fixed random prior network, as
BootDQN-P's (Osband et al. 2018): Q_k = f_k + beta p_k and Qbar_k = fbar_k + beta p_k, with p_k
never trained nor averaged. beta = 0 (the default) builds no priors: the paper's PBAC.
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jp
import numpy as np
import optax
from flax import struct

from mjx_pbac import losses
from mjx_pbac.algos.base import (
    Algorithm,
    adam_state,
    algorithm_config,
    gradient_step,
    knob,
    make_algorithm,
    polyak,
    posterior_sampling,
    temperature_step,
    traced,
    update_metrics,
    weight_decay_rule,
)
from mjx_pbac.networks import Actor, LayerNormChoice, make_actor, make_critic_ensemble, squashed_gaussian_sample
from mjx_pbac.replay import Transition
from mjx_pbac.schema import check_actor_critic, check_choice, check_numbers, check_positive, require


@algorithm_config
class Config:
    """PBAC's hyperparameters (paper Tables 5, 7 and 8; the per-task values of Table 5 are in the
    profiles)."""

    num_critics: int = 10
    """K: critics in the ensemble and heads of the actor."""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """Widths of the Dense layers of every MLP (each followed by LayerNorm and CReLU, which doubles it)."""
    gamma: float = knob(0.99)
    """Discount factor."""
    tau: float = knob(0.005)
    """Polyak rate of the target critics."""
    bootstrap_rate: float = knob(0.05)
    """kappa: each (critic, sample) pair is masked out with this probability, drawn per gradient step."""
    posterior_sampling_rate: int = knob(5)
    """PSR: an instance redraws its active head every PSR env steps (and at every episode start)."""
    prior_variance: float = knob(1.0)
    """sigma0^2 of the coherence term."""
    loss_form: Literal["reference", "paper"] = "reference"
    """Critic loss as the authors' code computes it, or as the paper prints it (docs/design.md "Critic loss")."""
    use_diversity: bool = knob(True)
    """Keep the diversity (masked TD) term of the critic loss."""
    use_coherence: bool = knob(True)
    """Keep the coherence (pull to the ensemble-mean target) term."""
    use_propagation: bool = knob(True)
    """Keep the propagation (log ensemble variance) term."""
    actor: Literal["soft", "deterministic"] = "soft"
    """Squashed-Gaussian heads with a learned temperature, or tanh heads with no entropy."""
    critic_lr: float = knob(3e-4)
    """Adam learning rate of the critic ensemble (one optimiser over all K)."""
    actor_lr: float = knob(3e-4)
    """Adam learning rate of the actor (trunk and heads)."""
    alpha_lr: float = knob(3e-4)
    """Adam learning rate of log alpha."""
    init_log_alpha: float = 0.0
    """Initial log temperature."""
    prior_scale: float = knob(0.0)
    """beta: beyond the paper, each critic gets a fixed random prior network as BootDQN-P's,
    Q_k = f_k + beta p_k; 0 (the paper's PBAC) builds none."""
    weight_decay: float = knob(0.0)
    """AdamW's decoupled weight decay of the critics' and the actor's parameters, per unit of
    learning rate (`base.gradient_step`); 0 is Adam, the paper's (docs/design.md "Recipe options
    beyond the paper")."""
    layer_norm: LayerNormChoice = "plain"
    """Normalisation of every hidden layer (`networks.MLP`): "plain" the paper's LayerNorm without
    scale and bias, "affine" with a learned scale and bias, "none" without LayerNorm."""

    def __post_init__(self) -> None:
        check_numbers(self)
        require(self.num_critics >= 2, f"num_critics must be >= 2 (the loss needs an ensemble variance), got {self.num_critics}")
        require(self.prior_scale >= 0, f"prior_scale must be >= 0, got {self.prior_scale}")
        check_actor_critic(self)
        require(0.0 <= self.bootstrap_rate < 1.0, f"bootstrap_rate must lie in [0, 1), got {self.bootstrap_rate}")
        require(self.posterior_sampling_rate >= 1, f"posterior_sampling_rate must be >= 1, got {self.posterior_sampling_rate}")
        require(self.prior_variance > 0, f"prior_variance must be > 0, got {self.prior_variance}")
        check_choice(self, "loss_form")
        check_choice(self, "actor")
        require(
            self.use_diversity or self.use_coherence or self.use_propagation,
            "at least one of use_diversity, use_coherence, use_propagation must be true",
        )
        check_positive(self, "critic_lr", "actor_lr", "alpha_lr")


@struct.dataclass
class State:
    config: Config
    """This member's config (knobs traced)."""
    critic_params: dict
    """K critics, leading axis K."""
    target_critic_params: dict
    prior_params: dict | None
    """K fixed random prior networks (leading axis K) when built (`prior_scale` != 0), else None."""
    actor_params: dict
    log_alpha: jax.Array
    critic_opt_state: optax.OptState
    actor_opt_state: optax.OptState
    alpha_opt_state: optax.OptState


def policy_sample(actor: Actor, key: jax.Array, head_outputs: tuple) -> tuple[jax.Array, jax.Array]:
    """(action, log_prob) from head outputs of any leading shape; log_prob is 0 for tanh heads."""
    if actor.deterministic:
        (pre_tanh,) = head_outputs
        return jp.tanh(pre_tanh), jp.zeros(pre_tanh.shape[:-1], pre_tanh.dtype)
    mean, log_std = head_outputs
    return squashed_gaussian_sample(key, mean, log_std)


def make(config: Config, obs_size: int, action_size: int) -> Algorithm:
    """PBAC for members whose configs are `config` (a member's, or all members' stacked: the
    critics' fixed priors are built when any member has prior_scale != 0)."""
    prior_networks = bool(np.any(np.asarray(config.prior_scale) != 0))
    critic = make_critic_ensemble(config.num_critics, config.hidden_sizes, layer_norm=config.layer_norm)
    actor = make_actor(config.num_critics, config.hidden_sizes, action_size, config.actor == "deterministic", config.layer_norm)
    decay = weight_decay_rule(config)
    soft = config.actor == "soft"
    target_entropy = -float(action_size)

    def q_values(params: dict, priors: dict | None, config: Config, obs: jax.Array, action: jax.Array) -> jax.Array:
        """Q_k [K, B] at obs [B, o] and action [B, a] (every critic at the same action) or
        [K, B, a] (critic k at action[k]); plus beta p_k when priors are built (no gradient)."""
        apply = critic.apply if action.ndim == 2 else critic.apply_per_member
        q = apply(params, obs, action)
        if priors is not None:
            q = q + config.prior_scale * apply(jax.lax.stop_gradient(priors), obs, action)
        return q

    def init(key: jax.Array, member: Config) -> State:
        """Parameters, targets and optimiser states of a member with config `member`."""
        member = traced(member)
        critic_key, actor_key = jax.random.split(key)
        obs, action = jp.zeros((1, obs_size)), jp.zeros((1, action_size))
        critic_params = critic.init(critic_key, obs, action)
        # The priors' key is folded from the critics' so that a run without priors draws exactly
        # the parameters it drew before priors existed.
        prior_params = critic.init(jax.random.fold_in(critic_key, 1), obs, action) if prior_networks else None
        actor_params = actor.init(actor_key, obs)
        log_alpha = jp.asarray(member.init_log_alpha, jp.float32)  # unused by tanh heads
        return State(
            config=member,
            critic_params=critic_params,
            target_critic_params=jax.tree.map(jp.copy, critic_params),
            prior_params=prior_params,
            actor_params=actor_params,
            log_alpha=log_alpha,
            critic_opt_state=adam_state(critic_params, member.critic_lr),
            actor_opt_state=adam_state(actor_params, member.actor_lr),
            alpha_opt_state=adam_state(log_alpha, member.alpha_lr),
        )

    def alpha_of(state: State) -> jax.Array:
        return jp.exp(state.log_alpha) if soft else jp.zeros(())

    def act(state: State, acting, obs: jax.Array, key: jax.Array) -> jax.Array:
        outputs = actor.apply(state.actor_params, obs)  # each [K, N, A]
        rows = jp.arange(obs.shape[0])
        action, _ = policy_sample(actor, key, tuple(o[acting.active_head, rows] for o in outputs))
        return action

    def eval_act(state: State, obs: jax.Array) -> jax.Array:
        return jp.mean(jp.tanh(actor.apply(state.actor_params, obs)[0]), axis=0)

    def update(state: State, batch: Transition, key: jax.Array, target_head: jax.Array):
        next_key, mask_key, actor_key = jax.random.split(key, 3)
        alpha = alpha_of(state)
        config = state.config

        # 1. critic
        next_outputs = actor.apply(state.actor_params, batch.next_obs)
        next_action, next_log_prob = policy_sample(actor, next_key, tuple(o[target_head] for o in next_outputs))
        next_q = q_values(state.target_critic_params, state.prior_params, config, batch.next_obs, next_action)
        y = losses.bellman_targets(
            batch.reward, batch.terminated, next_q, next_log_prob, gamma=config.gamma, alpha=alpha
        )
        mask = jax.random.bernoulli(mask_key, 1.0 - config.bootstrap_rate, y.shape)

        def critic_objective(params):
            return losses.pbac_critic_loss(
                q_values(params, state.prior_params, config, batch.obs, batch.action),
                y,
                mask,
                gamma=config.gamma,
                prior_variance=config.prior_variance,
                form=config.loss_form,
                use_diversity=config.use_diversity,
                use_coherence=config.use_coherence,
                use_propagation=config.use_propagation,
            )

        critic_params, critic_opt_state, critic_value, critic_aux = gradient_step(
            critic_objective, state.critic_params, state.critic_opt_state, decay(config)
        )

        # 2. actor: head k scored by (the just updated) critic k
        def actor_objective(params):
            action, log_prob = policy_sample(actor, actor_key, actor.apply(params, batch.obs))
            q = q_values(critic_params, state.prior_params, config, batch.obs, action)
            return losses.soft_actor_loss(q, log_prob, alpha), log_prob

        actor_params, actor_opt_state, actor_value, log_prob = gradient_step(
            actor_objective, state.actor_params, state.actor_opt_state, decay(config)
        )

        # 3. temperature
        log_alpha, alpha_opt_state = state.log_alpha, state.alpha_opt_state
        if soft:
            log_alpha, alpha_opt_state = temperature_step(log_alpha, alpha_opt_state, log_prob, target_entropy)

        # 4. Polyak
        new_state = state.replace(
            critic_params=critic_params,
            target_critic_params=polyak(state.target_critic_params, critic_params, config.tau),
            actor_params=actor_params,
            log_alpha=log_alpha,
            critic_opt_state=critic_opt_state,
            actor_opt_state=actor_opt_state,
            alpha_opt_state=alpha_opt_state,
        )
        return new_state, update_metrics(critic_value, critic_aux, actor_value, alpha, log_prob, y)

    def critic_values(state: State, obs: jax.Array, action: jax.Array) -> jax.Array:
        return q_values(state.critic_params, state.prior_params, state.config, obs, action)

    def head_actions(state: State, obs: jax.Array) -> jax.Array:
        return jp.tanh(actor.apply(state.actor_params, obs)[0])  # tanh of each head's mean

    return make_algorithm(
        init=init,
        act=act,
        eval_act=eval_act,
        update=update,
        acting=posterior_sampling(config.num_critics, target_heads=True),
        critic_values=critic_values,
        head_actions=head_actions,
    )
