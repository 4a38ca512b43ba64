"""Episode limits and automatic resets that keep what an off-policy learner needs.

Brax's own `EpisodeWrapper` + `AutoResetWrapper` also accept our envs (see `envs.make` and the
Brax PPO test), but they fold truncation into `done`, reset to one fixed initial state and drop the
final observation. `EpisodeAutoReset` instead:

- keeps `State.done` = terminated (bootstrap on 1 - done), and reports the time limit separately
  in `info["truncation"]`;
- resets an ended episode from a fresh key (new reset noise every episode);
- keeps the real last observation of an ended episode in `info["final_obs"]` while `State.obs`
  already holds the first observation of the next one (Gymnasium's "same-step" autoreset);
- redraws the env's own `info` entries (per-episode task parameters such as reacher's target)
  with the reset.

The reset of an instance is computed on every step and selected where the episode ended: a
branch would cost a device-to-host round trip per step on a GPU. It is cheap by construction:
an MJX env's reset samples a state and computes only what its first observation reads
(`MjxEnv.data_from_state`: kinematics, no collision, no constraint solve), since the next
physics step recomputes everything else from qpos and qvel; so a step that does not end an
episode pays one random draw and a kinematics pass, not a forward pass (measured on the CPU,
docs/performance.md "The paper's sequential setting: latency": 374 of Ant's 17,124 executed ops per step; `benchmarks/env_ops.py`).

Both flags describe the transition just taken, so a replay buffer stores
(obs, action, reward, info["final_obs"], done, info["truncation"]).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
from brax.envs.base import Env, State, Wrapper
from brax.envs.wrappers.training import VmapWrapper


class EpisodeAutoReset(Wrapper):
    """Time limit plus automatic reset with fresh noise; see the module docstring."""

    def __init__(self, env: Env, episode_length: int | None = None):
        super().__init__(env)
        self.episode_length = int(episode_length or env.unwrapped.episode_length)
        if self.episode_length < 1:
            raise ValueError(f"episode_length must be >= 1, got {self.episode_length}")

    def reset(self, rng: jax.Array) -> State:
        rng, rng_reset = jax.random.split(rng)
        state = self.env.reset(rng_reset)
        zero = jp.zeros(())
        state.info.update(
            rng=rng,
            steps=jp.zeros((), dtype=jp.int32),
            truncation=zero,
            final_obs=state.obs,
            episode_return=zero,
            completed_return=zero,
            completed_length=jp.zeros((), dtype=jp.int32),
        )
        return state

    def step(self, state: State, action: jax.Array) -> State:
        info = state.info
        stepped = self.env.step(state, action)
        steps = info["steps"] + 1
        terminated = stepped.done > 0
        truncated = jp.logical_and(steps >= self.episode_length, jp.logical_not(terminated))
        ended = jp.logical_or(terminated, truncated)
        episode_return = info["episode_return"] + stepped.reward

        rng, rng_reset = jax.random.split(info["rng"])
        fresh = self.env.reset(rng_reset)

        def restart(fresh_leaf: jax.Array, stepped_leaf: jax.Array) -> jax.Array:
            return jp.where(ended, fresh_leaf, stepped_leaf)

        new_info = dict(stepped.info)
        # The env's own info entries (e.g. reacher's target) are per-episode: redrawn with the reset.
        for name, fresh_value in fresh.info.items():
            new_info[name] = jax.tree.map(restart, fresh_value, stepped.info[name])
        new_info.update(
            rng=rng,
            steps=jp.where(ended, 0, steps),
            truncation=truncated.astype(jp.float32),
            final_obs=stepped.obs,
            episode_return=jp.where(ended, 0.0, episode_return),
            completed_return=jp.where(ended, episode_return, info["completed_return"]),
            completed_length=jp.where(ended, steps, info["completed_length"]),
        )
        return stepped.replace(
            pipeline_state=jax.tree.map(restart, fresh.pipeline_state, stepped.pipeline_state),
            obs=restart(fresh.obs, stepped.obs),
            info=new_info,
        )


class BatchedEnv(VmapWrapper):
    """`num_envs` instances stepped as one batch: `reset(rng)` takes a single key."""

    def __init__(self, env: Env, num_envs: int):
        super().__init__(env, batch_size=num_envs)
        self.num_envs = num_envs


def wrap_for_training(env: Env, num_envs: int, episode_length: int | None = None) -> BatchedEnv:
    """`num_envs` auto-resetting copies of `env` with its time limit (see `EpisodeAutoReset`)."""
    return BatchedEnv(EpisodeAutoReset(env, episode_length), num_envs)
