"""SAC-DRND (Yang et al. 2024, distributional random network distillation) as the paper's
baseline (its appendix "DRND"; SPEC 3), as an `Algorithm`: SAC (`mjx_pbac.sac`) whose critic
target carries a novelty term from N fixed random target networks and one trained predictor.

Shapes: B samples of the minibatch, N target networks, E = embedding size (32), x = concat(s, a).

Networks (SPEC 3): the predictor f and the N targets g_n share one architecture, a plain ReLU MLP
x -> 256 -> 256 -> 256 -> 256 -> E with PyTorch's default initialisation; the targets are drawn
once from their own keys and never trained (no optimiser state, no gradient).

Bonus at x, with mu and B2 the first and second moments over the targets (per output j):

    mu_j  = (1/N) sum_n g_n(x)_j            B2_j = (1/N) sum_n g_n(x)_j^2
    b(x)  = mix sum_j (f(x)_j - mu_j)^2
            + (1 - mix) mean_j sqrt(clip(|f(x)_j^2 - mu_j^2| / (B2_j - mu_j^2), 1e-3, 1))

mix = 0.9. The first term is RND's error against the targets' mean; the second, DRND's
pseudo-count estimate from how far f's second moment sits from the targets' spread. The
denominator (the targets' variance) is floored at 1e-12 so that an input where all targets agree
gives the clip's upper end rather than 0/0.

Critic target: SAC's with the bonus at the next state-action pair inside the bootstrap,

    y[i] = r_i + gamma (1 - terminated_i) (min_k Qbar_k(s'_i, a'_i) - alpha log pi(a'_i|s'_i) + sign lambda b(s'_i, a'_i))

a'_i ~ pi(.|s'_i). sign = -1 ("penalty", the default) is what the reference pipeline does (it
subtracts lambda b, an anti-exploration penalty); sign = +1 ("bonus") is the exploration-bonus
reading. lambda = bonus_scale = 1. The actor and temperature losses are SAC's, without the bonus.

Predictor: per gradient step one target c ~ Uniform{0..N-1} is drawn for the whole batch and f
takes one Adam step (lr 1e-4) on mean_{i,j} (f(x_i)_j - g_c(x_i)_j)^2 at the replay pairs
x_i = (s_i, a_i).

Order per gradient step: SAC's critic (with the bonus from the predictor before this step), actor,
temperature and Polyak steps, then the predictor step.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jp
import optax
from flax import struct

from mjx_pbac.algorithm import Algorithm, traced_hyperparams
from mjx_pbac.config import DRNDConfig
from mjx_pbac.networks import TorchDense
from mjx_pbac.optim import adam, adam_step
from mjx_pbac.replay import Transition
from mjx_pbac.sac import SACHyper, SACState, make_soft_actor_critic

CLIP_LOW, CLIP_HIGH = 1e-3, 1.0
VARIANCE_FLOOR = 1e-12


class ReLUMLP(nn.Module):
    """Dense -> ReLU per hidden size, then Dense(out); PyTorch's default initialisation."""

    hidden_sizes: tuple[int, ...]
    out_size: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for width in self.hidden_sizes:
            x = nn.relu(TorchDense(width)(x))
        return TorchDense(self.out_size)(x)


def drnd_bonus(prediction: jax.Array, targets: jax.Array, *, mix: float | jax.Array = 0.9) -> jax.Array:
    """b(x) for the predictor's output [B, E] and the targets' outputs [N, B, E] -> [B] (see the
    module docstring)."""
    if targets.ndim != 3 or targets.shape[1:] != prediction.shape:
        raise ValueError(f"prediction must be [B, E] and targets [N, B, E]; got {prediction.shape} and {targets.shape}")
    mu = jp.mean(targets, axis=0)
    second_moment = jp.mean(jp.square(targets), axis=0)
    distance = jp.sum(jp.square(prediction - mu), axis=-1)
    variance = jp.maximum(second_moment - jp.square(mu), VARIANCE_FLOOR)
    ratio = jp.abs(jp.square(prediction) - jp.square(mu)) / variance
    pseudo_count = jp.mean(jp.sqrt(jp.clip(ratio, CLIP_LOW, CLIP_HIGH)), axis=-1)
    return mix * distance + (1.0 - mix) * pseudo_count


def predictor_loss(prediction: jax.Array, target: jax.Array) -> jax.Array:
    """mean_{i,j} (f(x_i)_j - g_c(x_i)_j)^2 for prediction and target [B, E]; the target gets no gradient."""
    return jp.mean(jp.square(prediction - jax.lax.stop_gradient(target)))


@struct.dataclass
class DRNDHyper(SACHyper):
    """SAC's traced knobs plus DRND's: the predictor's learning rate, lambda and the sign (-1
    penalty, +1 bonus), so a sweep may compare penalty and bonus in one program."""

    predictor_lr: jax.Array
    bonus_scale: jax.Array
    sign: jax.Array

    @classmethod
    def of(cls, config: DRNDConfig) -> "DRNDHyper":
        return traced_hyperparams(cls, config, sign=-1.0 if config.sign == "penalty" else 1.0)


@struct.dataclass
class DRNDState(SACState):
    predictor_params: dict
    """The trained predictor f."""
    random_target_params: dict
    """The N fixed random target networks g_n, leading axis N; never updated."""
    predictor_opt_state: optax.OptState


def make_drnd(config: DRNDConfig, obs_size: int, action_size: int) -> Algorithm:
    core = make_soft_actor_critic(config, obs_size, action_size)
    network = ReLUMLP(config.predictor_hidden_sizes, config.embedding_size)
    targets_apply = jax.vmap(network.apply, in_axes=(0, None))  # [N, B, E]
    predictor_opt = adam()

    def bonus(state: DRNDState, obs: jax.Array, action: jax.Array) -> jax.Array:
        """b(s, a) [B] from the current predictor and the fixed targets."""
        x = jp.concatenate([obs, action], axis=-1)
        prediction = network.apply(state.predictor_params, x)
        return drnd_bonus(prediction, targets_apply(state.random_target_params, x), mix=config.bonus_mix)

    def init(key: jax.Array, hyper: DRNDHyper | None = None) -> DRNDState:
        """SAC's state plus the predictor, the fixed targets and the predictor's optimiser state."""
        sac_key, predictor_key, targets_key = jax.random.split(key, 3)
        x = jp.zeros((1, obs_size + action_size))
        predictor_params = network.init(predictor_key, x)
        random_target_params = jax.vmap(network.init, in_axes=(0, None))(
            jax.random.split(targets_key, config.num_targets), x
        )
        return DRNDState(
            **core.init_fields(sac_key, DRNDHyper.of(config) if hyper is None else hyper),
            predictor_params=predictor_params,
            random_target_params=random_target_params,
            predictor_opt_state=predictor_opt.init(predictor_params),
        )

    def signed_bonus(state: DRNDState, next_obs: jax.Array, next_action: jax.Array) -> jax.Array:
        return state.hyper.sign * state.hyper.bonus_scale * bonus(state, next_obs, next_action)

    def update(state: DRNDState, batch: Transition, key: jax.Array, target_head: jax.Array):
        del target_head  # one head
        sac_key, pick_key = jax.random.split(key)
        state, metrics = core.update(state, batch, sac_key, signed_bonus)

        # the predictor, against one random target for the whole batch
        x = jp.concatenate([batch.obs, batch.action], axis=-1)
        pick = jax.random.randint(pick_key, (), 0, config.num_targets)
        target = network.apply(jax.tree.map(lambda leaf: leaf[pick], state.random_target_params), x)
        loss, grads = jax.value_and_grad(lambda params: predictor_loss(network.apply(params, x), target))(
            state.predictor_params
        )
        predictor_params, predictor_opt_state = adam_step(
            predictor_opt, grads, state.predictor_opt_state, state.predictor_params, state.hyper.predictor_lr
        )
        metrics["predictor_loss"] = loss
        return state.replace(predictor_params=predictor_params, predictor_opt_state=predictor_opt_state), metrics

    return Algorithm(
        num_heads=1,
        hyperparams=DRNDHyper.of,
        init=init,
        act=core.act,
        eval_act=core.eval_act,
        update=update,
        critic_values=core.critic_values,
        head_actions=core.head_actions,
    )
