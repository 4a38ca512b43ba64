"""SAC as the paper's baseline (SPEC 3) as an `Algorithm`: PBAC's networks, loop and buffer with
K = 2 critics whose minimum forms both the targets and the actor's objective, a learned
temperature and a Huber TD loss.

Shapes: K critics (2), B samples of the minibatch, A action dimensions. The actor is PBAC's
squashed-Gaussian actor with a single head (`make_actor(1, ...)`, outputs [1, B, A]).

Targets (no gradient), with a' ~ pi(.|s'_i) and Qbar_k the Polyak-averaged target critics:

    y[i] = r_i + gamma (1 - terminated_i) (min_k Qbar_k(s'_i, a'_i) - alpha log pi(a'_i | s'_i))  [B]

Truncation does not stop the bootstrap (SPEC 2.5).

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

Temperature as PBAC (SPEC 2.3): -log_alpha * mean(stop_grad(log pi + H_target)), H_target = -A.
Order per gradient step: critic, actor, temperature, Polyak.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jp
import optax
from flax import struct

from mjx_pbac import losses
from mjx_pbac.algorithm import Algorithm, traced_hyperparams, update_metrics
from mjx_pbac.config import SACConfig
from mjx_pbac.networks import make_actor, make_critic_ensemble, squashed_gaussian_sample
from mjx_pbac.losses import huber
from mjx_pbac.optim import adam, adam_step, polyak, temperature_step
from mjx_pbac.replay import Transition


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


@struct.dataclass
class SACHyper:
    """The numeric knobs that may differ between members of one vmapped run (a sweep): traced
    scalars, so one compiled program serves every value."""

    tau: jax.Array
    critic_lr: jax.Array
    actor_lr: jax.Array
    alpha_lr: jax.Array

    @classmethod
    def of(cls, config: SACConfig) -> "SACHyper":
        return traced_hyperparams(cls, config)


@struct.dataclass
class SACState:
    hyper: SACHyper
    """This member's hyperparameters (see `SACHyper`)."""
    critic_params: dict
    """K critics, leading axis K."""
    target_critic_params: dict
    actor_params: dict
    """Single-head squashed-Gaussian actor."""
    log_alpha: jax.Array
    critic_opt_state: optax.OptState
    actor_opt_state: optax.OptState
    alpha_opt_state: optax.OptState


NextBonus = Callable[[Any, jax.Array, jax.Array], jax.Array]
"""next_bonus(state, next_obs[B, o], next_action[B, a]) -> [B]: an extra term of the next
state's value in the target (no gradient); DRND passes its signed bonus."""


class SoftActorCritic(NamedTuple):
    """SAC's parts, for `make_sac` and for algorithms built on SAC (DRND). The state may be any
    subclass of `SACState` (extra fields pass through `update` unchanged) and its `hyper` any
    pytree with SACHyper's fields."""

    init_fields: Callable[[jax.Array, Any], dict]
    """init_fields(key, hyper) -> SACState's fields (parameters, targets, optimiser states)."""
    act: Callable
    eval_act: Callable
    update: Callable[..., tuple[Any, dict[str, jax.Array]]]
    """update(state, batch, key, next_bonus=None) -> (state, metrics): one critic, actor,
    temperature and Polyak step."""
    critic_values: Callable
    """critic_values(state, obs, action) -> q [num_critics, B]."""
    head_actions: Callable
    """head_actions(state, obs) -> [1, B, a]: tanh of the policy's mean."""


def make_soft_actor_critic(config: SACConfig, obs_size: int, action_size: int) -> SoftActorCritic:
    critic = make_critic_ensemble(config.num_critics, config.hidden_sizes)
    actor = make_actor(1, config.hidden_sizes, action_size, deterministic=False)
    # Adam without its learning rate, which comes from the member's hyperparameters at each step.
    critic_opt = actor_opt = alpha_opt = adam()
    target_entropy = -float(action_size)

    def policy(params, obs, key):
        """(action [B, A], log_prob [B]) sampled from the single head."""
        mean, log_std = actor.apply(params, obs)  # each [1, B, A]
        return squashed_gaussian_sample(key, mean[0], log_std[0])

    def init_fields(key: jax.Array, hyper: Any) -> dict:
        critic_key, actor_key = jax.random.split(key)
        obs, action = jp.zeros((1, obs_size)), jp.zeros((1, action_size))
        critic_params = critic.init(critic_key, obs, action)
        actor_params = actor.init(actor_key, obs)
        log_alpha = jp.asarray(config.init_log_alpha, jp.float32)
        return dict(
            hyper=hyper,
            critic_params=critic_params,
            target_critic_params=jax.tree.map(jp.copy, critic_params),
            actor_params=actor_params,
            log_alpha=log_alpha,
            critic_opt_state=critic_opt.init(critic_params),
            actor_opt_state=actor_opt.init(actor_params),
            alpha_opt_state=alpha_opt.init(log_alpha),
        )

    def act(state: SACState, obs: jax.Array, active_head: jax.Array, key: jax.Array) -> jax.Array:
        del active_head  # one head: the loop's posterior sampling always draws head 0
        action, _ = policy(state.actor_params, obs, key)
        return action

    def eval_act(state: SACState, obs: jax.Array) -> jax.Array:
        return jp.tanh(actor.apply(state.actor_params, obs)[0][0])

    def update(state: SACState, batch: Transition, key: jax.Array, next_bonus: NextBonus | None = None):
        next_key, actor_key = jax.random.split(key)
        hyper = state.hyper
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

        (critic_value, critic_aux), critic_grads = jax.value_and_grad(critic_objective, has_aux=True)(
            state.critic_params
        )
        critic_params, critic_opt_state = adam_step(
            critic_opt, critic_grads, state.critic_opt_state, state.critic_params, hyper.critic_lr
        )

        # 2. actor against the min over the (just updated) critics
        def actor_objective(params):
            action, log_prob = policy(params, batch.obs, actor_key)
            min_q = jp.min(critic.apply(critic_params, batch.obs, action), axis=0)
            return losses.soft_actor_loss(min_q, log_prob, alpha), log_prob

        (actor_value, log_prob), actor_grads = jax.value_and_grad(actor_objective, has_aux=True)(state.actor_params)
        actor_params, actor_opt_state = adam_step(
            actor_opt, actor_grads, state.actor_opt_state, state.actor_params, hyper.actor_lr
        )

        # 3. temperature
        log_alpha, alpha_opt_state = temperature_step(
            alpha_opt, state.alpha_opt_state, state.log_alpha, log_prob, target_entropy, hyper.alpha_lr
        )

        # 4. Polyak
        target_critic_params = polyak(state.target_critic_params, critic_params, hyper.tau)
        new_state = state.replace(
            critic_params=critic_params,
            target_critic_params=target_critic_params,
            actor_params=actor_params,
            log_alpha=log_alpha,
            critic_opt_state=critic_opt_state,
            actor_opt_state=actor_opt_state,
            alpha_opt_state=alpha_opt_state,
        )
        metrics = update_metrics(critic_value, critic_aux, actor_value, alpha, log_prob, y)
        if next_bonus is not None:
            metrics["target_bonus_mean"] = jp.mean(bonus)
        return new_state, metrics

    return SoftActorCritic(
        init_fields=init_fields,
        act=act,
        eval_act=eval_act,
        update=update,
        critic_values=lambda state, obs, action: critic.apply(state.critic_params, obs, action),
        head_actions=lambda state, obs: eval_act(state, obs)[None],
    )


def make_sac(config: SACConfig, obs_size: int, action_size: int) -> Algorithm:
    core = make_soft_actor_critic(config, obs_size, action_size)

    def init(key: jax.Array, hyper: SACHyper | None = None) -> SACState:
        """Parameters, targets and optimiser states; `hyper` defaults to the config's values."""
        return SACState(**core.init_fields(key, SACHyper.of(config) if hyper is None else hyper))

    def update(state: SACState, batch: Transition, key: jax.Array, target_head: jax.Array):
        del target_head  # one head
        return core.update(state, batch, key)

    return Algorithm(
        num_heads=1,
        hyperparams=SACHyper.of,
        init=init,
        act=core.act,
        eval_act=core.eval_act,
        update=update,
        critic_values=core.critic_values,
        head_actions=core.head_actions,
    )
