"""A run's evaluation replayed on the host with `mjx_pbac.load_policy`'s `act`, for the tests that
check a loaded policy acts as the run's own evaluation did (test_algos, test_policy)."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jp
import numpy as np


def replayed_returns(loaded, episodes: int) -> list[float]:
    """[E] returns of `loaded`'s member over `episodes` episodes, stepped one env step at a time
    from the host: the episodes the run's evaluation at `loaded.env_steps` ran (reset keys from
    the member's seed and those env steps, `loop.make_trainer`'s `evaluate_policy`), each action
    from `loaded.act` on the observations the host holds."""
    env = loaded.env
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(loaded.member.seed), 1), loaded.env_steps)
    state = jax.jit(jax.vmap(env.reset))(jax.random.split(key, episodes))
    step = jax.jit(jax.vmap(env.step))
    returns, alive = jp.zeros((episodes,)), jp.ones((episodes,), bool)
    for _ in range(env.episode_length):
        state = step(state, loaded.act(state.obs))
        returns = returns + jp.where(alive, state.reward, 0.0)
        alive = jp.logical_and(alive, state.done == 0)
    return [float(value) for value in np.asarray(returns)]


def logged_row(run_dir: Path, member: int, env_steps: int) -> dict:
    """Member `member`'s eval.jsonl row at `env_steps`."""
    rows = [json.loads(line) for line in (Path(run_dir) / "eval.jsonl").read_text().splitlines()]
    (row,) = [r for r in rows if r["member"] == member and r["env_steps"] == env_steps]
    return row
