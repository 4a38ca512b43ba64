"""PBAC (paper Algorithm 1 with the soft actor of its appendix; SPEC 2.1-2.4) as an `Algorithm`.

One gradient step, in this order (SPEC 2.3):
1. critic: Bellman targets from the target critics at a' ~ pi_j(s') with j the target head, a fresh
   bootstrap mask b ~ Bernoulli(1 - kappa)^{K x B}, `pbac_critic_loss`, one Adam step over all K;
2. actor: head k against critic k (`soft_actor_loss`), gradients reach only the actor;
3. temperature (soft actor only): `temperature_loss` with H_target = -action_size;
4. Polyak averaging of the target critics.

Beyond the paper, `prior_scale` beta > 0 gives every critic a fixed random prior network, as
BootDQN-P's (Osband et al. 2018): Q_k = f_k + beta p_k and Qbar_k = fbar_k + beta p_k, with p_k
never trained nor averaged. beta = 0 (the default) builds no priors: the paper's PBAC.
"""

from __future__ import annotations


import jax
import jax.numpy as jp
import optax
from flax import struct

from mjx_pbac import losses
from mjx_pbac.algorithm import Algorithm, traced_hyperparams, update_metrics
from mjx_pbac.config import PBACConfig
from mjx_pbac.networks import Actor, make_actor, make_critic_ensemble, squashed_gaussian_sample
from mjx_pbac.optim import adam_step, polyak, temperature_step
from mjx_pbac.replay import Transition


@struct.dataclass
class PBACHyper:
    """The numeric knobs that may differ between members of one vmapped run (a sweep): traced
    scalars, so one compiled program serves every value."""

    bootstrap_rate: jax.Array
    prior_variance: jax.Array
    tau: jax.Array
    critic_lr: jax.Array
    actor_lr: jax.Array
    alpha_lr: jax.Array
    use_diversity: jax.Array
    use_coherence: jax.Array
    use_propagation: jax.Array
    prior_scale: jax.Array

    @classmethod
    def of(cls, config: PBACConfig) -> "PBACHyper":
        return traced_hyperparams(cls, config)


@struct.dataclass
class PBACState:
    hyper: PBACHyper
    """This member's hyperparameters (see `PBACHyper`)."""
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


def make_pbac(config: PBACConfig, obs_size: int, action_size: int, prior_networks: bool | None = None) -> Algorithm:
    """PBAC at `config`; `prior_networks` (default: config.prior_scale != 0) builds the critics'
    fixed random priors, which a sweep over prior_scale needs when the base value is 0."""
    prior_networks = config.prior_scale != 0 if prior_networks is None else prior_networks
    critic = make_critic_ensemble(config.num_critics, config.hidden_sizes)
    actor = make_actor(config.num_critics, config.hidden_sizes, action_size, config.actor == "deterministic")
    soft = config.actor == "soft"
    # Adam without its learning rate, which comes from the member's `PBACHyper` at each step.
    critic_opt = actor_opt = alpha_opt = optax.scale_by_adam()
    target_entropy = -float(action_size)

    def q_values(params: dict, priors: dict | None, hyper: PBACHyper, obs: jax.Array, action: jax.Array) -> jax.Array:
        """Q_k [K, B] at obs [B, o] and action [B, a] (every critic at the same action) or
        [K, B, a] (critic k at action[k]); plus beta p_k when priors are built (no gradient)."""
        apply = critic.apply if action.ndim == 2 else critic.apply_per_member
        q = apply(params, obs, action)
        if priors is not None:
            q = q + hyper.prior_scale * apply(jax.lax.stop_gradient(priors), obs, action)
        return q

    def init(key: jax.Array, hyper: PBACHyper | None = None) -> PBACState:
        """Parameters, targets and optimiser states; `hyper` defaults to the config's values."""
        hyper = PBACHyper.of(config) if hyper is None else hyper
        critic_key, actor_key = jax.random.split(key)
        obs, action = jp.zeros((1, obs_size)), jp.zeros((1, action_size))
        critic_params = critic.init(critic_key, obs, action)
        # The priors' key is folded from the critics' so that a run without priors draws exactly
        # the parameters it drew before priors existed.
        prior_params = critic.init(jax.random.fold_in(critic_key, 1), obs, action) if prior_networks else None
        actor_params = actor.init(actor_key, obs)
        log_alpha = jp.asarray(config.init_log_alpha, jp.float32)  # unused by tanh heads
        return PBACState(
            hyper=hyper,
            critic_params=critic_params,
            target_critic_params=jax.tree.map(jp.copy, critic_params),
            prior_params=prior_params,
            actor_params=actor_params,
            log_alpha=log_alpha,
            critic_opt_state=critic_opt.init(critic_params),
            actor_opt_state=actor_opt.init(actor_params),
            alpha_opt_state=alpha_opt.init(log_alpha),
        )

    def alpha_of(state: PBACState) -> jax.Array:
        return jp.exp(state.log_alpha) if soft else jp.zeros(())

    def act(state: PBACState, obs: jax.Array, active_head: jax.Array, key: jax.Array) -> jax.Array:
        outputs = actor.apply(state.actor_params, obs)  # each [K, N, A]
        rows = jp.arange(obs.shape[0])
        action, _ = policy_sample(actor, key, tuple(o[active_head, rows] for o in outputs))
        return action

    def eval_act(state: PBACState, obs: jax.Array) -> jax.Array:
        # SPEC 2.4: the mean over heads of tanh(mean_k(s)).
        return jp.mean(jp.tanh(actor.apply(state.actor_params, obs)[0]), axis=0)

    def update(state: PBACState, batch: Transition, key: jax.Array, target_head: jax.Array):
        next_key, mask_key, actor_key = jax.random.split(key, 3)
        alpha = alpha_of(state)

        # 1. critic
        next_outputs = actor.apply(state.actor_params, batch.next_obs)
        next_action, next_log_prob = policy_sample(actor, next_key, tuple(o[target_head] for o in next_outputs))
        hyper = state.hyper
        next_q = q_values(state.target_critic_params, state.prior_params, hyper, batch.next_obs, next_action)
        y = losses.bellman_targets(
            batch.reward, batch.terminated, next_q, next_log_prob, gamma=config.gamma, alpha=alpha
        )
        mask = jax.random.bernoulli(mask_key, 1.0 - hyper.bootstrap_rate, y.shape)

        def critic_objective(params):
            return losses.pbac_critic_loss(
                q_values(params, state.prior_params, hyper, batch.obs, batch.action),
                y,
                mask,
                gamma=config.gamma,
                prior_variance=hyper.prior_variance,
                form=config.loss_form,
                use_diversity=hyper.use_diversity,
                use_coherence=hyper.use_coherence,
                use_propagation=hyper.use_propagation,
            )

        (critic_value, critic_aux), critic_grads = jax.value_and_grad(critic_objective, has_aux=True)(
            state.critic_params
        )
        critic_params, critic_opt_state = adam_step(
            critic_opt, critic_grads, state.critic_opt_state, state.critic_params, hyper.critic_lr
        )

        # 2. actor: head k scored by (the just updated) critic k
        def actor_objective(params):
            action, log_prob = policy_sample(actor, actor_key, actor.apply(params, batch.obs))
            q = q_values(critic_params, state.prior_params, hyper, batch.obs, action)
            return losses.soft_actor_loss(q, log_prob, alpha), log_prob

        (actor_value, log_prob), actor_grads = jax.value_and_grad(actor_objective, has_aux=True)(state.actor_params)
        actor_params, actor_opt_state = adam_step(
            actor_opt, actor_grads, state.actor_opt_state, state.actor_params, hyper.actor_lr
        )

        # 3. temperature
        log_alpha, alpha_opt_state = state.log_alpha, state.alpha_opt_state
        if soft:
            log_alpha, alpha_opt_state = temperature_step(
                alpha_opt, state.alpha_opt_state, state.log_alpha, log_prob, target_entropy, hyper.alpha_lr
            )

        # 4. Polyak
        target_critic_params = polyak(state.target_critic_params, critic_params, hyper.tau)
        new_state = PBACState(
            hyper=hyper,
            critic_params=critic_params,
            target_critic_params=target_critic_params,
            prior_params=state.prior_params,
            actor_params=actor_params,
            log_alpha=log_alpha,
            critic_opt_state=critic_opt_state,
            actor_opt_state=actor_opt_state,
            alpha_opt_state=alpha_opt_state,
        )
        metrics = update_metrics(critic_value, critic_aux, actor_value, alpha, log_prob, y)
        return new_state, metrics

    def critic_values(state: PBACState, obs: jax.Array, action: jax.Array) -> jax.Array:
        return q_values(state.critic_params, state.prior_params, state.hyper, obs, action)

    def head_actions(state: PBACState, obs: jax.Array) -> jax.Array:
        return jp.tanh(actor.apply(state.actor_params, obs)[0])  # tanh of each head's mean

    return Algorithm(
        num_heads=config.num_critics,
        hyperparams=PBACHyper.of,
        init=init,
        act=act,
        eval_act=eval_act,
        update=update,
        critic_values=critic_values,
        head_actions=head_actions,
    )
