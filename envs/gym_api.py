"""Gymnasium access to the batched MJX envs: a `gymnasium.vector.VectorEnv` and registered ids.

For tools that speak Gymnasium rather than JAX. `MjxVectorEnv` runs `num_envs` copies of a
registered env as one jitted batch (`envs.wrappers.wrap_for_training`) and hands back float32
NumPy arrays:

    vec = MjxVectorEnv("hopper_delayed", num_envs=8, seed=0)
    obs, info = vec.reset(seed=0)                     # obs: (8, 11) float32
    obs, reward, terminated, truncated, info = vec.step(actions)   # actions: (8, 3) in [-1, 1]

or, through Gymnasium's registry (ids exist once `envs` is imported):

    gymnasium.make_vec("mjx_pbac/hopper_delayed-v0", num_envs=8, seed=0)
    gymnasium.make_vec("envs:mjx_pbac/hopper_delayed-v0", num_envs=8)   # imports `envs` itself

Id scheme: `"mjx_pbac/<name>-v0"` for every `name` in `envs.registered_names()`, the name kept
as it is (snake_case) so that an id and `envs.make` name map one to one. Keyword arguments of
`make_vec` go to `MjxVectorEnv`: `seed`, `max_episode_steps`, `record_episode_statistics`, and
otherwise config overrides of the env (`delay_threshold=1.0`, `episode_length=200`, ...). The ids
have only a `vector_entry_point`: `gymnasium.make` (single, unbatched env) and the "sync" /
"async" modes are not offered, since the point is one jitted batch.

Autoreset is Gymnasium's SAME_STEP mode, as `EpisodeAutoReset` does it on the device: where an
episode ended this step, `obs` is already the next episode's first observation, and
`info["final_obs"]` / `info["_final_obs"]` hold the real last observation and the mask of ended
envs, in the layout `gymnasium.vector.SyncVectorEnv` uses (an object array with one observation
per ended env and None elsewhere; `np.stack(info["final_obs"][info["_final_obs"]])` gives the
dense rows). `terminated` is the env's `State.done` (do not bootstrap); `truncated` is the time
limit. `info["episode"] = {"r", "l", "t"}` with mask `info["_episode"]` reports finished episodes
as `gymnasium.wrappers.vector.RecordEpisodeStatistics` does; pass
`record_episode_statistics=False` to use that wrapper instead (it refuses an existing key).
"""

from __future__ import annotations

import functools
import time
from typing import Any

import gymnasium
import jax
import jax.numpy as jp
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from envs.base import Env
from envs.registry import make, registered_names
from envs.wrappers import BatchedEnv, wrap_for_training

__all__ = [
    "GYMNASIUM_NAMESPACE",
    "MjxVectorEnv",
    "gymnasium_id",
    "register_gymnasium_envs",
]

GYMNASIUM_NAMESPACE = "mjx_pbac"
GYMNASIUM_VERSION = 0
_VECTOR_ENTRY_POINT = "envs.gym_api:MjxVectorEnv"


def gymnasium_id(name: str) -> str:
    """The Gymnasium id of the registered env `name`: `"mjx_pbac/<name>-v0"`."""
    return f"{GYMNASIUM_NAMESPACE}/{name}-v{GYMNASIUM_VERSION}"


def register_gymnasium_envs() -> list[str]:
    """Registers a Gymnasium id for every name in `envs.registered_names()`; returns the ids.

    Idempotent: an id already registered by this function is left as it is, so calling it again
    (e.g. after `envs.register` added a name) only adds the new ones. Builds and compiles nothing.
    """
    ids = []
    for name in registered_names():
        env_id = gymnasium_id(name)
        existing = gymnasium.registry.get(env_id)
        ours = (
            existing is not None
            and existing.vector_entry_point == _VECTOR_ENTRY_POINT
            and existing.kwargs == {"env": name}
        )
        if not ours:
            gymnasium.register(
                env_id, vector_entry_point=_VECTOR_ENTRY_POINT, kwargs={"env": name}
            )
        ids.append(env_id)
    return ids


class _Compiled:
    """A batched env with its jitted `reset` and `step`; shared by vector envs of equal config."""

    def __init__(self, env: Env, num_envs: int, max_episode_steps: int | None):
        self.batched: BatchedEnv = wrap_for_training(env, num_envs, max_episode_steps)
        self.reset = jax.jit(self.batched.reset)
        self.step = jax.jit(self.batched.step)


@functools.lru_cache(maxsize=16)
def _compiled_for_name(
    name: str, overrides: tuple[tuple[str, Any], ...], num_envs: int, max_episode_steps: int | None
) -> _Compiled:
    # Training and evaluation envs of the same task reuse one compilation (15-30 s on a CPU).
    return _Compiled(make(name, **dict(overrides)), num_envs, max_episode_steps)


class MjxVectorEnv(VectorEnv):
    """`num_envs` copies of an MJX env as a Gymnasium vector env (same-step autoreset).

    Args:
        env: a name in `envs.registered_names()`, or an already built Brax `Env` (then
            `overrides` must be empty).
        num_envs: batch size; every array returned has it as its leading axis.
        seed: seeds the first `reset()` when it is called without a seed.
        max_episode_steps: time limit; None keeps the env's own `episode_length`.
        record_episode_statistics: report finished episodes in `info["episode"]`.
        **overrides: config overrides of a registered env, checked as `envs.make` checks them.

    `reset` and `step` are each compiled once (fixed shapes; the compilation is shared with
    other instances of the same name, overrides, `num_envs` and time limit). All randomness comes
    from `np_random`, which `reset(seed=s)` reseeds, so a seed fixes every later episode too.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}  # noqa: RUF012 - Gymnasium's class-level default, copied per instance

    def __init__(
        self,
        env: str | Env,
        num_envs: int,
        seed: int | None = None,
        max_episode_steps: int | None = None,
        record_episode_statistics: bool = True,
        **overrides: Any,
    ):
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        if isinstance(env, str):
            self.env_name: str | None = env
            try:
                self._compiled = _compiled_for_name(
                    env, tuple(sorted(overrides.items())), num_envs, max_episode_steps
                )
            except TypeError as error:  # unhashable override value: build uncached
                if "unhashable" not in str(error):
                    raise
                self._compiled = _Compiled(make(env, **overrides), num_envs, max_episode_steps)
        else:
            if overrides:
                raise ValueError(
                    f"overrides {sorted(overrides)} apply only to a registered env name, "
                    "not to an env instance"
                )
            self.env_name = None
            self._compiled = _Compiled(env, num_envs, max_episode_steps)

        batched = self._compiled.batched
        self.num_envs = num_envs
        self.episode_length: int = batched.env.episode_length
        self.record_episode_statistics = record_episode_statistics
        self.single_observation_space = gymnasium.spaces.Box(
            -np.inf, np.inf, shape=(batched.observation_size,), dtype=np.float32
        )
        self.single_action_space = gymnasium.spaces.Box(
            -1.0, 1.0, shape=(batched.action_size,), dtype=np.float32
        )
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.metadata = dict(type(self).metadata)

        if seed is not None:
            self._np_random, self._np_random_seed = gymnasium.utils.seeding.np_random(seed)
        self._state: Any = None
        self._episode_start_times = np.zeros(num_envs)

    # -- Gymnasium VectorEnv ------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Starts a fresh episode in every env; `seed` makes this and all later episodes repeatable.

        `options` is accepted for the API but must be empty (no partial resets: with same-step
        autoreset every env is always mid-episode).
        """
        if options:
            raise ValueError(f"MjxVectorEnv.reset takes no options, got {sorted(options)}")
        super().reset(seed=seed)
        key_seed = self.np_random.integers(0, 2**32, dtype=np.uint32)
        self._state = self._compiled.reset(jax.random.PRNGKey(key_seed))
        self._episode_start_times = np.full(self.num_envs, time.perf_counter())
        obs, metrics = jax.device_get((self._state.obs, self._state.metrics))
        info = self._metrics_info(metrics, np.ones(self.num_envs, dtype=bool))
        return np.array(obs, dtype=np.float32), info

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One step of every env with `actions` of shape `(num_envs, action_size)` in [-1, 1].

        Actions outside [-1, 1] are clipped by the env. Returns float32 observations and rewards,
        boolean `terminated` and `truncated`, and the info described in the module docstring.
        """
        if self._state is None:
            raise gymnasium.error.ResetNeeded("call reset() before step()")
        actions = self._check_actions(actions)
        self._state = self._compiled.step(self._state, actions)
        state = self._state
        obs, reward, done, truncation, final_obs, ep_return, ep_length, metrics = jax.device_get(
            (
                state.obs,
                state.reward,
                state.done,
                state.info["truncation"],
                state.info["final_obs"],
                state.info["completed_return"],
                state.info["completed_length"],
                state.metrics,
            )
        )
        terminated = np.asarray(done) > 0
        truncated = np.asarray(truncation) > 0
        ended = terminated | truncated

        info = self._metrics_info(metrics, np.ones(self.num_envs, dtype=bool))
        if ended.any():
            final = np.full(self.num_envs, None, dtype=object)
            for i in np.flatnonzero(ended):
                final[i] = np.array(final_obs[i], dtype=np.float32)
            info["final_obs"], info["_final_obs"] = final, ended.copy()
            info["final_info"] = self._metrics_info(metrics, ended)
            info["_final_info"] = ended.copy()
            if self.record_episode_statistics:
                info["episode"], info["_episode"] = self._episode_stats(ep_return, ep_length, ended)

        return (
            np.array(obs, dtype=np.float32),
            np.array(reward, dtype=np.float32),
            terminated,
            truncated,
            info,
        )

    def close_extras(self, **kwargs: Any) -> None:
        self._state = None

    # -- helpers ------------------------------------------------------------------------------
    def _check_actions(self, actions: Any) -> jax.Array:
        shape = self.action_space.shape
        try:
            array = np.asarray(actions, dtype=np.float32)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"actions must be a numeric array of shape {shape} (num_envs, action_size); "
                f"could not convert {type(actions).__name__}: {error}"
            ) from error
        if array.shape != shape:
            raise ValueError(
                f"actions must have shape {shape} (num_envs={self.num_envs}, "
                f"action_size={shape[1]}), got {array.shape}"
            )
        return jp.asarray(array)

    def _metrics_info(self, metrics: dict[str, Any], mask: np.ndarray) -> dict[str, Any]:
        """Per-env metrics (e.g. x_position) with Gymnasium's `_key` masks; zero where unmasked."""
        info: dict[str, Any] = {}
        for key, value in metrics.items():
            value = np.asarray(value)
            info[key] = np.where(mask.reshape((-1,) + (1,) * (value.ndim - 1)), value, 0)
            info[f"_{key}"] = mask.copy()
        return info

    def _episode_stats(
        self, ep_return: np.ndarray, ep_length: np.ndarray, ended: np.ndarray
    ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        now = time.perf_counter()
        stats = {
            "r": np.where(ended, np.asarray(ep_return, dtype=np.float64), 0.0),
            "l": np.where(ended, np.asarray(ep_length, dtype=np.int64), 0),
            "t": np.where(ended, np.round(now - self._episode_start_times, 6), 0.0),
        }
        self._episode_start_times[ended] = now
        return stats, ended.copy()
