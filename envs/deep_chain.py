"""The deep-sea chain: the continuous chain with a fixed random action sign in every cell.

The segment [0, L] is cut into cells [i delta, (i + 1) delta), i = 0, ..., num_cells - 1 (delta
the step size). Each cell i carries a sign s_i in {-1, +1}, drawn once, iid with probability 1/2
each, from `np.random.default_rng(sign_seed)`. A step from x under the action a moves the point by

    x' = clip(x + delta * s_{cell(x)} * clip(a, -1, 1), 0, L),    cell(x) = min(floor(x / delta), num_cells - 1),

so the action moves the point right only where its sign matches the cell's. Rewards, horizon,
resets and (non-)termination are the continuous chain's (`envs.chain`): r_d while x' < rho_d, r_g
while x' >= L - rho_g, minus w_a a^2 per step, H steps, never terminated, x0 ~ U[0,
reset_noise_scale].

Why this is a deep-exploration probe. To enter the goal zone from x0 = 0 the point must cross the
n = ceil((L - rho_g) / delta) cells 0, ..., n - 1, and it leaves cell i to the right only under an
action of sign s_i. A constant action a climbs while the signs agree with it and, at the first cell
j whose sign differs, is sent back into cell j - 1, whose sign agrees, and so forth: it oscillates
between cells j - 1 and j (or sits at x = 0 if j = 0) and never reaches the goal. `DeepChainConfig`
refuses a sign_seed whose cells 0, ..., n - 1 do not hold both signs, so this holds for every
configuration that can be built. A random policy is a random walk, which reaches the goal with a
probability that falls steeply with n (`DeepChain.reach_probability`); an agent must learn the
sign of each cell it has seen and commit to it, cell after cell, before it ever sees the reward.

The observation is tabular, in the spirit of the deep-sea problem: the one-hot of the cell and the
position within it, concat(one_hot(cell(x), num_cells), [x / delta - cell(x)]). A cell's sign is
learnable from visits to that cell but does not generalise to the next one (it is an independent
coin), unlike the plain chain, where "go right" is one smooth function of x.

One maze per sign_seed. The signs depend on sign_seed and num_cells alone: every env instance,
every member of a program and every length of a run sees the same maze (a longer chain extends a
shorter one: the draw of cell i does not depend on num_cells either). The seeds of an experiment
vary the agents, not the maze; a different maze is a different sign_seed.

Lattice. L / delta must be an integer and every lattice position k delta (k = 0, ..., L / delta)
exactly representable in float32 (delta = 1, 0.5, 2, ...: only L / delta shapes the maze), so a
point moved by |a| = 1 stays exactly on the lattice and its cell is exact. `DeepChain.cell` is an
epsilon-free floor: floor(x / delta), corrected by one against the boundaries k delta, so x = k delta
gives cell k exactly and a point a float32 ulp below gives k - 1.

Per-member lengths. `length` is the config's one task field: `deep_chain_10`, `deep_chain_20`, ...
(`envs.make_family`) are one compiled program whose members carry their own L in a
`DeepChainTask`; `DeepChain.with_task` uses the traced L for the clipping and the goal zone. The
signs, the one-hot and num_cells do not depend on L.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from fractions import Fraction
from typing import ClassVar

import jax
import jax.numpy as jp
import numpy as np
from flax import struct

from envs.chain import ChainConfig, ContinuousChain

__all__ = ["REACH_POLICIES", "DeepChain", "DeepChainConfig", "DeepChainTask"]

REACH_POLICIES = ("random_sign", "constant", "committed_random")
"""The reference policies of `DeepChain.reach_probability`."""


def draw_signs(sign_seed: int, num_cells: int) -> np.ndarray:
    """The cell signs s_0, ..., s_{num_cells - 1} in {-1, +1} (float32) of `sign_seed`.

    s_i = -1 where the i-th uniform draw of `np.random.default_rng(sign_seed).random` is below 1/2,
    else +1: iid, 1/2 each, and the draw of cell i does not depend on num_cells.
    """
    uniforms = np.random.default_rng(sign_seed).random(num_cells)
    return np.where(uniforms < 0.5, -1.0, 1.0).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class DeepChainConfig(ChainConfig):
    """Parameters of the deep-sea chain: the chain's (`ChainConfig`, default length 20) plus the
    maze. Every field can be overridden through `envs.make`."""

    TASK_FIELDS: ClassVar[tuple[str, ...]] = ("length",)
    """Lengths of one maze (one sign_seed) are per-member task constants (`DeepChainTask`)."""

    length: float = 20.0
    """L: the position lives in [0, L]; L / step_size must be an integer below num_cells."""
    sign_seed: int = 0
    """Seeds `np.random.default_rng`, which draws the cell signs: one maze per sign_seed, the same
    for every instance, member and length. 0 gives both signs among the cells to cross for every
    length 3, ..., 60 at the default step size and goal radius (tested)."""
    num_cells: int = 64
    """Cells [i delta, (i + 1) delta), i < num_cells; the observation's one-hot width."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.sign_seed, bool) or not isinstance(self.sign_seed, int) or self.sign_seed < 0:
            raise ValueError(f"sign_seed must be an integer >= 0, got {self.sign_seed!r}")
        if isinstance(self.num_cells, bool) or not isinstance(self.num_cells, int) or self.num_cells < 1:
            raise ValueError(f"num_cells must be an integer >= 1, got {self.num_cells!r}")
        ratio = self.length / self.step_size
        cells = round(ratio)
        if not math.isclose(ratio, cells, rel_tol=1e-9, abs_tol=1e-9):
            raise ValueError(
                f"length / step_size must be an integer so that positions under |a| = 1 stay on the "
                f"lattice of cells; got length {self.length} / step_size {self.step_size} = {ratio}"
            )
        if cells >= self.num_cells:
            raise ValueError(
                f"length / step_size = {cells} cells (length {self.length}, step_size "
                f"{self.step_size}) needs num_cells > {cells} so that x = length lies in a cell; "
                f"num_cells is {self.num_cells}: raise num_cells to at least {cells + 1} or "
                f"shorten the chain"
            )
        for k in range(cells + 1):
            exact = k * self.step_size
            if float(np.float32(exact)) != exact or (k == cells and float(np.float32(self.length)) != exact):
                raise ValueError(
                    f"step_size {self.step_size} puts the lattice position {k} * step_size = {exact!r} "
                    f"(length {self.length}) off float32's grid, so positions under |a| = 1 would "
                    f"drift across cell boundaries; use a step_size that float32 holds exactly with "
                    f"its multiples (1, 0.5, 0.25, 2, ...): only length / step_size shapes the maze"
                )
        n = self.steps_to_goal
        if n < 2:
            raise ValueError(
                f"the agent must cross at least 2 cells to the goal zone for the maze to hold both "
                f"signs; here steps_to_goal = {n} (length {self.length}, goal_radius "
                f"{self.goal_radius}, step_size {self.step_size}): lengthen the chain or shrink the "
                f"goal zone"
            )
        if len(set(self.signs[:n].tolist())) < 2:
            raise ValueError(
                f"sign_seed {self.sign_seed} gives the same sign to all {n} cells from x = 0 to the "
                f"goal zone (length {self.length}), so a constant action would reach the goal; "
                f"choose another sign_seed"
            )

    @property
    def signs(self) -> np.ndarray:
        """s_0, ..., s_{num_cells - 1} in {-1, +1} (float32), drawn from sign_seed (`draw_signs`)."""
        return draw_signs(self.sign_seed, self.num_cells)

    @property
    def lattice_cells(self) -> int:
        """L / delta: x = L lies in this cell, the last the point can reach."""
        return round(self.length / self.step_size)


@struct.dataclass
class DeepChainTask:
    """A deep chain's per-member task constant (`DeepChainConfig.TASK_FIELDS`) as an array, so
    that members of one program can run different lengths of one maze (`DeepChain.with_task`)."""

    length: jax.Array
    """L, float32 scalar: the clipping bound and, with the config's goal_radius, the goal zone."""


class DeepChain(ContinuousChain):
    """The deep-sea chain (see the module docstring); a Brax `Env`.

    Observation: concat(one_hot(cell(x), num_cells), [x / delta - cell(x)]), shape (num_cells + 1,).
    Action: shape (1,), in [-1, 1] (clipped).
    Metrics: {"x_position": x after the step, "goal": 1.0 if that x >= L - rho_g else 0.0}
    ("goal" is 0.0 after a reset).
    """

    config: DeepChainConfig

    def __init__(self, config: DeepChainConfig | None = None):
        super().__init__(config)
        self._signs = self.config.signs
        self._task: DeepChainTask | None = None

    @staticmethod
    def default_config() -> DeepChainConfig:
        return DeepChainConfig()

    @property
    def signs(self) -> np.ndarray:
        """The cell signs (`DeepChainConfig.signs`)."""
        return self.config.signs

    @property
    def observation_size(self) -> int:
        return self.config.num_cells + 1

    # -- task constants -------------------------------------------------------------------------
    def task_params(self) -> DeepChainTask:
        """This env's length (from its config) as a float32 array."""
        return DeepChainTask(length=jp.asarray(self.config.length, jp.float32))

    def with_task(self, task: DeepChainTask) -> DeepChain:
        """This env (same maze) with the length of `task`, which may be traced, e.g. one member's
        of a vmapped program: it bounds the position and places the goal zone [L - rho_g, L]."""
        env = copy.copy(self)
        env._task = task
        return env

    def _length(self) -> jax.Array | float:
        return self.config.length if self._task is None else self._task.length

    def _goal_start(self) -> jax.Array | float:
        return self._length() - self.config.goal_radius

    # -- Brax Env interface ---------------------------------------------------------------------
    # reset is the chain's: x0 ~ U[0, reset_noise_scale], observation from `_get_obs`.

    # step is the chain's with the move's direction flipped by the cell's sign (`_direction`).

    # -- pure helpers ---------------------------------------------------------------------------
    def _direction(self, x: jax.Array) -> jax.Array:
        """s_{cell(x)}: the action moves the point right only where its sign matches the cell's."""
        return jp.asarray(self._signs)[self.cell(x)]

    def cell(self, x: jax.Array) -> jax.Array:
        """cell(x) = min(floor(x / delta), num_cells - 1) as int32, exact at the cell boundaries.

        floor(x / delta) in float32 may round across an integer (x / delta is rounded before the
        floor), so it is corrected by one against the boundaries k delta themselves: the result is
        the k with k delta <= x < (k + 1) delta, compared in float32, where the config guarantees
        that the lattice positions k delta are exact. No epsilon is involved.
        """
        delta = self.config.step_size
        k = jp.floor(x / delta)
        k = k - (x < k * delta).astype(k.dtype) + (x >= (k + 1.0) * delta).astype(k.dtype)
        return jp.clip(k, 0, self.config.num_cells - 1).astype(jp.int32)

    def _get_obs(self, x: jax.Array) -> jax.Array:
        cell = self.cell(x)
        within = x / self.config.step_size - cell  # position inside the cell, in [0, 1]
        one_hot = jax.nn.one_hot(cell, self.config.num_cells, dtype=jp.float32)
        return jp.concatenate([one_hot, jp.reshape(within, (1,)).astype(jp.float32)])

    # -- reference values (x0 = 0, exact arithmetic, from the config) ---------------------------
    def distractor_return(self) -> float:
        """Return of a = 0 throughout from x0 = 0: the chain's (the signs multiply a = 0)."""
        return super().distractor_return()

    def goal_return(self) -> float:
        """Return of the policy that plays a = s_{cell(x)} until it is in the goal zone, then a = 0.

        It moves exactly as the chain's full-speed policy (x_k = k delta for k <= n), at the same
        action cost |a| = 1, so its return is the chain's `goal_return()`; see there.
        """
        return super().goal_return()

    def optimal_return(self) -> float:
        """The optimal return from x0 = 0, under the conditions of `ContinuousChain.optimal_return`
        (else `ValueError`): the chain's, max(goal_return(), distractor_return()).

        The chain's proof carries over. It uses only that the reward depends on the position after
        the step and on a^2, and that a step moves the point by at most |a| delta; here the point
        moves by |s a| delta = |a| delta (before clipping) whatever the signs, so every bound holds
        as stated. The bound is attained: a = s_{cell(x)} for n steps, then a = 0 (`goal_return`),
        moves exactly as full speed does on the chain. Knowing the signs is what makes that policy
        available; the optimum itself does not depend on them.
        """
        return super().optimal_return()

    def reach_probability(self, policy: str) -> float:
        """The probability that `policy` enters the goal zone x >= L - rho_g within the horizon H
        from x0 = 0 (exact; from the config: a `with_task` copy answers for its config's length).

        Write n = steps_to_goal: from x0 = 0 the point must cross cells 0, ..., n - 1 and is in the
        goal zone exactly at the lattice positions k delta with k >= n.

        - "random_sign": a = +1 or -1 with probability 1/2 each step, independently (the uniform
          random policy over the action's extremes). s a is again +-1 with probability 1/2
          whatever s is, so the position is a simple random walk on the lattice 0, ..., n, held at
          0 (a step left from 0 is clipped) and absorbed at n. Exact by dynamic programming over
          the lattice, counting action sequences in integers.
        - "constant": a fixed action; +1 and -1 are simulated for H steps with the actual signs
          and the fraction of the two that reach is returned. It is 0 for every valid config: the
          point climbs while the signs agree with a and oscillates at the first cell that
          disagrees (`DeepChainConfig` refuses a seed without such a cell among 0, ..., n - 1);
          any other constant, |a| < 1 included, stalls at the same cell.
        - "committed_random": each episode draws a uniformly random table a(i) in {+1, -1}, one
          per cell, and plays a(cell(x)) throughout. If the table disagrees with the signs at a
          cell among 0, ..., n - 1, let j be the first such cell: the point climbs to cell j, is
          sent back into cell j - 1, whose table entry is right, climbs again, and so on forever
          (for j = 0 it is held at 0); it never passes cell j. If the table agrees on all n cells
          it walks straight to the goal in n steps. So it reaches iff the n independent fair
          coins all match and n <= H: 2^-n, or 0 when n > H.

        For a ~ U[-1, 1], the trainer's warm-up, s a is again U[-1, 1] and the walk is the plain
        chain's; there is no closed form here (the tests estimate it by Monte Carlo).
        """
        cfg = self.config
        if policy not in REACH_POLICIES:
            raise ValueError(f"unknown policy {policy!r}; valid: {', '.join(REACH_POLICIES)}")
        if cfg.reset_noise_scale != 0.0:
            raise ValueError(
                f"reach_probability is computed from x0 = 0; here reset_noise_scale = "
                f"{cfg.reset_noise_scale} is not 0"
            )
        n, horizon = cfg.steps_to_goal, cfg.horizon
        if policy == "random_sign":
            return float(_random_walk_reach(n, horizon))
        if policy == "committed_random":
            return float(Fraction(1, 2**n)) if n <= horizon else 0.0
        reached = [_constant_reaches(cfg, a) for a in (1, -1)]
        return sum(reached) / len(reached)


def _random_walk_reach(n: int, horizon: int) -> Fraction:
    """P(a simple random walk from 0, held at 0, hits n within `horizon` steps), exactly.

    counts[k] is the number of the 2^t action sequences of length t that are at k without having
    hit n; one that hits n at step t stands for 2^(horizon - t) sequences of length `horizon`.
    """
    counts = [1] + [0] * (n - 1)
    hits = 0
    for t in range(1, horizon + 1):
        new = [0] * n
        for k, count in enumerate(counts):
            if count:
                new[max(k - 1, 0)] += count
                if k + 1 == n:
                    hits += count << (horizon - t)
                else:
                    new[k + 1] += count
        counts = new
    return Fraction(hits, 2**horizon)


def _constant_reaches(cfg: DeepChainConfig, action: int) -> bool:
    """Whether the constant action +-1 enters the goal zone within the horizon from x0 = 0,
    simulated on the lattice (integer positions k, x = k delta) with the config's signs."""
    signs = cfg.signs
    k = 0
    for _ in range(cfg.horizon):
        k = min(max(k + int(signs[min(k, cfg.num_cells - 1)]) * action, 0), cfg.lattice_cells)
        if k >= cfg.steps_to_goal:
            return True
    return False
