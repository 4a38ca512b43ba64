"""TD3 (Fujimoto et al. 2018, "Addressing Function Approximation Error in Actor-Critic Methods"):
the example of docs/algorithms.md "Adding an algorithm". Not one of the paper's baselines.

Shapes: K = 2 critics, B samples of the minibatch, A action dimensions. Networks are PBAC's
(critic ensemble, single-head deterministic tanh actor), with target copies of both.

Targets (no gradient), with target policy smoothing and the clipped double-Q minimum:

    a'_i = clip(pibar(s'_i) + clip(eps_i, -c, c), -1, 1),   eps_i ~ N(0, target_noise^2)
    y_i  = r_i + gamma (1 - terminated_i) min_k Qbar_k(s'_i, a'_i)           (truncation bootstraps)

Critic loss: sum_k mean_i (Q_k(s_i, a_i) - y_i)^2 (TD3's MSE per critic, summed), one Adam step.

Delayed policy updates: every `policy_delay`-th gradient step (the 1st, the (d+1)-th, ...) the
actor takes one Adam step on -mean_i Q_1(s_i, pi(s_i)) with the just-updated first critic, and the
target actor and critics move by Polyak averaging; on the other steps they stay as they are. Both
branches are computed and one is selected, so the program has no data-dependent control flow.

Acting: a = clip(pi(s) + N(0, exploration_noise^2), -1, 1); evaluation: pi(s).
"""

from __future__ import annotations

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
    traced,
    update_metrics,
    weight_decay_rule,
)
from mjx_pbac.networks import LayerNormChoice, make_actor, make_critic_ensemble
from mjx_pbac.replay import Transition
from mjx_pbac.schema import check_actor_critic, check_numbers, check_positive, require


@algorithm_config
class Config:
    """TD3's hyperparameters (Fujimoto et al. 2018's defaults), with PBAC's networks."""

    hidden_sizes: tuple[int, ...] = (256, 256)
    """Widths of the Dense layers of every MLP (LayerNorm + CReLU after each)."""
    gamma: float = knob(0.99)
    """Discount factor."""
    policy_delay: int = 2
    """d: the actor and the targets are updated every d-th gradient step."""
    tau: float = knob(0.005)
    """Polyak rate of the target actor and critics."""
    exploration_noise: float = knob(0.1)
    """Standard deviation of the Gaussian noise added to the actor's action when exploring."""
    target_noise: float = knob(0.2)
    """Standard deviation of the target policy smoothing noise."""
    target_noise_clip: float = knob(0.5)
    """c: the smoothing noise is clipped to [-c, c]."""
    critic_lr: float = knob(3e-4)
    """Adam learning rate of the critics."""
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
        check_actor_critic(self)
        require(self.policy_delay >= 1, f"policy_delay must be >= 1, got {self.policy_delay}")
        for name in ("exploration_noise", "target_noise", "target_noise_clip"):
            require(getattr(self, name) >= 0, f"{name} must be >= 0, got {getattr(self, name)}")
        check_positive(self, "critic_lr", "actor_lr")


@struct.dataclass
class State:
    config: Config
    """This member's config (knobs traced)."""
    critic_params: dict
    """Two critics, leading axis 2."""
    target_critic_params: dict
    actor_params: dict
    target_actor_params: dict
    critic_opt_state: optax.OptState
    actor_opt_state: optax.OptState
    steps: jax.Array
    """Gradient steps taken (int32), for the policy delay."""


def td3_targets(
    reward: jax.Array, terminated: jax.Array, next_q: jax.Array, *, gamma: float
) -> jax.Array:
    """y[i] = r_i + gamma (1 - terminated_i) min_k next_q[k, i] for next_q [K, B] at the smoothed
    target action."""
    no_entropy = jp.zeros_like(reward)
    return losses.bellman_targets(reward, terminated, jp.min(next_q, axis=0)[None], no_entropy, gamma=gamma, alpha=0.0)[0]


def make(config: Config, obs_size: int, action_size: int) -> Algorithm:
    critic = make_critic_ensemble(2, config.hidden_sizes, layer_norm=config.layer_norm)
    actor = make_actor(1, config.hidden_sizes, action_size, deterministic=True, layer_norm=config.layer_norm)
    decay = weight_decay_rule(config)

    def policy(params: dict, obs: jax.Array) -> jax.Array:
        return jp.tanh(actor.apply(params, obs)[0][0])  # [B, A]

    def init(key: jax.Array, member: Config) -> State:
        member = traced(member)
        critic_key, actor_key = jax.random.split(key)
        obs, action = jp.zeros((1, obs_size)), jp.zeros((1, action_size))
        critic_params = critic.init(critic_key, obs, action)
        actor_params = actor.init(actor_key, obs)
        return State(
            config=member,
            critic_params=critic_params,
            target_critic_params=jax.tree.map(jp.copy, critic_params),
            actor_params=actor_params,
            target_actor_params=jax.tree.map(jp.copy, actor_params),
            critic_opt_state=adam_state(critic_params, member.critic_lr),
            actor_opt_state=adam_state(actor_params, member.actor_lr),
            steps=jp.zeros((), jp.int32),
        )

    def act(state: State, obs: jax.Array, key: jax.Array) -> jax.Array:
        action = policy(state.actor_params, obs)
        noise = state.config.exploration_noise * jax.random.normal(key, action.shape, action.dtype)
        return jp.clip(action + noise, -1.0, 1.0)

    def eval_act(state: State, obs: jax.Array) -> jax.Array:
        return policy(state.actor_params, obs)

    def update(state: State, batch: Transition, key: jax.Array):
        config = state.config

        # 1. critics, against the smoothed target action
        clip = config.target_noise_clip
        noise = jp.clip(config.target_noise * jax.random.normal(key, batch.action.shape), -clip, clip)
        next_action = jp.clip(policy(state.target_actor_params, batch.next_obs) + noise, -1.0, 1.0)
        next_q = critic.apply(state.target_critic_params, batch.next_obs, next_action)
        y = jax.lax.stop_gradient(td3_targets(batch.reward, batch.terminated, next_q, gamma=config.gamma))

        def critic_objective(params):
            q = critic.apply(params, batch.obs, batch.action)
            td = q - y[None, :]
            return jp.sum(jp.mean(jp.square(td), axis=1)), {"q_mean": jp.mean(q), "td_abs": jp.mean(jp.abs(td))}

        critic_params, critic_opt_state, critic_value, critic_aux = gradient_step(
            critic_objective, state.critic_params, state.critic_opt_state, decay(config)
        )

        # 2. delayed actor and targets: computed every step, kept every policy_delay-th
        def actor_objective(params):
            q = critic.apply(critic_params, batch.obs, policy(params, batch.obs))
            return -jp.mean(q[0]), None

        actor_params, actor_opt_state, actor_value, _ = gradient_step(
            actor_objective, state.actor_params, state.actor_opt_state, decay(config)
        )
        delayed = (
            actor_params,
            actor_opt_state,
            polyak(state.target_actor_params, actor_params, config.tau),
            polyak(state.target_critic_params, critic_params, config.tau),
        )
        kept = (state.actor_params, state.actor_opt_state, state.target_actor_params, state.target_critic_params)
        now = state.steps % config.policy_delay == 0
        actor_params, actor_opt_state, target_actor_params, target_critic_params = jax.tree.map(
            lambda new, old: jp.where(now, new, old), delayed, kept
        )

        new_state = state.replace(
            critic_params=critic_params,
            target_critic_params=target_critic_params,
            actor_params=actor_params,
            target_actor_params=target_actor_params,
            critic_opt_state=critic_opt_state,
            actor_opt_state=actor_opt_state,
            steps=state.steps + 1,
        )
        zero = jp.zeros((), critic_value.dtype)  # deterministic: alpha and entropy report 0
        return new_state, update_metrics(critic_value, critic_aux, actor_value, zero, zero, y)

    return make_algorithm(
        init=init,
        act=act,
        eval_act=eval_act,
        update=update,
        critic_values=lambda state, obs, action: critic.apply(state.critic_params, obs, action),
        head_actions=lambda state, obs: policy(state.actor_params, obs)[None],
    )
