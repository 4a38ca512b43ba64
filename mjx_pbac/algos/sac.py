"""SAC, the paper's baseline (section 4; appendix "Baselines"): PBAC's networks, loop and buffer with
K = 2 critics whose minimum forms both the targets and the actor's objective, a learned
temperature and a Huber TD loss.

Shapes: K critics (2), B samples of the minibatch, A action dimensions. The actor is PBAC's
squashed-Gaussian actor with a single head (`make_actor(1, ...)`, outputs [1, B, A]).

Targets (no gradient), with a' ~ pi(.|s'_i) and Qbar_k the Polyak-averaged target critics:

    y[i] = r_i + gamma (1 - terminated_i) (min_k Qbar_k(s'_i, a'_i) - alpha log pi(a'_i | s'_i))  [B]

Truncation does not stop the bootstrap (docs/design.md "Training defaults").

Critic loss, with q[k, i] = Q_k(s_i, a_i) at the replay action and one target shared by all K:

    huber_delta(x) = x^2 / 2                      for |x| <= delta
                   = delta (|x| - delta / 2)      otherwise    (PyTorch's HuberLoss(delta))
    L_Q = mean_{k,i} huber_delta(q[k, i] - y[i])

i.e. the mean over critics as well as over the batch (PyTorch's default `reduction="mean"` on the
stacked [K, B] q); summing over the critics instead only scales the gradient by K, which Adam
all but cancels.

Actor loss, with a~_i ~ pi(.|s_i) reparameterised and the just-updated critics (gradient to the
actor only):

    L_pi = mean_i [alpha log pi(a~_i | s_i) - min_k Q_k(s_i, a~_i)]

Temperature as PBAC's: -log_alpha * mean(stop_grad(log pi + H_target)), H_target =
target_entropy_scale * A (-1 by default: Haarnoja et al.'s -A).
Order per gradient step: critic, actor, temperature, Polyak.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jp
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
    temperature_step,
    traced,
    update_metrics,
    weight_decay_rule,
)
from mjx_pbac.losses import huber
from mjx_pbac.networks import LayerNormChoice, make_actor, make_critic_ensemble, squashed_gaussian_sample
from mjx_pbac.replay import Transition
from mjx_pbac.schema import check_actor_critic, check_numbers, check_positive, require


@algorithm_config
class Config:
    """SAC as the paper's baseline: K = 2 critics, the min over them for targets and actor, a
    learned temperature, Huber TD loss; PBAC's networks and optimiser settings."""

    num_critics: int = 2
    """Critics whose minimum forms targets and the actor's objective."""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """Widths of the Dense layers of every MLP (LayerNorm + CReLU after each)."""
    gamma: float = knob(0.99)
    """Discount factor."""
    tau: float = knob(0.005)
    """Polyak rate of the target critics."""
    huber_delta: float = 1.0
    """Huber loss threshold of the TD error (the paper applied Huber to the baselines)."""
    critic_lr: float = knob(3e-4)
    """Adam learning rate of the critics."""
    actor_lr: float = knob(3e-4)
    """Adam learning rate of the actor."""
    alpha_lr: float = knob(3e-4)
    """Adam learning rate of log alpha."""
    init_log_alpha: float = 0.0
    """Initial log temperature."""
    target_entropy_scale: float = -1.0
    """The temperature's target entropy per action dimension: H_target = target_entropy_scale * A
    (Haarnoja et al.'s heuristic, -A, by default)."""
    weight_decay: float = knob(0.0)
    """AdamW's decoupled weight decay of the critics' and the actor's parameters, per unit of
    learning rate (`base.gradient_step`); 0 is Adam, the paper's (docs/design.md "Recipe options
    beyond the paper")."""
    layer_norm: LayerNormChoice = "plain"
    """Normalisation of every hidden layer (`networks.MLP`): "plain" the paper's LayerNorm without
    scale and bias, "affine" with a learned scale and bias, "none" without LayerNorm."""

    def __post_init__(self) -> None:
        check_numbers(self)  # a subclass's own fields too (DRND's)
        require(self.num_critics >= 1, f"num_critics must be >= 1, got {self.num_critics}")
        check_actor_critic(self)
        require(self.huber_delta > 0, f"huber_delta must be > 0, got {self.huber_delta}")
        check_positive(self, "critic_lr", "actor_lr", "alpha_lr")


def sac_critic_loss(
    q: jax.Array, y: jax.Array, *, huber_delta: float | jax.Array
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """mean_{k,i} huber(q[k, i] - y[i]) for q [K, B] and the shared target y [B] (no gradient).

    Returns (loss, aux) with aux `q_mean` (mean q), `q_spread` (standard deviation of q over the
    critics, averaged over the batch) and `td_abs` (mean |q - y|).
    """
    if q.ndim != 2 or y.shape != q.shape[1:]:
        raise ValueError(f"q must be [K, B] and y [B]; got {q.shape} and {y.shape}")
    td_error = q - jax.lax.stop_gradient(y)[None, :]
    loss = jp.mean(huber(td_error, huber_delta))
    aux = {
        "q_mean": jp.mean(q),
        "q_spread": jp.mean(jp.std(q, axis=0)),
        "td_abs": jp.mean(jp.abs(td_error)),
    }
    return loss, aux


def sac_targets(
    reward: jax.Array,
    terminated: jax.Array,
    next_q: jax.Array,
    next_log_prob: jax.Array,
    *,
    gamma: float,
    alpha: jax.Array | float,
    next_bonus: jax.Array | float = 0.0,
) -> jax.Array:
    """y[i] = r_i + gamma (1 - terminated_i) (min_k next_q[k, i] - alpha next_log_prob[i] + next_bonus[i]).

    reward, terminated, next_log_prob: [B]; next_q: [K, B] from the target critics at a' ~ pi(s');
    next_bonus: [B] or a scalar, an extra term of the next state's value (DRND's signed bonus).
    """
    min_next_q = jp.min(next_q, axis=0) + next_bonus  # [B]
    return losses.bellman_targets(reward, terminated, min_next_q[None], next_log_prob, gamma=gamma, alpha=alpha)[0]


def target_entropy(config: Config, action_size: int) -> float:
    """H_target = target_entropy_scale * A for A action dimensions."""
    return float(config.target_entropy_scale) * float(action_size)


@struct.dataclass
class State:
    config: Config
    """This member's config (knobs traced)."""
    critic_params: dict
    """K critics, leading axis K."""
    target_critic_params: dict
    actor_params: dict
    """Single-head squashed-Gaussian actor."""
    log_alpha: jax.Array
    critic_opt_state: optax.OptState
    actor_opt_state: optax.OptState
    alpha_opt_state: optax.OptState


Bonus = Callable[[Any, jax.Array, jax.Array], jax.Array]
"""bonus(state, obs[B, o], action[B, a]) -> [B]: an extra term of a state-action pair's value
(DRND passes its signed novelty bonus)."""


def make(
    config: Config,
    obs_size: int,
    action_size: int,
    next_bonus: Bonus | None = None,
    actor_bonus: Bonus | None = None,
) -> Algorithm:
    """SAC; with `next_bonus`, its value at (s', a') is added to the next state's value in the
    targets (no gradient) and its mean reported as `target_bonus_mean`; with `actor_bonus`, its
    value at the actor's sample (s, a~) is added to what the actor maximises,
    L_pi = mean_i [alpha log pi(a~_i | s_i) - min_k Q_k(s_i, a~_i) - actor_bonus(s_i, a~_i)],
    with the gradient reaching the actor through a~, and its mean reported as
    `actor_bonus_mean`. This is how DRND builds on SAC. The state may be any subclass of
    `State` (DRND's): `update` passes extra fields through."""
    critic = make_critic_ensemble(config.num_critics, config.hidden_sizes, layer_norm=config.layer_norm)
    actor = make_actor(1, config.hidden_sizes, action_size, deterministic=False, layer_norm=config.layer_norm)
    decay = weight_decay_rule(config)
    entropy_target = target_entropy(config, action_size)

    def policy(params, obs, key):
        """(action [B, A], log_prob [B]) sampled from the single head."""
        mean, log_std = actor.apply(params, obs)  # each [1, B, A]
        return squashed_gaussian_sample(key, mean[0], log_std[0])

    def init(key: jax.Array, member: Config) -> State:
        """Parameters, targets and optimiser states of a member with config `member`."""
        member = traced(member)
        critic_key, actor_key = jax.random.split(key)
        obs, action = jp.zeros((1, obs_size)), jp.zeros((1, action_size))
        critic_params = critic.init(critic_key, obs, action)
        actor_params = actor.init(actor_key, obs)
        log_alpha = jp.asarray(member.init_log_alpha, jp.float32)
        return State(
            config=member,
            critic_params=critic_params,
            target_critic_params=jax.tree.map(jp.copy, critic_params),
            actor_params=actor_params,
            log_alpha=log_alpha,
            critic_opt_state=adam_state(critic_params, member.critic_lr),
            actor_opt_state=adam_state(actor_params, member.actor_lr),
            alpha_opt_state=adam_state(log_alpha, member.alpha_lr),
        )

    def act(state: State, obs: jax.Array, key: jax.Array) -> jax.Array:
        action, _ = policy(state.actor_params, obs, key)
        return action

    def eval_act(state: State, obs: jax.Array) -> jax.Array:
        return jp.tanh(actor.apply(state.actor_params, obs)[0][0])

    def update(state: State, batch: Transition, key: jax.Array):
        next_key, actor_key = jax.random.split(key)
        config = state.config
        alpha = jp.exp(state.log_alpha)

        # 1. critic
        next_action, next_log_prob = policy(state.actor_params, batch.next_obs, next_key)
        next_q = critic.apply(state.target_critic_params, batch.next_obs, next_action)
        bonus = 0.0 if next_bonus is None else next_bonus(state, batch.next_obs, next_action)
        y = sac_targets(
            batch.reward, batch.terminated, next_q, next_log_prob, gamma=config.gamma, alpha=alpha, next_bonus=bonus
        )

        def critic_objective(params):
            q = critic.apply(params, batch.obs, batch.action)
            return sac_critic_loss(q, y, huber_delta=config.huber_delta)

        critic_params, critic_opt_state, critic_value, critic_aux = gradient_step(
            critic_objective, state.critic_params, state.critic_opt_state, decay(config)
        )

        # 2. actor against the min over the (just updated) critics
        def actor_objective(params):
            action, log_prob = policy(params, batch.obs, actor_key)
            min_q = jp.min(critic.apply(critic_params, batch.obs, action), axis=0)
            extra = jp.zeros_like(min_q) if actor_bonus is None else actor_bonus(state, batch.obs, action)
            return losses.soft_actor_loss(min_q + extra, log_prob, alpha), (log_prob, extra)

        actor_params, actor_opt_state, actor_value, (log_prob, actor_extra) = gradient_step(
            actor_objective, state.actor_params, state.actor_opt_state, decay(config)
        )

        # 3. temperature
        log_alpha, alpha_opt_state = temperature_step(state.log_alpha, state.alpha_opt_state, log_prob, entropy_target)

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
        metrics = update_metrics(critic_value, critic_aux, actor_value, alpha, log_prob, y)
        if next_bonus is not None:
            metrics["target_bonus_mean"] = jp.mean(bonus)
        if actor_bonus is not None:
            metrics["actor_bonus_mean"] = jp.mean(actor_extra)
        return new_state, metrics

    return make_algorithm(
        init=init,
        act=act,
        eval_act=eval_act,
        update=update,
        critic_values=lambda state, obs, action: critic.apply(state.critic_params, obs, action),
        head_actions=lambda state, obs: eval_act(state, obs)[None],
    )
