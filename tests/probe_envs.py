"""Tiny Brax envs and batches whose every transition is known, for testing the loop, the buffer
and the algorithms' updates."""

from __future__ import annotations

import jax
import jax.numpy as jp
from brax.envs.base import Env, State


class CountingEnv(Env):
    """obs = [t, 0] with t the step within the episode; reward = t after the step.

    Terminates on the step that reaches `terminate_at` (if given); `episode_length` is the time
    limit the auto-reset wrapper applies. The action is ignored, except that its first entry is
    copied to obs[1] so tests can see which action was stored.
    """

    def __init__(self, episode_length: int = 5, terminate_at: int | None = None):
        self.episode_length = episode_length
        self.terminate_at = terminate_at

    @property
    def observation_size(self) -> int:
        return 2

    @property
    def action_size(self) -> int:
        return 1

    @property
    def backend(self) -> str:
        return "jax"

    def reset(self, rng: jax.Array) -> State:
        zero = jp.zeros(())
        return State(pipeline_state=zero, obs=jp.zeros((2,)), reward=zero, done=zero, metrics={})

    def step(self, state: State, action: jax.Array) -> State:
        t = state.pipeline_state + 1.0
        done = jp.zeros(()) if self.terminate_at is None else (t >= self.terminate_at).astype(jp.float32)
        return state.replace(pipeline_state=t, obs=jp.stack([t, action[0]]), reward=t, done=done)


class CoinEnv(CountingEnv):
    """A success env (Meta-World's contract: reward = success at that step, in {0, 1}; never
    terminal; `reports_success`): each episode draws a coin at reset (obs[1], 1 with probability
    `p`), and the reward is the coin at every step t >= 2. An episode that succeeds therefore
    returns episode_length - 1 (4 with the default 5 steps), one that fails 0: its success
    rate is the fraction of returns > 0, not the mean return."""

    reports_success = True

    def __init__(self, episode_length: int = 5, p: float = 0.5):
        super().__init__(episode_length)
        self.p = p

    def reset(self, rng: jax.Array) -> State:
        zero = jp.zeros(())
        coin = jax.random.bernoulli(rng, self.p).astype(jp.float32)
        return State(pipeline_state=jp.stack([zero, coin]), obs=jp.stack([zero, coin]), reward=zero, done=zero, metrics={})

    def step(self, state: State, action: jax.Array) -> State:
        t, coin = state.pipeline_state[0] + 1.0, state.pipeline_state[1]
        reward = jp.where(t >= 2, coin, 0.0)
        return state.replace(pipeline_state=jp.stack([t, coin]), obs=jp.stack([t, coin]), reward=reward, done=jp.zeros(()))


def value_batch(values, obs_size: int = 2):
    """A batch of transitions whose every field is read off `values`: obs = value (in every
    dimension), action = value, reward = value, next_obs = value + 0.5; truncated, not terminated."""
    from mjx_pbac import replay

    values = jp.asarray(values, jp.float32)
    n = values.shape[0]
    return replay.Transition(
        obs=jp.tile(values[:, None], (1, obs_size)),
        action=values[:, None],
        reward=values,
        next_obs=jp.tile(values[:, None] + 0.5, (1, obs_size)),
        terminated=jp.zeros(n),
        truncated=jp.ones(n),
    )


def same_tree(a, b) -> bool:
    """True when two pytrees hold bitwise-equal leaves (e.g. parameters before and after a step)."""
    import jax

    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(leaves_a) == len(leaves_b) and all(bool(jp.array_equal(x, y)) for x, y in zip(leaves_a, leaves_b))
