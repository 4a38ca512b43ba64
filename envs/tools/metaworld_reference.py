"""Reference recordings from Meta-World's own (C MuJoCo) environments.

This module is the *reference side* of the MJX Meta-World port check.  It
imports only numpy, mujoco and metaworld (plus the standard library), so it
can be copied alone into an isolated venv, e.g. one with ``mujoco==3.3.0``
(see ``benchmarks/metaworld_reference_mujoco33.sh``).  Do not import jax,
``mjx_pbac`` or other ``envs`` modules here.

Setting (the paper's): MT1, hidden goal (``_partially_observable = True``: the
last three observation entries are zero), a fresh random goal/object position
per episode (``_freeze_rand_vec = False``, drawn from the env's seeded
``np_random`` via ``seeded_rand_vec = True``), 500-step episodes, and the
sparse reward ``info["success"]`` (Meta-World's dense reward is recorded too).

API
---
``make_reference_env(task, seed, patch=None)``
    Meta-World env for ``task``; the mocap-weld ``eq_data`` patch is applied
    only if this mujoco's ``eq_data`` has more than 11 columns (``patch=None``)
    or as forced by ``patch=True/False``.
``record(task, episodes, policy, seed, steps_per_episode=500, noise=0.1)``
    Per-step and per-episode arrays (see ``STEP_KEYS``/``EPISODE_KEYS``).
``record_resets(task, episodes, seed)``
    Only the per-episode reset arrays, for reset-distribution tests.
``restore(env, rec, i)`` / ``replay_step(env, rec, i)``
    Put an env into recorded state ``i`` and step it with the recorded action.
``scripted_success(task, episodes, seed)``, ``steps_per_second(task)``.

CLI: ``python -m envs.tools.metaworld_reference {record,resets,success,speed} ...``
(alone, as the MuJoCo 3.3 script runs it: ``python -m metaworld_reference ...`` beside a copy of this file).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import pickle
import platform
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any

import metaworld
import mujoco
import numpy as np
from metaworld import policies as _mw_policies
from metaworld.env_dict import ALL_V3_ENVIRONMENTS
from metaworld.sawyer_xyz_env import SawyerXYZEnv

FORMAT_VERSION = 1

TASKS = (
    "window-close-v3",
    "window-open-v3",
    "drawer-close-v3",
    "drawer-open-v3",
    "reach-v3",
    "button-press-topdown-v3",
    "door-open-v3",
)

POLICY_CLASSES = {
    "window-close-v3": "SawyerWindowCloseV3Policy",
    "window-open-v3": "SawyerWindowOpenV3Policy",
    "drawer-close-v3": "SawyerDrawerCloseV3Policy",
    "drawer-open-v3": "SawyerDrawerOpenV3Policy",
    "reach-v3": "SawyerReachV3Policy",
    "button-press-topdown-v3": "SawyerButtonPressTopdownV3Policy",
    "door-open-v3": "SawyerDoorOpenV3Policy",
}

# Python attributes that reset_model() sets and that step()/evaluate_state()
# read.  Each present one is stored per episode as "ep_attr_<name>".
EPISODE_ATTRS = (
    "_target_pos",
    "obj_init_pos",
    "init_tcp",
    "_last_rand_vec",
    "hand_init_pos",
    "obj_init_angle",
    "maxDist",
    "maxPullDist",
    "maxReachDist",
    "target_reward",
    "window_handle_pos_init",
    "_obj_to_target_init",
    "objHeight",
    "init_left_pad",
    "init_right_pad",
)

MIXED_PATTERN = ("scripted", "scripted", "noisy", "noisy", "random")
DEFAULT_NOISE = 0.1

_WELD_DATA = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 5.0])


# --------------------------------------------------------------------------
# env construction
# --------------------------------------------------------------------------
def eq_data_columns() -> int:
    """Number of eq_data columns (mjNEQDATA) of this mujoco build (11 up to 3.3)."""
    return int(mujoco.MjModel.from_xml_string("<mujoco/>").eq_data.shape[1])


def eq_patch_needed() -> bool:
    """Meta-World writes 11-element weld rows; newer mujoco has more columns."""
    return eq_data_columns() != _WELD_DATA.size


def _patched_reset_mocap_welds(self) -> None:
    """SawyerMocapBase.reset_mocap_welds, writing only the first 11 columns."""
    if self.model.nmocap > 0 and self.model.eq_data is not None:
        for i in range(self.model.eq_data.shape[0]):
            if self.model.eq_type[i] == mujoco.mjtEq.mjEQ_WELD:
                self.model.eq_data[i, : _WELD_DATA.size] = _WELD_DATA


_PATCHED_CLASSES: dict[type, type] = {}


def _patched_class(cls: type) -> type:
    # A subclass (same __name__, so env.task_name is unchanged) rather than a
    # global monkeypatch: unpatched classes stay usable, e.g. for tests.
    if cls not in _PATCHED_CLASSES:
        _PATCHED_CLASSES[cls] = type(
            cls.__name__,
            (cls,),
            {
                "reset_mocap_welds": _patched_reset_mocap_welds,
                "__module__": cls.__module__,
                "__qualname__": cls.__qualname__,
            },
        )
    return _PATCHED_CLASSES[cls]


def make_reference_env(task: str, seed: int, patch: bool | None = None) -> SawyerXYZEnv:
    """Meta-World's env for `task`: goal hidden, goal random per episode, seeded.

    patch: None applies the eq_data patch only when needed (``eq_patch_needed``).
    The env must be reset before stepping (``env.reset()``).
    """
    if task not in ALL_V3_ENVIRONMENTS:
        raise KeyError(f"unknown Meta-World task {task!r}")
    cls = ALL_V3_ENVIRONMENTS[task]
    if patch is None:
        patch = eq_patch_needed()
    env = (_patched_class(cls) if patch else cls)()
    # set_task as MT1 does, but with partially_observable=True (MT1 itself
    # overrides it to False).  rand_vec is irrelevant: unfrozen below.
    space = env._random_reset_space
    task_data = {
        "env_cls": cls,
        "rand_vec": (space.low + space.high) / 2.0,
        "partially_observable": True,
    }
    env.set_task(metaworld.Task(env_name=task, data=pickle.dumps(task_data)))
    env._partially_observable = True
    # sawyer_observation_space is a cached_property used for clipping in
    # step(): make sure it is the hidden-goal one (goal bounds 0).
    if "sawyer_observation_space" in env.__dict__:
        del env.__dict__["sawyer_observation_space"]
    env.observation_space = env.sawyer_observation_space
    assert np.all(env.sawyer_observation_space.low[-3:] == 0)
    assert np.all(env.sawyer_observation_space.high[-3:] == 0)
    env._freeze_rand_vec = False
    env.seeded_rand_vec = True
    env.seed(int(seed))
    env.max_path_length = 500
    env._reference_task = task
    env._reference_eq_patch = bool(patch)
    return env


def make_policy(task: str):
    return getattr(_mw_policies, POLICY_CLASSES[task])()


def scripted_action(env: SawyerXYZEnv, policy, obs: np.ndarray) -> np.ndarray:
    """The scripted policy's action.  The policy sees the true goal (privileged;
    only reach-v3's policy reads it) and gets a copy of obs (door-open's policy
    edits its input in place)."""
    pobs = np.array(obs, dtype=np.float64, copy=True)
    pobs[36:39] = env._target_pos
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = policy.get_action(pobs)
    return np.clip(np.asarray(a, dtype=np.float32), -1.0, 1.0).astype(np.float32)


def _action(kind: str, env, policy, obs, rng: np.random.Generator, noise: float) -> np.ndarray:
    if kind == "scripted":
        return scripted_action(env, policy, obs)
    if kind == "noisy":
        a = scripted_action(env, policy, obs).astype(np.float64)
        a = a + rng.normal(0.0, noise, size=4)
        return np.clip(a, -1.0, 1.0).astype(np.float32)
    if kind == "random":
        return rng.uniform(-1.0, 1.0, size=4).astype(np.float32)
    raise ValueError(f"unknown policy {kind!r}")


# --------------------------------------------------------------------------
# state capture
# --------------------------------------------------------------------------
def _data_state(env) -> dict[str, np.ndarray]:
    m, d = env.model, env.data
    full = np.empty(mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_INTEGRATION))
    mujoco.mj_getState(m, d, full, mujoco.mjtState.mjSTATE_INTEGRATION)
    return {
        "time": np.float64(d.time),
        "qpos": d.qpos.copy(),
        "qvel": d.qvel.copy(),
        "qacc_warmstart": d.qacc_warmstart.copy(),
        "act": d.act.copy(),
        "ctrl": d.ctrl.copy(),
        "mocap_pos": d.mocap_pos.copy(),
        "mocap_quat": d.mocap_quat.copy(),
        "state_integration": full,
    }


def _episode_attrs(env) -> dict[str, np.ndarray]:
    out = {}
    for name in EPISODE_ATTRS:
        v = getattr(env, name, None)
        if v is not None:
            out[name] = np.array(v, dtype=np.float64)
    return out


def _versions() -> dict[str, str]:
    import gymnasium  # metaworld depends on it anyway

    try:
        from importlib.metadata import version

        mw_version = version("metaworld")
    except Exception:  # noqa: BLE001 - any failure: the module's own attribute  # pragma: no cover
        mw_version = getattr(metaworld, "__version__", "unknown")
    return {
        "mujoco_version": mujoco.__version__,
        "metaworld_version": mw_version,
        "numpy_version": np.__version__,
        "gymnasium_version": gymnasium.__version__,
        "python_version": platform.python_version(),
    }


def _meta(task: str, policy: str, seed: int, **extra) -> dict[str, Any]:
    meta = {
        "format_version": FORMAT_VERSION,
        "task": task,
        "policy": policy,
        "seed": int(seed),
        "eq_data_columns": eq_data_columns(),
        "eq_patch": eq_patch_needed(),
        "partially_observable": True,
        "freeze_rand_vec": False,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        **_versions(),
    }
    meta.update(extra)
    return meta


def _episode_policies(episodes: int, policy: str | Sequence[str]) -> list[str]:
    if isinstance(policy, str):
        if policy == "mixed":
            return [MIXED_PATTERN[k % len(MIXED_PATTERN)] for k in range(episodes)]
        return [policy] * episodes
    kinds = list(policy)
    if len(kinds) != episodes:
        raise ValueError("per-episode policy list must have `episodes` entries")
    return kinds


class _Stack:
    def __init__(self):
        self.d: dict[str, list] = {}

    def add(self, prefix: str, items: dict[str, Any]) -> None:
        for k, v in items.items():
            self.d.setdefault(prefix + k, []).append(np.asarray(v))

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: np.stack(v) for k, v in self.d.items()}


def _reset(env, ep: _Stack) -> np.ndarray:
    """env.reset(), recording the reset state into `ep`."""
    body_pos_before = env.model.body_pos.copy()
    site_pos_before = env.model.site_pos.copy()
    obs, _ = env.reset()
    ep.add("reset_", _data_state(env))
    ep.add("reset_", {"obs": obs})
    ep.add(
        "ep_",
        {
            "body_pos": env.model.body_pos.copy(),
            "site_pos": env.model.site_pos.copy(),
            "body_pos_before_reset": body_pos_before,
            "site_pos_before_reset": site_pos_before,
            "target_pos": np.array(env._target_pos, dtype=np.float64),
            "obj_init_pos": np.array(env.obj_init_pos, dtype=np.float64),
            "init_tcp": np.array(env.init_tcp, dtype=np.float64),
            "rand_vec": np.array(env._last_rand_vec, dtype=np.float64),
        },
    )
    ep.add("ep_attr_", _episode_attrs(env))
    return obs


# --------------------------------------------------------------------------
# recording
# --------------------------------------------------------------------------
def record(
    task: str,
    episodes: int,
    policy: str | Sequence[str],
    seed: int,
    steps_per_episode: int = 500,
    noise: float = DEFAULT_NOISE,
    patch: bool | None = None,
) -> dict[str, np.ndarray]:
    """Roll out `episodes` episodes in one env (episodes follow each other, as
    in training: the model edits of episode k are in place when episode k+1
    resets).  policy: "scripted", "noisy", "random", "mixed" or a list of those
    per episode.  Returns a flat dict of arrays (np.savez-able), see module doc
    / report for keys."""
    kinds = _episode_policies(episodes, policy)
    env = make_reference_env(task, seed, patch=patch)
    pol = make_policy(task)
    rng = np.random.default_rng([int(seed), 0x5EED])
    st, ep = _Stack(), _Stack()
    for e, kind in enumerate(kinds):
        obs = _reset(env, ep)
        any_success, success = False, False
        for _ in range(steps_per_episode):
            action = _action(kind, env, pol, obs, rng, noise)
            pre = _data_state(env)
            prev_obs = np.array(env._prev_obs, dtype=np.float64)
            path_len = env.curr_path_length
            next_obs, reward, terminated, truncated, info = env.step(action)
            post = _data_state(env)
            success = bool(info["success"])
            any_success |= success
            st.add("", pre)
            st.add("next_", post)
            st.add(
                "",
                {
                    "episode": np.int32(e),
                    "t": np.int32(path_len),
                    "obs": obs,
                    "prev_obs": prev_obs,
                    "action": action,
                    "next_obs": next_obs,
                    "reward": np.float64(reward),
                    "success": np.float64(info["success"]),
                    "terminated": bool(terminated),
                    "truncated": bool(truncated),
                },
            )
            obs = next_obs
        ep.add("ep_", {"policy": np.array(kind), "success_any": any_success, "success_final": success})
    out = {**st.arrays(), **ep.arrays()}
    meta = _meta(
        task,
        policy if isinstance(policy, str) else "list",
        seed,
        episodes=episodes,
        episode_policies=kinds,
        steps_per_episode=steps_per_episode,
        noise=noise,
        kind="steps",
    )
    out.update(_meta_arrays(meta))
    return out


def record_resets(task: str, episodes: int, seed: int, patch: bool | None = None) -> dict[str, np.ndarray]:
    """`episodes` consecutive env.reset() calls (no steps in between: data is
    fully reset by mj_resetData, only model edits / python attributes carry
    over, so this equals resets after full episodes)."""
    env = make_reference_env(task, seed, patch=patch)
    ep = _Stack()
    for _ in range(episodes):
        _reset(env, ep)
    out = ep.arrays()
    out.update(_meta_arrays(_meta(task, "none", seed, episodes=episodes, kind="resets")))
    return out


def _meta_arrays(meta: dict[str, Any]) -> dict[str, np.ndarray]:
    out = {"meta_json": np.array(json.dumps(meta, sort_keys=True))}
    for k, v in meta.items():
        if isinstance(v, (str, int, float, bool)):
            out["meta_" + k] = np.array(v)
    return out


def load(path: str) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def metadata(rec: dict[str, np.ndarray]) -> dict[str, Any]:
    return json.loads(str(rec["meta_json"]))


# --------------------------------------------------------------------------
# restore / replay
# --------------------------------------------------------------------------
def restore(env: SawyerXYZEnv, rec: dict[str, np.ndarray], i: int) -> None:
    """Put `env` (from make_reference_env for the same task, any seed, reset or
    not) into recorded pre-step state i: model edits, MuJoCo data, and
    Meta-World's python-side episode fields."""
    e = int(rec["episode"][i])
    m, d = env.model, env.data
    m.body_pos[:] = rec["ep_body_pos"][e]
    m.site_pos[:] = rec["ep_site_pos"][e]
    for k in rec:
        if k.startswith("ep_attr_"):
            setattr(env, k[len("ep_attr_") :], np.array(rec[k][e], dtype=np.float64))
    mujoco.mj_resetData(m, d)
    d.time = float(rec["time"][i])
    d.qpos[:] = rec["qpos"][i]
    d.qvel[:] = rec["qvel"][i]
    d.act[:] = rec["act"][i]
    d.ctrl[:] = rec["ctrl"][i]
    d.mocap_pos[:] = rec["mocap_pos"][i]
    d.mocap_quat[:] = rec["mocap_quat"][i]
    mujoco.mj_forward(m, d)
    d.qacc_warmstart[:] = rec["qacc_warmstart"][i]
    env.curr_path_length = int(rec["t"][i])
    env._prev_obs = np.array(rec["prev_obs"][i], dtype=np.float64)
    env._did_see_sim_exception = False
    env._last_stable_obs = None


def replay_step(env: SawyerXYZEnv, rec: dict[str, np.ndarray], i: int) -> dict[str, np.ndarray]:
    """restore(env, rec, i), then env.step(recorded action).  Returns the same
    next_* keys as the record (compare with ``np.array_equal``)."""
    restore(env, rec, i)
    obs, reward, _terminated, truncated, info = env.step(np.asarray(rec["action"][i], dtype=np.float32))
    post = {"next_" + k: v for k, v in _data_state(env).items()}
    post.update(
        next_obs=np.asarray(obs, dtype=np.float64),
        reward=np.float64(reward),
        success=np.float64(info["success"]),
        truncated=np.bool_(truncated),
    )
    return post


REPLAY_KEYS = (
    "next_obs",
    "reward",
    "success",
    "truncated",
    "next_qpos",
    "next_qvel",
    "next_qacc_warmstart",
    "next_act",
    "next_ctrl",
    "next_mocap_pos",
    "next_mocap_quat",
    "next_time",
)


def replay_mismatches(env, rec, i) -> list[str]:
    got = replay_step(env, rec, i)
    return [k for k in REPLAY_KEYS if not np.array_equal(got[k], rec[k][i])]


# --------------------------------------------------------------------------
# success, speed
# --------------------------------------------------------------------------
def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    den = 1 + z * z / n
    c = (p + z * z / (2 * n)) / den
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, c - h), min(1.0, c + h))


def scripted_success(
    task: str, episodes: int, seed: int, steps_per_episode: int = 500, cone: str | None = None
) -> dict[str, Any]:
    """Closed-loop success of Meta-World's scripted policy (sees the true goal)
    in the hidden-goal, random-goal setting; `cone` ("pyramidal" or "elliptic")
    replaces the model file's friction cone."""
    env = make_reference_env(task, seed)
    if cone is not None:
        env.model.opt.cone = {"pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL, "elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC}[cone]
    pol = make_policy(task)
    any_s, final_s, first = [], [], []
    t0 = time.perf_counter()
    for _ in range(episodes):
        obs, _ = env.reset()
        hit, s, first_t = False, False, -1
        for t in range(steps_per_episode):
            obs, _, _, _, info = env.step(scripted_action(env, pol, obs))
            s = bool(info["success"])
            if s and not hit:
                first_t = t
            hit |= s
        any_s.append(hit)
        final_s.append(s)
        first.append(first_t)
    n, ka, kf = episodes, int(sum(any_s)), int(sum(final_s))
    return {
        "task": task,
        "episodes": n,
        "seed": int(seed),
        "steps_per_episode": steps_per_episode,
        "success_any": ka / n,
        "success_any_ci95": wilson(ka, n),
        "success_final": kf / n,
        "success_final_ci95": wilson(kf, n),
        "success_any_count": ka,
        "success_final_count": kf,
        "first_success_step": first,
        "final_flags": [bool(x) for x in final_s],
        "wall_s": time.perf_counter() - t0,
        **_versions(),
    }


def steps_per_second(task: str, steps: int = 5000, seed: int = 0, resets: int = 20) -> dict[str, Any]:
    """C MuJoCo env.step()/s (random actions, one process, one env) and
    env.reset()/s of Meta-World's own env on this host."""
    env = make_reference_env(task, seed)
    rng = np.random.default_rng(seed)
    acts = rng.uniform(-1, 1, size=(steps, 4)).astype(np.float32)
    env.reset()
    t_steps = 0.0
    for k in range(steps):
        if env.curr_path_length >= env.max_path_length:
            env.reset()
        t0 = time.perf_counter()
        env.step(acts[k])
        t_steps += time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(resets):
        env.reset()
    t_reset = (time.perf_counter() - t0) / resets
    sps = steps / t_steps
    return {
        "task": task,
        "steps": steps,
        "steps_per_second": sps,
        "resets_per_second": 1.0 / t_reset,
        # 500 steps + 1 reset per episode
        "steps_per_second_with_resets": 500 / (500 / sps + t_reset),
        "frame_skip": int(env.frame_skip),
        "timestep": float(env.model.opt.timestep),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        **_versions(),
    }


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------
def _save_npz(path: str, arrays: dict[str, np.ndarray]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    np.savez_compressed(path, **arrays)


def _save_json(path: str, obj) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m envs.tools.metaworld_reference", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="record steps")
    r.add_argument("--task", required=True, choices=TASKS + tuple(k for k in ALL_V3_ENVIRONMENTS if k not in TASKS))
    r.add_argument("--episodes", type=int, default=5)
    r.add_argument("--policy", default="mixed", choices=("scripted", "noisy", "random", "mixed"))
    r.add_argument("--scripted", type=int, default=None, help="with --policy mixed: episode counts")
    r.add_argument("--noisy", type=int, default=None)
    r.add_argument("--random", type=int, default=None)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--steps", type=int, default=500)
    r.add_argument("--noise", type=float, default=DEFAULT_NOISE)
    r.add_argument("--out", required=True)
    rs = sub.add_parser("resets", help="record reset states")
    rs.add_argument("--task", required=True)
    rs.add_argument("--episodes", type=int, default=1000)
    rs.add_argument("--seed", type=int, default=0)
    rs.add_argument("--out", required=True)
    s = sub.add_parser("success", help="scripted-policy success")
    s.add_argument("--task", default=None)
    s.add_argument("--tasks", nargs="*", default=None)
    s.add_argument("--episodes", type=int, default=100)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", default=None)
    sp = sub.add_parser("speed", help="C MuJoCo steps/s")
    sp.add_argument("--task", default=None)
    sp.add_argument("--tasks", nargs="*", default=None)
    sp.add_argument("--steps", type=int, default=5000)
    sp.add_argument("--out", default=None)
    a = p.parse_args(argv)

    def tasks_of(a):
        return [a.task] if a.task else (a.tasks or list(TASKS))

    if a.cmd == "record":
        policy: str | list[str] = a.policy
        episodes = a.episodes
        if a.policy == "mixed" and any(x is not None for x in (a.scripted, a.noisy, a.random)):
            policy = ["scripted"] * (a.scripted or 0) + ["noisy"] * (a.noisy or 0) + ["random"] * (a.random or 0)
            episodes = len(policy)
        t0 = time.perf_counter()
        rec = record(a.task, episodes, policy, a.seed, steps_per_episode=a.steps, noise=a.noise)
        _save_npz(a.out, rec)
        print(
            f"{a.task}: {len(rec['action'])} steps, {episodes} episodes "
            f"(success any {rec['ep_success_any'].tolist()}), {time.perf_counter() - t0:.1f}s -> {a.out}"
        )
    elif a.cmd == "resets":
        t0 = time.perf_counter()
        rec = record_resets(a.task, a.episodes, a.seed)
        _save_npz(a.out, rec)
        print(f"{a.task}: {a.episodes} resets, {time.perf_counter() - t0:.1f}s -> {a.out}")
    elif a.cmd == "success":
        res = {"meta": _meta("*", "scripted", a.seed, episodes=a.episodes, kind="success"), "tasks": {}}
        for t in tasks_of(a):
            r_ = scripted_success(t, a.episodes, a.seed)
            res["tasks"][t] = r_
            print(
                f"{t}: any {r_['success_any']:.2f} {tuple(round(x, 3) for x in r_['success_any_ci95'])}  "
                f"final {r_['success_final']:.2f} {tuple(round(x, 3) for x in r_['success_final_ci95'])}",
                flush=True,
            )
        if a.out:
            _save_json(a.out, res)
    elif a.cmd == "speed":
        res = {"meta": _meta("*", "random", 0, kind="speed"), "tasks": {}}
        for t in tasks_of(a):
            r_ = steps_per_second(t, steps=a.steps)
            res["tasks"][t] = r_
            print(
                f"{t}: {r_['steps_per_second']:.0f} steps/s, {r_['resets_per_second']:.1f} resets/s "
                f"({r_['steps_per_second_with_resets']:.0f} steps/s incl. resets)",
                flush=True,
            )
        if a.out:
            _save_json(a.out, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
