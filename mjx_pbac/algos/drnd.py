"""SAC-DRND (Yang et al. 2024, distributional random network distillation) as the paper's
baseline (appendix "Baselines"): SAC (`mjx_pbac.algos.sac`) with a novelty term from N fixed
random target networks and one trained predictor, in the critic's target and in the actor's
objective.

Shapes: B samples of the minibatch, N target networks, E = embedding size (32), x = concat(s, a).

Networks. The predictor f and the N targets g_n share one architecture, Yang et al.'s (the paper:
"the same architecture as proposed by Yang et al."): a plain ReLU MLP x -> 256 -> 256 -> 256 -> E
with PyTorch's default initialisation; the targets are drawn once from their own keys and never
trained (no optimiser state, no gradient). The critics and the actor are SAC's, with K = 10
critics (the paper's Table 7 gives every method 10 critic networks) whose minimum forms the
targets and the actor's objective.

Bonus at x, with mu and B2 the first and second moments over the targets (per output j):

    mu_j  = (1/N) sum_n g_n(x)_j            B2_j = (1/N) sum_n g_n(x)_j^2
    b(x)  = mix sum_j (f(x)_j - mu_j)^2
            + (1 - mix) mean_j sqrt(clip(|f(x)_j^2 - mu_j^2| / (B2_j - mu_j^2), 1e-3, 1))

mix = 0.9. The first term is RND's error against the targets' mean; the second, DRND's
pseudo-count estimate from how far f's second moment sits from the targets' spread. The
denominator (the targets' variance) is floored at 1e-12 so that an input where all targets agree
gives the clip's upper end rather than 0/0. The targets' outputs carry no gradient.

Critic target: SAC's with the bonus at the next state-action pair inside the bootstrap,

    y[i] = r_i + gamma (1 - terminated_i) (min_k Qbar_k(s'_i, a'_i) - alpha log pi(a'_i|s'_i) + sign lambda b(s'_i, a'_i))

a'_i ~ pi(.|s'_i). sign = -1 ("penalty", the default) is what all three reference
implementations do (they subtract lambda b: an anti-exploration penalty); sign = +1 ("bonus") is
the exploration-bonus reading. lambda = bonus_scale = 1.

Actor: SAC's objective with the same signed bonus at its own reparameterised sample,

    L_pi = mean_i [alpha log pi(a~_i|s_i) - min_k Q_k(s_i, a~_i) - sign lambda_actor b(s_i, a~_i)]

lambda_actor = actor_bonus_scale = 1; the gradient reaches the actor through a~ and the
predictor's output (Yang et al.'s actor loss). The temperature's target entropy is SAC's, -A
(the paper: alpha "automatically adjusted ... following Haarnoja et al.").

Predictor: per gradient step one target c ~ Uniform{0..N-1} is drawn for the whole batch and f
takes one Adam step (lr 1e-4) on mean_{i,j} (f(x_i)_j - g_c(x_i)_j)^2 at the replay pairs
x_i = (s_i, a_i).

Order per gradient step: SAC's critic (with the bonus from the predictor before this step), actor
(likewise), temperature and Polyak steps, then the predictor step.

Where the authors' code (adinlab/adinrl) reads otherwise, a field gives its reading: it computes
the actor's bonus without a gradient (a constant in the loss: `actor_bonus_scale = 0` trains the
same actor), and sets the target entropy to -A/2 (`target_entropy_scale = -0.5`).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import flax.linen as nn
import jax
import jax.numpy as jp
import optax
from flax import struct

from mjx_pbac.algos import sac
from mjx_pbac.algos.base import Algorithm, adam_state, algorithm_config, gradient_step, knob, make_algorithm, traced
from mjx_pbac.networks import TorchDense
from mjx_pbac.replay import Transition
from mjx_pbac.schema import check_choice, check_positive, require


@algorithm_config
class Config(sac.Config):
    """SAC-DRND (Yang et al. 2024): SAC's config with a distributional random network distillation
    bonus b(s, a) from N fixed random target networks and one trained predictor, added to the
    bootstrap of the critic target with weight sign * bonus_scale and to the actor's objective with
    weight sign * actor_bonus_scale."""

    num_critics: int = 10
    """K: critics whose minimum forms the targets and the actor's objective (the paper's Table 7:
    10 critic networks for every method)."""
    num_targets: int = 10
    """N: fixed random target networks g_n(s, a) whose mean and second moment define the bonus."""
    predictor_hidden_sizes: tuple[int, ...] = (256, 256, 256)
    """Widths of the ReLU hidden layers of the predictor and of every target network."""
    embedding_size: int = 32
    """Output size of the predictor and the target networks."""
    predictor_lr: float = knob(1e-4)
    """Adam learning rate of the predictor (trained on one random target per batch)."""
    bonus_mix: float = 0.9
    """Weight of the first bonus term, sum_j (f_j - mu_j)^2; the distributional term gets 1 - bonus_mix."""
    bonus_scale: float = knob(1.0)
    """lambda: the bonus enters the target as sign * lambda * b(s', a')."""
    actor_bonus_scale: float = knob(1.0)
    """lambda_actor: the actor maximises min_k Q_k + sign * lambda_actor * b(s, a~); 0 leaves
    SAC's actor (what the authors' code trains, whose bonus there carries no gradient)."""
    sign: Literal["penalty", "bonus"] = knob("penalty", as_number=lambda sign: -1.0 if sign == "penalty" else 1.0)
    """"penalty" subtracts lambda b(s', a') in the target as the reference pipeline does (a
    novelty penalty) and the actor avoids novel actions; "bonus" adds it (an exploration bonus)
    and the actor seeks them; docs/algorithms.md "Baselines". In the program: -1 or +1."""

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.num_targets >= 2, f"num_targets must be >= 2 (the bonus needs their spread), got {self.num_targets}")
        widths = self.predictor_hidden_sizes
        require(len(widths) >= 1 and all(h >= 1 for h in widths), f"predictor_hidden_sizes must be positive widths, got {widths}")
        require(self.embedding_size >= 1, f"embedding_size must be >= 1, got {self.embedding_size}")
        require(0.0 <= self.bonus_mix <= 1.0, f"bonus_mix must lie in [0, 1], got {self.bonus_mix}")
        require(self.bonus_scale >= 0, f"bonus_scale must be >= 0, got {self.bonus_scale}")
        require(self.actor_bonus_scale >= 0, f"actor_bonus_scale must be >= 0, got {self.actor_bonus_scale}")
        check_choice(self, "sign")
        check_positive(self, "predictor_lr")


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
class State(sac.State):
    predictor_params: dict
    """The trained predictor f."""
    random_target_params: dict
    """The N fixed random target networks g_n, leading axis N; never updated."""
    predictor_opt_state: optax.OptState


def make(config: Config, obs_size: int, action_size: int) -> Algorithm:
    network = ReLUMLP(config.predictor_hidden_sizes, config.embedding_size)
    targets_apply = jax.vmap(network.apply, in_axes=(0, None))  # [N, B, E]

    def bonus(state: State, obs: jax.Array, action: jax.Array) -> jax.Array:
        """b(s, a) [B] from the current predictor and the fixed targets; a gradient reaches
        `action` through the predictor's output only (no parameter gets one)."""
        x = jp.concatenate([obs, action], axis=-1)
        prediction = network.apply(jax.lax.stop_gradient(state.predictor_params), x)
        targets = jax.lax.stop_gradient(targets_apply(state.random_target_params, x))
        return drnd_bonus(prediction, targets, mix=config.bonus_mix)

    def target_bonus(state: State, next_obs: jax.Array, next_action: jax.Array) -> jax.Array:
        return state.config.sign * state.config.bonus_scale * bonus(state, next_obs, next_action)

    def actor_bonus(state: State, obs: jax.Array, action: jax.Array) -> jax.Array:
        return state.config.sign * state.config.actor_bonus_scale * bonus(state, obs, action)

    core = sac.make(config, obs_size, action_size, next_bonus=target_bonus, actor_bonus=actor_bonus)

    def init(key: jax.Array, member: Config) -> State:
        """SAC's state plus the predictor, the fixed targets and the predictor's optimiser state."""
        member = traced(member)
        sac_key, predictor_key, targets_key = jax.random.split(key, 3)
        sac_state = core.init(sac_key, member)
        x = jp.zeros((1, obs_size + action_size))
        predictor_params = network.init(predictor_key, x)
        random_target_params = jax.vmap(network.init, in_axes=(0, None))(
            jax.random.split(targets_key, config.num_targets), x
        )
        return State(
            **{f.name: getattr(sac_state, f.name) for f in dataclasses.fields(sac_state)},
            predictor_params=predictor_params,
            random_target_params=random_target_params,
            predictor_opt_state=adam_state(predictor_params, member.predictor_lr),
        )

    def update(state: State, batch: Transition, key: jax.Array):
        sac_key, pick_key = jax.random.split(key)
        state, metrics = core.update(state, batch, sac_key, None)  # SAC's step, with the bonus in its targets

        # the predictor, against one random target for the whole batch
        x = jp.concatenate([batch.obs, batch.action], axis=-1)
        pick = jax.random.randint(pick_key, (), 0, config.num_targets)
        target = network.apply(jax.tree.map(lambda leaf: leaf[pick], state.random_target_params), x)
        predictor_params, predictor_opt_state, loss, _ = gradient_step(
            lambda params: (predictor_loss(network.apply(params, x), target), None),
            state.predictor_params,
            state.predictor_opt_state,
        )
        metrics["predictor_loss"] = loss
        return state.replace(predictor_params=predictor_params, predictor_opt_state=predictor_opt_state), metrics

    return make_algorithm(
        init=init,
        act=lambda state, obs, key: core.act(state, None, obs, key),
        eval_act=core.eval_act,
        update=update,
        critic_values=core.critic_values,
        head_actions=core.head_actions,
    )
