"""A continuous chain: a pure-JAX deep-exploration probe with known optimal return (our probe, not the paper's; docs/probe.md "The plain chain does not test deep exploration").

A point moves on the segment [0, L]. Each step the action a in [-1, 1] (clipped) moves it by
a * delta, and the position is clipped to [0, L]. At the position x' after the step, the reward is

    r = r_d * 1[x' < rho_d] + r_g * 1[x' >= L - rho_g] - w_a * a^2,

a small "distractor" reward next to the start and a large one only at the far end. Episodes start
at x0 ~ U[0, reset_noise_scale] (x0 = 0 by default), are never terminated and last H steps (the
time limit is applied by `envs.wrappers.EpisodeAutoReset` or Brax's `EpisodeWrapper`, like every
env here). An agent that dithers around the start collects H * r_d; one that walks the
ceil((L - rho_g) / delta) steps to the far end without reward in between collects far more. This is
the continuous n-chain in the spirit of the one the paper cites, cheap enough to test exploration
on a CPU in minutes.

The position lives in `State.pipeline_state` (a `ChainState`) rather than in `State.info`: both
`EpisodeAutoReset` and Brax's `AutoResetWrapper` restore `pipeline_state` and `obs` at an episode
boundary but carry `info` over, so a position kept in `info` would not be reset.

`ContinuousChain.distractor_return`, `goal_return` and `optimal_return` give the returns of
reference policies computed from the config alone, so tests and learning curves can be read
against them.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jp
from flax import struct

from envs.base import Env, State

__all__ = ["ChainConfig", "ChainState", "ContinuousChain"]


@dataclasses.dataclass(frozen=True)
class ChainConfig:
    """Parameters of the continuous chain; every field can be overridden through `envs.make`."""

    length: float = 10.0
    """L: the position lives in [0, L]."""
    step_size: float = 1.0
    """delta: action a in [-1, 1] moves the position by a * delta per step."""
    distractor_radius: float = 1.0
    """rho_d: the distractor reward is paid while x < rho_d (0 switches it off)."""
    distractor_reward: float = 0.1
    """r_d: reward per step in the distractor zone [0, rho_d)."""
    goal_radius: float = 1.0
    """rho_g: the goal reward is paid while x >= L - rho_g."""
    goal_reward: float = 1.0
    """r_g: reward per step in the goal zone [L - rho_g, L]."""
    action_cost_weight: float = 0.01
    """w_a: the reward loses w_a * a^2 per step (a clipped to [-1, 1])."""
    horizon: int = 100
    """H: steps per episode (the env's `episode_length`); truncated there, never terminated."""
    reset_noise_scale: float = 0.0
    """x0 is uniform in [0, reset_noise_scale]; 0 starts every episode at x = 0."""

    def __post_init__(self) -> None:
        if not self.length > 0:
            raise ValueError(f"length must be > 0, got {self.length}")
        if not self.step_size > 0:
            raise ValueError(f"step_size must be > 0, got {self.step_size}")
        for name in ("distractor_radius", "goal_radius", "reset_noise_scale"):
            value = getattr(self, name)
            if not 0.0 <= value <= self.length:
                raise ValueError(f"{name} must lie in [0, length={self.length}], got {value}")
        if self.distractor_radius > self.length - self.goal_radius:
            raise ValueError(
                "the distractor zone [0, distractor_radius) and the goal zone "
                "[length - goal_radius, length] must not overlap: need distractor_radius "
                f"({self.distractor_radius}) <= length - goal_radius "
                f"({self.length - self.goal_radius})"
            )
        for name in ("distractor_reward", "goal_reward", "action_cost_weight"):
            value = getattr(self, name)
            if not value >= 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        if self.horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {self.horizon}")

    @property
    def goal_start(self) -> float:
        """L - rho_g: the left edge of the goal zone."""
        return self.length - self.goal_radius

    @property
    def steps_to_goal(self) -> int:
        """n = ceil((L - rho_g) / delta): the fewest steps from x = 0 into the goal zone.

        A ratio within 1e-9 of an integer counts as that integer, so that e.g. 0.3 / 0.1 is 3.
        """
        ratio = self.goal_start / self.step_size
        nearest = round(ratio)
        if math.isclose(ratio, nearest, rel_tol=1e-9, abs_tol=1e-9):
            return int(nearest)
        return math.ceil(ratio)

    def reward_at(self, x: float, action: float = 0.0) -> float:
        """The reward (in Python floats) for a step that ends at `x` under `action`."""
        action = min(max(action, -1.0), 1.0)
        in_distractor = x < self.distractor_radius
        in_goal = x >= self.goal_start
        return (
            self.distractor_reward * in_distractor
            + self.goal_reward * in_goal
            - self.action_cost_weight * action**2
        )


@struct.dataclass
class ChainState:
    """What the chain keeps between steps (the `pipeline_state` of its `State`)."""

    x: jax.Array
    """Position in [0, L], float32 scalar."""


class ContinuousChain(Env):
    """The continuous chain (see the module docstring); a 1-dimensional Brax `Env`.

    Observation: [2 x / L - 1], the position rescaled to [-1, 1] (shape (1,)).
    Action: shape (1,), in [-1, 1] (clipped).
    Metrics: {"x_position": x after the step, "goal": 1.0 if that x is in the goal zone
    x >= L - rho_g, else 0.0}; after a reset "goal" is 0.0 (no step has ended anywhere yet).
    """

    def __init__(self, config: ChainConfig | None = None):
        self.config = config or self.default_config()
        self.episode_length = self.config.horizon

    @staticmethod
    def default_config() -> ChainConfig:
        return ChainConfig()

    # -- Brax Env interface ---------------------------------------------------------------
    @property
    def observation_size(self) -> int:
        return 1

    @property
    def action_size(self) -> int:
        return 1

    @property
    def backend(self) -> str:
        return "jax"

    def reset(self, rng: jax.Array) -> State:
        x = jax.random.uniform(rng, (), minval=0.0, maxval=self.config.reset_noise_scale)
        zero = jp.zeros(())
        return State(
            pipeline_state=ChainState(x=x),
            obs=self._get_obs(x),
            reward=zero,
            done=zero,
            metrics={"x_position": x, "goal": zero},
        )

    def step(self, state: State, action: jax.Array) -> State:
        cfg = self.config
        action = jp.clip(action, -1.0, 1.0)
        x = state.pipeline_state.x
        x = jp.clip(x + self._direction(x) * cfg.step_size * action[0], 0.0, self._length())
        return state.replace(
            pipeline_state=ChainState(x=x),
            obs=self._get_obs(x),
            reward=self._get_reward(x, action),
            done=jp.zeros(()),
            metrics={**state.metrics, "x_position": x, "goal": self._in_goal(x)},
        )

    # -- pure helpers ---------------------------------------------------------------------
    def _direction(self, x: jax.Array) -> jax.Array | float:
        """+1: the action moves the point right everywhere (the deep chain flips it per cell)."""
        return 1.0

    def _length(self) -> jax.Array | float:
        """L (a subclass with per-member lengths traces it)."""
        return self.config.length

    def _get_obs(self, x: jax.Array) -> jax.Array:
        return jp.reshape(2.0 * x / self.config.length - 1.0, (1,))

    def _goal_start(self) -> jax.Array | float:
        """L - rho_g, the left edge of the goal zone (a subclass with per-member lengths traces it)."""
        return self.config.goal_start

    def _in_goal(self, x: jax.Array) -> jax.Array:
        """1.0 where `x` is in the goal zone x >= L - rho_g, else 0.0 (float32)."""
        return (x >= self._goal_start()).astype(jp.float32)

    def _get_reward(self, x: jax.Array, action: jax.Array) -> jax.Array:
        """Reward of a step that ends at `x` under the clipped `action` (shape (1,))."""
        cfg = self.config
        in_distractor = (x < cfg.distractor_radius).astype(jp.float32)
        return (
            cfg.distractor_reward * in_distractor
            + cfg.goal_reward * self._in_goal(x)
            - cfg.action_cost_weight * jp.sum(jp.square(action))
        )

    # -- reference returns (x0 = 0, exact arithmetic) ---------------------------------------
    def distractor_return(self) -> float:
        """Return of the policy that stays at the start (a = 0 throughout) from x0 = 0.

        H * reward(0): H * r_d whenever rho_d > 0 (H * r_g in the degenerate case rho_g = L,
        where the goal zone covers the start; 0 if neither zone contains 0). At the defaults,
        100 * 0.1 = 10.
        """
        return self.config.horizon * self.config.reward_at(0.0)

    def goal_return(self) -> float:
        """Return of the policy that moves right at full speed for n steps, then stands still.

        n = `config.steps_to_goal` = ceil((L - rho_g) / delta). From x0 = 0 the positions are
        x_k = min(k delta, L) for k <= n, then x_n; each of the first min(n, H) steps pays
        reward(x_k) - w_a, each later step reward(x_n). With n <= H and the zones disjoint,

            goal_return = (H - n + 1) r_g + r_d * #{1 <= k < n : k delta < rho_d} - n w_a.

        At the defaults n = 9 (x = 1, ..., 8 lie in neither zone: 1 is not < rho_d = 1), so
        92 * 1.0 - 9 * 0.01 = 91.91. The float32 env reproduces this exactly when the positions
        k delta are exactly representable (as at the defaults).
        """
        cfg = self.config
        n = cfg.steps_to_goal
        total = 0.0
        x = 0.0
        for k in range(1, cfg.horizon + 1):
            if k <= n:
                x = min(k * cfg.step_size, cfg.length)
                total += cfg.reward_at(x, action=1.0)
            else:
                total += cfg.reward_at(x, action=0.0)
        return total

    def optimal_return(self) -> float:
        """The optimal return from x0 = 0: max(goal_return(), distractor_return()).

        The claim is proven, and this returns, only when (else `ValueError` naming what fails):

        1. reset_noise_scale == 0, so that x0 = 0; and
        2. either the goal is out of reach, n = ceil((L - rho_g) / delta) > H, or both
           (L - rho_g) / delta = n is an integer (within 1e-9) and r_g >= r_d + w_a.

        Argument (zones disjoint and rewards >= 0, as `ChainConfig` validates; write
        d = L - rho_g = n delta, c = #{1 <= k < n : k delta < rho_d}). Every step pays at most
        r_d outside the goal zone and at most r_g >= r_d inside it. A policy that never enters
        the goal therefore gets at most H r_d = distractor_return() if rho_d > 0, and at most
        0 = distractor_return() if rho_d = 0; this covers n > H, as each step moves at most
        delta. A policy that first enters the goal at step m >= n:

        - pays at most r_g on each of the H - m + 1 steps from m on;
        - spends at least floor((d - rho_d) / delta) = n - ceil(rho_d / delta) = n - 1 - c steps
          in [rho_d, d) after its last step in the distractor zone (from x < rho_d it needs more
          than (d - rho_d) / delta steps to reach d), so at most c + (m - n) of its first m - 1
          steps pay r_d (for rho_d > 0; with rho_d = 0 none does);
        - moves a total of sum_t |a_t| >= n over its first m steps, so pays at least
          w_a * sum a_t^2 >= w_a n^2 / m (Cauchy-Schwarz) >= w_a (n - (m - n)).

        Its return is thus at most goal_return() + (m - n)(r_d + w_a - r_g) <= goal_return().
        Where the conditions fail the claim can be false: if (L - rho_g) / delta is not an
        integer, full speed overshoots the goal's edge and a slower first move (a cheaper one,
        or one that stops inside the distractor zone) enters the goal on the same step for a
        higher return; if r_g < r_d + w_a, arriving later can pay more.
        """
        cfg = self.config
        failures = []
        if cfg.reset_noise_scale != 0.0:
            failures.append(f"reset_noise_scale = {cfg.reset_noise_scale} is not 0")
        n = cfg.steps_to_goal
        if n <= cfg.horizon:
            ratio = cfg.goal_start / cfg.step_size
            if not math.isclose(ratio, n, rel_tol=1e-9, abs_tol=1e-9):
                failures.append(f"(length - goal_radius) / step_size = {ratio} is not an integer")
            if cfg.goal_reward < cfg.distractor_reward + cfg.action_cost_weight:
                failures.append(
                    f"goal_reward ({cfg.goal_reward}) < distractor_reward + action_cost_weight "
                    f"({cfg.distractor_reward + cfg.action_cost_weight})"
                )
        if failures:
            raise ValueError(
                "optimal_return() is only proven when x0 = 0, and (L - goal_radius) / step_size "
                "is an integer n with goal_reward >= distractor_reward + action_cost_weight "
                "(or n > horizon); here " + "; ".join(failures)
            )
        return max(self.goal_return(), self.distractor_return())
