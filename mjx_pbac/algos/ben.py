"""BEN (Fellows et al. 2024, Bayesian exploration networks) in the paper's Bayesian deep-ensemble
version (appendix "Baselines"): "An ensemble of K - 1 heteroscedastic critics learns a
heteroscedastic univariate normal distribution over the Bellman target, while the Kth critic,
regularized by the ensemble, guides the actor network." Where the paper says no more, this
follows the authors' code (adinlab/adinrl, `models/ben.py`), except for two slips of arithmetic
in its KL, which a field reproduces (docs/algorithms.md "Baselines").

Shapes: K critics in all, M = K - 1 heteroscedastic ones, B samples of the minibatch.

Networks: PBAC's critic MLP (paper Table 8) with two outputs for each of the M heteroscedastic
critics, a mean m_k(s, a) and a log-variance l_k(s, a), whose variance is
v_k = clip(exp(l_k), 1e-4, 10); one deterministic critic Q(s, a) of the same MLP with one output;
one deterministic tanh actor pi(s).

Gaussian Bellman target, shared by all M critics (`target = "shared"`): the target copies
(Polyak averages) at the next state and a noisy action a'_i = clip(pi(s'_i) + eps, -1, 1),
eps ~ N(0, target_noise^2), moment-matched into one Gaussian per sample,

    mu'[i]     = (1/M) sum_k mbar_k(s'_i, a'_i)
    var'[i]    = (1/M) sum_k (mbar_k - mu'[i])^2 + (1/M) sum_k vbar_k(s'_i, a'_i)     (ensemble + noise)
    y_mean[i]  = r_i + gamma (1 - terminated_i) mu'[i]
    y_var[i]   = clip(gamma^2 (1 - terminated_i) var'[i], 1e-2, 1e2)

(the distribution of r + gamma X with X the ensemble's mixture, matched by its first two
moments; truncation bootstraps). `target = "per_member"` instead gives critic k its own target
from its own copy: y_mean[k, i] = r_i + gamma (1 - terminated_i) mbar_k and y_var[k, i] =
clip(gamma^2 (1 - terminated_i) vbar_k, 1e-2, 1e2).

Fit: the KL from target to model, masked like PBAC's diversity term, loss = mean_{k,i} b[k, i]
KL[k, i] with b[k, i] ~ Bernoulli(1 - kappa) drawn per gradient step, and (`kl = "exact"`) the
closed form for Gaussians,

    KL(N(y_mean, y_var) || N(m, v)) = 1/2 [log v - log y_var + (y_var + (y_mean - m)^2) / v - 1].

`kl = "reference"` computes it as the authors' code does: the target's variance taken for a
log-variance (var1 = clip(exp(y_var), 1e-4, 10)) and the log term not halved,
log v - log var1 + (var1 + (y_mean - m)^2) / (2 v) - 1/2.

Deterministic critic: regressed on the ensemble's mean at the replay pair, which gets no gradient,

    L_Q = mean_i huber(Q(s_i, a_i) - (1/M) sum_k m_k(s_i, a_i))      (`fit_loss = "huber"`)

the Huber loss the paper applied to every baseline; `fit_loss = "mse"` is the authors' code's
squared error, mean_i (Q - mean)^2. (Their code regresses on the mean of all K critics, itself
included and detached; that has the same fixed point and, per step, the gradient of the M-mean's
regression times (K - 1) / K.) It alone trains the actor, L_pi = -mean_i Q(s_i, a~_i) at
a~_i = clip(pi(s_i) + eps, -1, 1), eps ~ N(0, target_noise^2) (with Q after this step's update).
The ensemble's KL and L_Q are minimised together in one Adam step over both critics' parameters;
their gradients do not mix (the mean in L_Q is detached; the KL does not involve Q).

Acting: a = clip(pi(s) + eps, -1, 1) with eps ~ N(0, action_noise^2) (0.1); evaluation: pi(s).

Order per gradient step: critics, actor, Polyak of the heteroscedastic targets (the deterministic
critic has no target network: nothing bootstraps from it).
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jp
import optax
from flax import struct

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
from mjx_pbac.losses import huber
from mjx_pbac.networks import LayerNormChoice, make_actor, make_critic_ensemble
from mjx_pbac.replay import Transition
from mjx_pbac.schema import check_actor_critic, check_choice, check_numbers, check_positive, require


@algorithm_config
class Config:
    """BEN as the paper's Bayesian deep-ensemble version: K - 1 heteroscedastic critics (mean,
    log-variance) fitted by a masked KL to one moment-matched Gaussian Bellman target, and one
    deterministic critic regressed on their detached mean that alone trains a deterministic actor,
    which explores with N(0, action_noise^2) action noise."""

    num_critics: int = 10
    """K: K - 1 heteroscedastic critics plus the one deterministic critic."""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """Widths of the Dense layers of every MLP (LayerNorm + CReLU after each)."""
    gamma: float = knob(0.99)
    """Discount factor."""
    tau: float = knob(0.005)
    """Polyak rate of the heteroscedastic target critics."""
    bootstrap_rate: float = knob(0.05)
    """kappa: each (critic, sample) pair of the ensemble's KL is masked out with this probability."""
    action_noise: float = knob(0.1)
    """Standard deviation of the Gaussian noise added to the actor's action when exploring."""
    target_noise: float = knob(0.1)
    """Standard deviation of the Gaussian noise added to the actor's action in the Bellman target
    and in the actor's objective (the authors' code: the acting noise, 0.1); 0 for none."""
    target: Literal["shared", "per_member"] = "shared"
    """"shared": one moment-matched Gaussian target from the whole ensemble for every critic (the
    authors' code); "per_member": critic k's target from its own target copy."""
    kl: Literal["exact", "reference"] = "exact"
    """"exact": the Gaussian KL in closed form; "reference": as the authors' code computes it (the
    target's variance read as a log-variance, the log term not halved)."""
    fit_loss: Literal["huber", "mse"] = "huber"
    """The deterministic critic's regression on the ensemble mean: "huber" (the paper: Huber for
    every baseline) or "mse" (the authors' code)."""
    huber_delta: float = 1.0
    """Huber threshold of the deterministic critic's regression on the ensemble mean."""
    critic_lr: float = knob(3e-4)
    """Adam learning rate of the critics (the ensemble and the deterministic one)."""
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
        require(self.num_critics >= 2, f"num_critics must be >= 2 (K - 1 heteroscedastic + 1 deterministic), got {self.num_critics}")
        check_actor_critic(self)
        require(0.0 <= self.bootstrap_rate < 1.0, f"bootstrap_rate must lie in [0, 1), got {self.bootstrap_rate}")
        require(self.action_noise >= 0, f"action_noise must be >= 0, got {self.action_noise}")
        require(self.target_noise >= 0, f"target_noise must be >= 0, got {self.target_noise}")
        for name in ("target", "kl", "fit_loss"):
            check_choice(self, name)
        require(self.huber_delta > 0, f"huber_delta must be > 0, got {self.huber_delta}")
        check_positive(self, "critic_lr", "actor_lr")


VARIANCE_MIN, VARIANCE_MAX = 1e-4, 10.0
"""The heteroscedastic critics' variances are clip(exp(l), VARIANCE_MIN, VARIANCE_MAX) (the
authors' code)."""
TARGET_VARIANCE_MIN, TARGET_VARIANCE_MAX = 1e-2, 1e2
"""The Bellman target's variance is clipped to this range (the authors' code)."""


EXP_CAP = 30.0
"""exp's argument is capped here before the clip: exp(30) ~ 1e13 clips to the same 10, but an
output past ~88.7 no longer overflows float32 to inf, whose gradient through the clip is 0 * inf =
NaN. Nothing pulls a log-variance back once its variance is clipped at the top, so it can drift
there; the values and gradients are otherwise the same."""


def critic_variance(log_var: jax.Array) -> jax.Array:
    """v = clip(exp(log_var), 1e-4, 10): a heteroscedastic critic's variance from its raw output
    (exp's argument capped at EXP_CAP, which changes no value)."""
    return jp.clip(jp.exp(jp.minimum(log_var, EXP_CAP)), VARIANCE_MIN, VARIANCE_MAX)


def gaussian_kl(target_mean: jax.Array, target_var: jax.Array, mean: jax.Array, var: jax.Array) -> jax.Array:
    """KL(N(target_mean, target_var) || N(mean, var)), elementwise:
    1/2 [log var - log target_var + (target_var + (target_mean - mean)^2) / var - 1]."""
    return 0.5 * (jp.log(var) - jp.log(target_var) + (target_var + jp.square(target_mean - mean)) / var - 1.0)


def reference_kl(target_mean: jax.Array, target_var: jax.Array, mean: jax.Array, var: jax.Array) -> jax.Array:
    """The authors' code's KL term, elementwise: with var1 = clip(exp(target_var), 1e-4, 10),
    log var - log var1 + (var1 + (target_mean - mean)^2) / (2 var) - 1/2."""
    var1 = critic_variance(target_var)
    return jp.log(var) - jp.log(var1) + (var1 + jp.square(target_mean - mean)) / (2.0 * var) - 0.5


def shared_target(
    reward: jax.Array, terminated: jax.Array, next_mean: jax.Array, next_var: jax.Array, *, gamma: float | jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(y_mean, y_var) [B]: the ensemble's moment-matched Gaussian Bellman target (module docstring).

    reward, terminated: [B]; next_mean, next_var: [M, B] from the target critics at (s', a').
    """
    continues = 1.0 - terminated
    mean = jp.mean(next_mean, axis=0)
    var = jp.var(next_mean, axis=0) + jp.mean(next_var, axis=0)
    y_var = jp.clip(jp.square(gamma) * continues * var, TARGET_VARIANCE_MIN, TARGET_VARIANCE_MAX)
    return reward + gamma * continues * mean, y_var


def per_member_targets(
    reward: jax.Array, terminated: jax.Array, next_mean: jax.Array, next_var: jax.Array, *, gamma: float | jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(y_mean, y_var) [M, B]: critic k's Gaussian Bellman target from its own target copy."""
    continues = (1.0 - terminated)[None, :]
    y_var = jp.clip(jp.square(gamma) * continues * next_var, TARGET_VARIANCE_MIN, TARGET_VARIANCE_MAX)
    return reward[None, :] + gamma * continues * next_mean, y_var


def ben_critic_loss(
    mean: jax.Array,
    var: jax.Array,
    target_mean: jax.Array,
    target_var: jax.Array,
    mask: jax.Array,
    kl: Literal["exact", "reference"] = "exact",
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """mean_{k,i} mask[k,i] KL(N(target_mean, target_var) || N(mean[k,i], var[k,i])); mean, var
    and mask [M, B], the targets [B] (shared) or [M, B] (per member), without gradient.

    Returns (loss, aux) with aux `q_mean` (mean of the means), `q_spread` (their standard
    deviation over the M critics, ddof 0, averaged over the batch) and `var_mean`.
    """
    if mean.ndim != 2 or {mean.shape, var.shape, mask.shape} != {mean.shape} or target_mean.shape != target_var.shape or target_mean.shape not in (mean.shape, mean.shape[1:]):
        raise ValueError(
            f"mean, var and mask must share one shape [M, B] and the targets be [B] or [M, B]; got mean {mean.shape}, "
            f"var {var.shape}, mask {mask.shape}, target_mean {target_mean.shape}, target_var {target_var.shape}"
        )
    target_mean = jax.lax.stop_gradient(jp.broadcast_to(target_mean, mean.shape))
    target_var = jax.lax.stop_gradient(jp.broadcast_to(target_var, mean.shape))
    divergence = (gaussian_kl if kl == "exact" else reference_kl)(target_mean, target_var, mean, var)
    loss = jp.mean(mask.astype(divergence.dtype) * divergence)
    aux = {"q_mean": jp.mean(mean), "q_spread": jp.mean(jp.std(mean, axis=0)), "var_mean": jp.mean(var)}
    return loss, aux


def deterministic_critic_loss(
    q: jax.Array, ensemble_mean: jax.Array, *, loss: Literal["huber", "mse"] = "huber", huber_delta: float | jax.Array = 1.0
) -> jax.Array:
    """mean_i huber(q[i] - ensemble_mean[i]) ("huber") or mean_i (q[i] - ensemble_mean[i])^2
    ("mse") for q and ensemble_mean [B]; the mean gets no gradient."""
    error = q - jax.lax.stop_gradient(ensemble_mean)
    return jp.mean(huber(error, huber_delta) if loss == "huber" else jp.square(error))


@struct.dataclass
class State:
    config: Config
    """This member's config (knobs traced)."""
    critic_params: dict
    """{"ensemble": M heteroscedastic critics (leading axis M), "deterministic": the one critic
    (leading axis 1)}; one Adam state covers both."""
    target_ensemble_params: dict
    """Polyak copies of the heteroscedastic critics."""
    actor_params: dict
    critic_opt_state: optax.OptState
    actor_opt_state: optax.OptState


def make(config: Config, obs_size: int, action_size: int) -> Algorithm:
    num_ensemble = config.num_critics - 1
    ensemble = make_critic_ensemble(num_ensemble, config.hidden_sizes, outputs=2, layer_norm=config.layer_norm)
    deterministic = make_critic_ensemble(1, config.hidden_sizes, layer_norm=config.layer_norm)
    actor = make_actor(1, config.hidden_sizes, action_size, deterministic=True, layer_norm=config.layer_norm)
    decay = weight_decay_rule(config)

    build_targets = shared_target if config.target == "shared" else per_member_targets

    def moments(params, obs, action):
        """(mean, var) [M, B] of the heteroscedastic critics."""
        out = ensemble.apply(params, obs, action)
        return out[..., 0], critic_variance(out[..., 1])

    def policy(params, obs):
        return jp.tanh(actor.apply(params, obs)[0][0])  # [B, A]

    def noisy(action, scale, key):
        return jp.clip(action + scale * jax.random.normal(key, action.shape, action.dtype), -1.0, 1.0)

    def init(key: jax.Array, member: Config) -> State:
        member = traced(member)
        ensemble_key, deterministic_key, actor_key = jax.random.split(key, 3)
        obs, action = jp.zeros((1, obs_size)), jp.zeros((1, action_size))
        critic_params = {
            "ensemble": ensemble.init(ensemble_key, obs, action),
            "deterministic": deterministic.init(deterministic_key, obs, action),
        }
        actor_params = actor.init(actor_key, obs)
        return State(
            config=member,
            critic_params=critic_params,
            target_ensemble_params=jax.tree.map(jp.copy, critic_params["ensemble"]),
            actor_params=actor_params,
            critic_opt_state=adam_state(critic_params, member.critic_lr),
            actor_opt_state=adam_state(actor_params, member.actor_lr),
        )

    def act(state: State, obs: jax.Array, key: jax.Array) -> jax.Array:
        return noisy(policy(state.actor_params, obs), state.config.action_noise, key)

    def eval_act(state: State, obs: jax.Array) -> jax.Array:
        return policy(state.actor_params, obs)

    def update(state: State, batch: Transition, key: jax.Array):
        config = state.config
        mask_key, target_key, actor_key = jax.random.split(key, 3)

        # 1. critics: the ensemble's KL to the Gaussian Bellman target, the deterministic critic
        #    regressed on the ensemble's (detached) mean
        next_action = noisy(policy(state.actor_params, batch.next_obs), config.target_noise, target_key)
        next_mean, next_var = moments(state.target_ensemble_params, batch.next_obs, next_action)
        target_mean, target_var = build_targets(batch.reward, batch.terminated, next_mean, next_var, gamma=config.gamma)
        mask = jax.random.bernoulli(mask_key, 1.0 - config.bootstrap_rate, next_mean.shape)

        def critic_objective(params):
            mean, var = moments(params["ensemble"], batch.obs, batch.action)
            kl_loss, aux = ben_critic_loss(mean, var, target_mean, target_var, mask, kl=config.kl)
            q = deterministic.apply(params["deterministic"], batch.obs, batch.action)[0]
            q_loss = deterministic_critic_loss(q, jp.mean(mean, axis=0), loss=config.fit_loss, huber_delta=config.huber_delta)
            return kl_loss + q_loss, {**aux, "kl": kl_loss, "deterministic_loss": q_loss, "deterministic_q_mean": jp.mean(q)}

        critic_params, critic_opt_state, critic_value, critic_aux = gradient_step(
            critic_objective, state.critic_params, state.critic_opt_state, decay(config)
        )

        # 2. actor: maximise the (just updated) deterministic critic at its noisy action
        def actor_objective(params):
            action = noisy(policy(params, batch.obs), config.target_noise, actor_key)
            return -jp.mean(deterministic.apply(critic_params["deterministic"], batch.obs, action)), None

        actor_params, actor_opt_state, actor_value, _ = gradient_step(
            actor_objective, state.actor_params, state.actor_opt_state, decay(config)
        )

        # 3. Polyak (heteroscedastic critics only)
        new_state = state.replace(
            critic_params=critic_params,
            target_ensemble_params=polyak(state.target_ensemble_params, critic_params["ensemble"], config.tau),
            actor_params=actor_params,
            critic_opt_state=critic_opt_state,
            actor_opt_state=actor_opt_state,
        )
        zero = jp.zeros((), critic_value.dtype)  # no entropy term: alpha and entropy report 0
        return new_state, update_metrics(critic_value, critic_aux, actor_value, zero, zero, target_mean)

    def critic_values(state: State, obs: jax.Array, action: jax.Array) -> jax.Array:
        """The heteroscedastic ensemble's means [K - 1, B] (the deterministic critic is their
        regression, not a member)."""
        return moments(state.critic_params["ensemble"], obs, action)[0]

    return make_algorithm(
        init=init,
        act=act,
        eval_act=eval_act,
        update=update,
        critic_values=critic_values,
        head_actions=lambda state, obs: policy(state.actor_params, obs)[None],
    )
