"""BEN (Fellows et al. 2024, Bayesian exploration networks) in the paper's Bayesian deep-ensemble
version (appendix "Baselines").

Shapes: K critics in all, M = K - 1 heteroscedastic ones, B samples of the minibatch.

Networks: PBAC's critic MLP (paper Table 8) with two outputs for each of the M heteroscedastic critics,
a mean m_k(s, a) and a log-variance l_k(s, a) (softly bounded to [-10, 10]); one deterministic
critic Q(s, a) of the same MLP with one output; one deterministic tanh actor pi(s).

Heteroscedastic critics. Critic k models the Bellman target at (s, a) as N(m_k, exp(l_k)). Its
target distribution is the Gaussian Bellman target built from its own Polyak-averaged copy at the
next state and the actor's action there, a' = pi(s'):

    target_mean[k, i] = r_i + gamma (1 - terminated_i) mbar_k(s'_i, a'_i)
    target_var[k, i]  = gamma^2 (1 - terminated_i)^2 exp(lbar_k(s'_i, a'_i))

(the distribution of r + gamma X with X ~ N(mbar_k, exp(lbar_k)); truncation bootstraps). The
fit is the KL from target to model, in closed form for Gaussians,

    KL(N(mu_t, v_t) || N(m, e^l)) = 1/2 [l - log v_t + (v_t + (mu_t - m)^2) / e^l - 1],

masked like PBAC's diversity term: loss = mean_{k,i} b[k, i] KL[k, i] with b[k, i] ~
Bernoulli(1 - kappa) drawn per gradient step. A terminal transition has v_t = 0; v_t is floored at
1e-6 inside the log only, which shifts the loss by a constant and leaves its gradient unchanged.

The reference code feeds a variance where this KL expects a log-variance and drops the 1/2; here
the formula above is implemented as written (docs/design.md "Baselines"), and tests
check it against numerical integration of the KL.

Deterministic critic: regressed on the ensemble's mean at the replay pair, which gets no gradient:

    L_Q = mean_i huber(Q(s_i, a_i) - (1/M) sum_k m_k(s_i, a_i))

It alone trains the actor, L_pi = -mean_i Q(s_i, pi(s_i)) (with Q after this step's update).
The ensemble's KL and L_Q are minimised together in one Adam step over both critics' parameters;
their gradients do not mix (the mean in L_Q is detached; the KL does not involve Q).

Acting: a = clip(pi(s) + eps, -1, 1) with eps ~ N(0, action_noise^2) (0.1); evaluation: pi(s).

Order per gradient step: critics, actor, Polyak of the heteroscedastic targets (the deterministic
critic has no target network: nothing bootstraps from it).
"""

from __future__ import annotations

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
from mjx_pbac.schema import check_actor_critic, check_numbers, check_positive, require


@algorithm_config
class Config:
    """BEN as the paper's Bayesian deep-ensemble version: K - 1 heteroscedastic critics (mean,
    log-variance) fitted to a Gaussian Bellman target by a KL with bootstrap masks, and one
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
        require(self.huber_delta > 0, f"huber_delta must be > 0, got {self.huber_delta}")
        check_positive(self, "critic_lr", "actor_lr")


LOG_VAR_MIN, LOG_VAR_MAX = -10.0, 10.0
TARGET_VARIANCE_FLOOR = 1e-6


def bounded_log_variance(raw: jax.Array) -> jax.Array:
    """Softly bounds a log-variance to (LOG_VAR_MIN, LOG_VAR_MAX); the identity well inside them
    and smooth everywhere, so its gradient never vanishes abruptly as a clip's would."""
    upper = LOG_VAR_MAX - jax.nn.softplus(LOG_VAR_MAX - raw)
    return LOG_VAR_MIN + jax.nn.softplus(upper - LOG_VAR_MIN)


def gaussian_kl(target_mean: jax.Array, target_var: jax.Array, mean: jax.Array, log_var: jax.Array) -> jax.Array:
    """KL(N(target_mean, target_var) || N(mean, exp(log_var))), elementwise:
    1/2 [log_var - log target_var + (target_var + (target_mean - mean)^2) exp(-log_var) - 1]."""
    return 0.5 * (log_var - jp.log(target_var) + (target_var + jp.square(target_mean - mean)) * jp.exp(-log_var) - 1.0)


def ben_targets(
    reward: jax.Array, terminated: jax.Array, next_mean: jax.Array, next_log_var: jax.Array, *, gamma: float
) -> tuple[jax.Array, jax.Array]:
    """(target_mean, target_var) [M, B] of r + gamma (1 - terminated) X, X ~ N(next_mean, exp(next_log_var)).

    reward, terminated: [B]; next_mean, next_log_var: [M, B] from the target critics at (s', pi(s')).
    """
    discount = gamma * (1.0 - terminated)[None, :]
    return reward[None, :] + discount * next_mean, jp.square(discount) * jp.exp(next_log_var)


def ben_critic_loss(
    mean: jax.Array, log_var: jax.Array, target_mean: jax.Array, target_var: jax.Array, mask: jax.Array
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """mean_{k,i} mask[k,i] KL(N(target_mean, target_var) || N(mean, exp(log_var))), all [M, B];
    the targets get no gradient and target_var is floored at 1e-6 inside the KL's log.

    Returns (loss, aux) with aux `q_mean` (mean of the means), `q_spread` (their standard
    deviation over the M critics, ddof 0, averaged over the batch) and `log_var_mean`.
    """
    shapes = {mean.shape, log_var.shape, target_mean.shape, target_var.shape, mask.shape}
    if mean.ndim != 2 or len(shapes) != 1:
        raise ValueError(f"mean, log_var, targets and mask must share one shape [M, B]; got {sorted(shapes)}")
    target_mean = jax.lax.stop_gradient(target_mean)
    target_var = jax.lax.stop_gradient(jp.maximum(target_var, TARGET_VARIANCE_FLOOR))
    kl = gaussian_kl(target_mean, target_var, mean, log_var)
    loss = jp.mean(mask.astype(kl.dtype) * kl)
    aux = {"q_mean": jp.mean(mean), "q_spread": jp.mean(jp.std(mean, axis=0)), "log_var_mean": jp.mean(log_var)}
    return loss, aux


def deterministic_critic_loss(q: jax.Array, ensemble_mean: jax.Array, *, huber_delta: float | jax.Array) -> jax.Array:
    """mean_i huber(q[i] - ensemble_mean[i]) for q and ensemble_mean [B]; the mean gets no gradient."""
    return jp.mean(huber(q - jax.lax.stop_gradient(ensemble_mean), huber_delta))


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

    def moments(params, obs, action):
        """(mean, log_var) [M, B] of the heteroscedastic critics."""
        out = ensemble.apply(params, obs, action)
        return out[..., 0], bounded_log_variance(out[..., 1])

    def policy(params, obs):
        return jp.tanh(actor.apply(params, obs)[0][0])  # [B, A]

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
        action = policy(state.actor_params, obs)
        noise = state.config.action_noise * jax.random.normal(key, action.shape, action.dtype)
        return jp.clip(action + noise, -1.0, 1.0)

    def eval_act(state: State, obs: jax.Array) -> jax.Array:
        return policy(state.actor_params, obs)

    def update(state: State, batch: Transition, key: jax.Array):
        config = state.config

        # 1. critics: the ensemble's KL to its Gaussian Bellman target, the deterministic critic
        #    regressed on the ensemble's (detached) mean
        next_mean, next_log_var = moments(state.target_ensemble_params, batch.next_obs, policy(state.actor_params, batch.next_obs))
        target_mean, target_var = ben_targets(batch.reward, batch.terminated, next_mean, next_log_var, gamma=config.gamma)
        mask = jax.random.bernoulli(key, 1.0 - config.bootstrap_rate, target_mean.shape)

        def critic_objective(params):
            mean, log_var = moments(params["ensemble"], batch.obs, batch.action)
            kl_loss, aux = ben_critic_loss(mean, log_var, target_mean, target_var, mask)
            q = deterministic.apply(params["deterministic"], batch.obs, batch.action)[0]
            q_loss = deterministic_critic_loss(q, jp.mean(mean, axis=0), huber_delta=config.huber_delta)
            return kl_loss + q_loss, {**aux, "kl": kl_loss, "deterministic_loss": q_loss, "deterministic_q_mean": jp.mean(q)}

        critic_params, critic_opt_state, critic_value, critic_aux = gradient_step(
            critic_objective, state.critic_params, state.critic_opt_state, decay(config)
        )

        # 2. actor: maximise the (just updated) deterministic critic
        def actor_objective(params):
            return -jp.mean(deterministic.apply(critic_params["deterministic"], batch.obs, policy(params, batch.obs))), None

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
