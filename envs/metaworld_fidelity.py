"""How far the MJX Meta-World tasks are from Meta-World itself, measured on recorded states.

The reference side is `envs.metaworld_reference`: Meta-World 3.0.0's own environments, recorded
under C MuJoCo 3.17 (ours) and 3.3 (the release Meta-World 3.1 pins), along scripted, noisy and
random episodes, each record holding the full simulator state before and after every step. Here:

- *Semantics* (`semantics`): on every recorded transition, our observation and success computed
  from Meta-World's next state equal Meta-World's (the goal hidden);
- *Resets* (`reset_agreement`, `reset_distribution`): our reset from Meta-World's own random
  draws gives Meta-World's reset observation, and our resets and Meta-World's recorded resets
  have the same distribution (two-sample Kolmogorov-Smirnov test per varying coordinate);
- *Physics* (`one_step`): from the same state and action, how far one MJX env step lands from
  C MuJoCo's (arm joints, hand position, object);
- *Closed loop* (`closed_loop`): Meta-World's scripted policy driving our env, success at any
  step and at the final step, against Meta-World's own rate (Wilson intervals).

`python -m envs.metaworld_fidelity --records DIR --out FILE.json` writes all of it (README
"Meta-World"). Needs the `metaworld` package (a dependency: the tasks read their models from it).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import jax
import jax.numpy as jp
import mujoco
import numpy as np
from mujoco import mjx
from scipy import stats

from envs import metaworld as mw
from envs import metaworld_reference as reference
from envs.base import State

BATCH = 50
"""States stepped per call: one compiled batch size for every comparison (MJX reserves every
candidate contact per instance, so 400 at once took 16 GB on the CPU)."""
BY_METAWORLD_NAME = {task.metaworld_name: name for name, task in mw.TASKS.items()}


_PROGRAMS: dict[tuple[int, str], Any] = {}


def _program(env: mw.MetaWorldTask, kind: str, make) -> Any:
    """One jitted program per env and kind, so every record of a task reuses its compilation."""
    key = (id(env), kind)
    if key not in _PROGRAMS:
        _PROGRAMS[key] = jax.jit(make())
    return _PROGRAMS[key]


def _episode_values(env: mw.MetaWorldTask, rec: dict[str, np.ndarray], index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(moved body position, target) of the episode of each recorded step in `index`."""
    episode = rec["episode"][index]
    body = env._moved
    body_pos = rec["ep_body_pos"][episode, body] if body is not None else np.zeros((len(index), 3))
    return body_pos, rec["ep_target_pos"][episode]


def _data(env: mw.MetaWorldTask, model: mjx.Model, arrays: dict[str, jax.Array]) -> mjx.Data:
    return mjx.make_data(model).replace(
        qpos=arrays["qpos"],
        qvel=arrays["qvel"],
        qacc_warmstart=arrays["qacc_warmstart"],
        mocap_pos=arrays["mocap_pos"],
        mocap_quat=arrays["mocap_quat"],
        ctrl=arrays["ctrl"],
    )


def recorded_states(env: mw.MetaWorldTask, rec: dict[str, np.ndarray], index: np.ndarray, prefix: str = "") -> State:
    """Our `State`s at the recorded states `index` (before the step, or after it with
    prefix="next_"), synced, with the episode's layout and target and the recorded previous frame."""
    body_pos, target = _episode_values(env, rec, index)
    arrays = {
        key: jp.asarray(rec[prefix + key][index], jp.float32)
        for key in ("qpos", "qvel", "qacc_warmstart", "mocap_pos", "mocap_quat", "ctrl")
    }
    info = {
        "body_pos": jp.asarray(body_pos, jp.float32),
        "target": jp.asarray(target, jp.float32),
        "prev_frame": jp.asarray(rec["prev_obs"][index], jp.float32),
    }

    def build(arrays, info):
        model = env.model_for(info["body_pos"])
        data = env.sync(model, _data(env, model, arrays))
        zero = jp.zeros(())
        return State(data, jp.zeros(39), zero, zero, env.metrics(data, zero, info["target"]), info)

    return _program(env, "build", lambda: jax.vmap(build))(arrays, info)


def semantics(env: mw.MetaWorldTask, rec: dict[str, np.ndarray]) -> dict[str, Any]:
    """Our observation and success on Meta-World's next states vs Meta-World's, every step."""
    index = np.arange(len(rec["t"]))
    states = recorded_states(env, rec, index, prefix="next_")

    def observe(state):
        frame = env.frame(state.pipeline_state)
        obs = env.clip_observation(
            jp.concatenate([frame, state.info["prev_frame"], env.goal_observation(state.info["target"])])
        )
        return obs, env.success(state.pipeline_state, obs, state.info["target"])

    obs, success = _program(env, "observe", lambda: jax.vmap(observe))(states)
    obs_error = np.abs(np.asarray(obs, np.float64) - rec["next_obs"])
    success = np.asarray(success, np.float64)
    return {
        "states": int(len(index)),
        "obs_max_abs_error": float(obs_error.max()),
        "obs_worst_coordinate": int(obs_error.max(axis=0).argmax()),
        "success_agreement": float(np.mean(success == rec["success"])),
        # Our reward is our success; Meta-World's recorded `reward` is its dense v2 reward.
        "success_rate_recorded": float(np.mean(rec["success"])),
        "goal_is_zero": bool(np.all(np.asarray(obs)[:, 36:] == 0) and np.all(rec["next_obs"][:, 36:] == 0)),
    }


def reset_agreement(env: mw.MetaWorldTask, resets: int = 20, seed: int = 0) -> dict[str, Any]:
    """Our reset from the random vectors Meta-World drew gives Meta-World's reset observation."""
    ref = reference.make_reference_env(env.metaworld_name, seed=seed)
    draws: list[np.ndarray] = []
    draw = ref._get_state_rand_vec

    def recording_draw():
        value = draw()
        draws.append(np.array(value))
        return value

    ref._get_state_rand_vec = recording_draw
    theirs, rands, firsts = [], [], []
    for _ in range(resets):
        draws.clear()
        obs, _ = ref.reset()
        theirs.append(obs)
        rands.append(draws[-1])
        firsts.append(draws[-2])
    ours = jax.jit(jax.vmap(env.reset_from))(jp.asarray(np.stack(rands), jp.float32), jp.asarray(np.stack(firsts), jp.float32))
    error = np.abs(np.asarray(ours.obs, np.float64) - np.stack(theirs))
    return {"resets": resets, "obs_max_abs_error": float(error.max()), "obs_worst_coordinate": int(error.max(axis=0).argmax())}


def reset_distribution(env: mw.MetaWorldTask, resets: dict[str, np.ndarray], seed: int = 0) -> dict[str, Any]:
    """Two-sample KS test, per reset-observation coordinate that varies, of as many of our resets
    as were recorded from Meta-World; the smallest p-value (Bonferroni-corrected) is reported."""
    theirs = resets["reset_obs"]
    ours = np.asarray(jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(seed), len(theirs))).obs, np.float64)
    varying = [i for i in range(theirs.shape[1]) if np.ptp(theirs[:, i]) > 1e-9 or np.ptp(ours[:, i]) > 1e-9]
    tests = {i: stats.ks_2samp(ours[:, i], theirs[:, i]) for i in varying}
    fixed = [i for i in range(theirs.shape[1]) if i not in varying]
    fixed_error = float(np.max(np.abs(ours[:, fixed] - theirs[:, fixed]))) if fixed else 0.0
    worst = min(tests, key=lambda i: tests[i].pvalue) if tests else None
    return {
        "resets": int(len(theirs)),
        "varying_coordinates": varying,
        "min_p_value": float(tests[worst].pvalue) if tests else 1.0,
        "min_p_value_bonferroni": float(min(1.0, tests[worst].pvalue * len(tests))) if tests else 1.0,
        "worst_coordinate": worst,
        "constant_coordinates_max_abs_error": fixed_error,
    }


def one_step(env: mw.MetaWorldTask, rec: dict[str, np.ndarray], count: int = 400, seed: int = 0) -> dict[str, Any]:
    """One MJX env step from `count` recorded states (every policy kind, evenly spread) with the
    recorded action, against the recorded C MuJoCo next state."""
    index = np.linspace(0, len(rec["t"]) - 1, min(count, len(rec["t"]))).astype(int)
    qpos, obs, reward = [], [], []
    step = _program(env, "step", lambda: jax.vmap(env.step))
    for start in range(0, len(index), BATCH):
        real = index[start : start + BATCH]
        batch = np.resize(real, BATCH)  # the last batch padded with repeats: one compiled size
        stepped = step(recorded_states(env, rec, batch), jp.asarray(rec["action"][batch], jp.float32))
        qpos.append(np.asarray(stepped.pipeline_state.qpos, np.float64)[: len(real)])
        obs.append(np.asarray(stepped.obs, np.float64)[: len(real)])
        reward.append(np.asarray(stepped.reward, np.float64)[: len(real)])
    qpos, obs, reward = (np.concatenate(x) for x in (qpos, obs, reward))
    expected = rec["next_qpos"][index]
    arm = np.abs(qpos[:, :7] - expected[:, :7])
    hand = np.linalg.norm(obs[:, :3] - rec["next_obs"][index, :3], axis=-1)
    obj = np.linalg.norm(obs[:, 4:7] - rec["next_obs"][index, 4:7], axis=-1)
    agree = np.mean(reward == rec["success"][index])

    def summary(values):
        return {"median": float(np.median(values)), "p99": float(np.quantile(values, 0.99)), "max": float(np.max(values))}

    return {
        "states": int(len(index)),
        "arm_joint_rad": summary(arm.max(axis=1)),
        "hand_m": summary(hand),
        "object_m": summary(obj),
        "success_agreement": float(agree),
    }


def c_one_step(env: mw.MetaWorldTask, rec: dict[str, np.ndarray], count: int = 400, cone: str | None = None) -> dict[str, Any]:
    """The same states and actions stepped by Meta-World's own env under *this* MuJoCo (C): for a
    record made under another release, how far the two C MuJoCo releases are apart; with `cone`,
    how far that friction cone moves C MuJoCo from the record's (the files' elliptic)."""
    index = np.linspace(0, len(rec["t"]) - 1, min(count, len(rec["t"]))).astype(int)
    ref = reference.make_reference_env(env.metaworld_name, seed=0)
    if cone is not None:
        ref.model.opt.cone = mw.CONES[cone]
    arm, hand, obj = [], [], []
    for i in index:
        got = reference.replay_step(ref, rec, int(i))
        arm.append(np.max(np.abs(got["next_qpos"][:7] - rec["next_qpos"][i, :7])))
        hand.append(np.linalg.norm(got["next_obs"][:3] - rec["next_obs"][i, :3]))
        obj.append(np.linalg.norm(got["next_obs"][4:7] - rec["next_obs"][i, 4:7]))

    def summary(values):
        return {"median": float(np.median(values)), "p99": float(np.quantile(values, 0.99)), "max": float(np.max(values))}

    return {"states": int(len(index)), "arm_joint_rad": summary(arm), "hand_m": summary(hand), "object_m": summary(obj)}


def cone_effect(env: mw.MetaWorldTask, episodes: int = 100, seed: int = 0) -> dict[str, Any]:
    """Meta-World's own env and scripted policy in C MuJoCo with the files' elliptic friction cone
    and with the pyramidal one our MJX env uses: closed-loop success at any and at the final step."""
    out = {}
    for cone in ("elliptic", "pyramidal"):
        rates = reference.scripted_success(env.metaworld_name, episodes, seed, cone=cone)
        out[cone] = {key: rates[key] for key in ("success_any", "success_any_ci95", "success_final", "success_final_ci95")}
    return out


def closed_loop(env: mw.MetaWorldTask, episodes: int = 100, seed: int = 0) -> dict[str, Any]:
    """Meta-World's scripted policy (on the host, from our observations) driving `episodes`
    instances of our env in one batch for a whole episode: success at any step and at the last."""
    policy = reference.make_policy(env.metaworld_name)
    reset = _program(env, "reset", lambda: jax.vmap(env.reset))
    step = _program(env, "step", lambda: jax.vmap(env.step))
    state = reset(jax.random.split(jax.random.PRNGKey(seed), episodes))
    any_success = np.zeros(episodes, bool)
    for _ in range(env.episode_length):
        obs = np.asarray(state.obs, np.float64)
        actions = np.stack([np.clip(policy.get_action(o), -1.0, 1.0) for o in obs]).astype(np.float32)
        state = step(state, jp.asarray(actions))
        any_success |= np.asarray(state.reward) > 0
    final = np.asarray(state.reward) > 0
    return {
        "episodes": episodes,
        "any_step": float(any_success.mean()),
        "any_step_wilson95": reference.wilson(int(any_success.sum()), episodes),
        "final_step": float(final.mean()),
        "final_step_wilson95": reference.wilson(int(final.sum()), episodes),
    }


def measure(name: str, records: str, *, closed_loop_episodes: int = 0, one_step_states: int = 400) -> dict[str, Any]:
    """Every check for the task `name` against the records in `records/<mujoco version>/`."""
    env = mw.TASKS[name]()
    task = env.metaworld_name
    result: dict[str, Any] = {"task": name, "metaworld": task}
    started = time.perf_counter()
    for version in sorted(os.listdir(records)):
        path = os.path.join(records, version, f"{task}.npz")
        if not os.path.isfile(path):
            continue
        rec = reference.load(path)
        entry: dict[str, Any] = {"one_step": one_step(env, rec, one_step_states)}
        if version != f"mujoco-{mujoco.__version__}":
            entry["c_mujoco_one_step"] = c_one_step(env, rec, one_step_states)
        else:  # the semantics need the same MuJoCo
            entry["c_mujoco_cone_one_step"] = c_one_step(env, rec, one_step_states, cone=env.config.cone)
            entry["semantics"] = semantics(env, rec)
            resets = os.path.join(records, version, f"{task}_resets.npz")
            if os.path.isfile(resets):
                entry["reset_distribution"] = reset_distribution(env, reference.load(resets))
        success = os.path.join(records, version, "success.json")
        if os.path.isfile(success):
            with open(success) as handle:
                entry["scripted_success_reference"] = json.load(handle).get("tasks", {}).get(task)
        result[version] = entry
    result["reset_agreement"] = reset_agreement(env)
    result["cone_effect_c_mujoco"] = cone_effect(env)
    if closed_loop_episodes:
        result["closed_loop"] = closed_loop(env, closed_loop_episodes)
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def markdown_table(results: dict[str, Any]) -> str:
    """The README's table of a `measure` results file."""
    ours, other = f"mujoco-{mujoco.__version__}", "mujoco-3.3.0"
    rows = [
        "| task | obs max error | success agrees | reset KS min p | one step vs C 3.17: arm median / max (rad), object max (m) "
        "| C 3.17 pyramidal vs elliptic: arm median / max, object max | vs C 3.3: arm max, object max "
        "| C 3.17 vs C 3.3: arm max, object max | C scripted success elliptic -> pyramidal (any / final) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        mine, theirs = r[ours], r.get(other, {})
        sem, step = mine["semantics"], mine["one_step"]
        cone = r["cone_effect_c_mujoco"]
        row = [
            name,
            f"{sem['obs_max_abs_error']:.1e}",
            f"{100 * sem['success_agreement']:.0f} % of {sem['states']:,}",
            f"{mine['reset_distribution']['min_p_value']:.2f}",
            f"{step['arm_joint_rad']['median']:.1e} / {step['arm_joint_rad']['max']:.1e}, {step['object_m']['max']:.1e}",
        ]
        cone_step = mine.get("c_mujoco_cone_one_step")
        row.append(
            f"{cone_step['arm_joint_rad']['median']:.1e} / {cone_step['arm_joint_rad']['max']:.1e}, {cone_step['object_m']['max']:.1e}"
            if cone_step
            else "-"
        )
        if theirs:
            row.append(f"{theirs['one_step']['arm_joint_rad']['max']:.1e}, {theirs['one_step']['object_m']['max']:.1e}")
            cc = theirs["c_mujoco_one_step"]
            row.append(f"{cc['arm_joint_rad']['max']:.1e}, {cc['object_m']['max']:.1e}")
        else:
            row += ["-", "-"]
        e, p = cone["elliptic"], cone["pyramidal"]
        row.append(f"{e['success_any']:.2f} / {e['success_final']:.2f} -> {p['success_any']:.2f} / {p['success_final']:.2f}")
        rows.append("| " + " | ".join(row) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", required=True, help="directory with <mujoco-version>/<task>.npz records")
    parser.add_argument("--tasks", nargs="*", default=list(mw.TASKS), choices=list(mw.TASKS))
    parser.add_argument("--closed-loop-episodes", type=int, default=0)
    parser.add_argument("--one-step-states", type=int, default=400)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    if os.path.isfile(args.out):
        with open(args.out) as handle:
            results = json.load(handle)
    for name in args.tasks:
        results[name] = measure(
            name, args.records, closed_loop_episodes=args.closed_loop_episodes, one_step_states=args.one_step_states
        )
        print(json.dumps(results[name], indent=1), flush=True)
        with open(args.out, "w") as handle:  # after every task: nothing measured is lost
            json.dump(results, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

