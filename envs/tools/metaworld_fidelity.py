"""How far the MJX Meta-World tasks are from Meta-World itself, measured on recorded states.

The reference side is `envs.tools.metaworld_reference`: Meta-World 3.0.0's own environments, recorded
under C MuJoCo 3.17 (ours) and 3.3 (the release Meta-World 3.1 pins), along scripted, noisy and
random episodes, each record holding the full simulator state before and after every step. Here:

- *Semantics* (`semantics`): on every recorded transition, our observation and success computed
  from Meta-World's next state equal Meta-World's (the goal hidden);
- *Resets* (`reset_agreement`, `reset_distribution`): our reset from Meta-World's own random
  draws gives Meta-World's reset observation, and our resets and Meta-World's recorded resets
  have the same distribution (two-sample Kolmogorov-Smirnov test per varying coordinate);
- *Physics* (`one_step`): from the same state and action, how far one MJX env step lands from
  C MuJoCo's (arm joints, hand position, object);
- *Closed loop* (`closed_loop`): Meta-World's scripted policy driving a batch of our env for
  whole episodes, success at any step, at the last step and the step of first success, beside
  Meta-World's own env (Wilson intervals); `CLOSED_LOOP_VARIANTS` reruns it with one of our
  model changes undone each, to find which one a difference comes from.

`python -m envs.tools.metaworld_fidelity --records DIR --out FILE.json` writes the record-based checks;
`python -m envs.tools.metaworld_fidelity --closed-loop-episodes 20 --variants ours mjx_capsules --out
FILE.json` the closed loop; `--table` prints either file's table (docs/metaworld.md "Against Meta-World itself"). Needs the `metaworld` package (a dependency: the tasks read their models from it).
"""

from __future__ import annotations

import argparse
import dataclasses
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
from envs.base import State
from envs.tools import metaworld_reference as reference

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
        "states": len(index),
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
        "resets": len(theirs),
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
        "states": len(index),
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

    return {"states": len(index), "arm_joint_rad": summary(arm), "hand_m": summary(hand), "object_m": summary(obj)}


def cone_effect(env: mw.MetaWorldTask, episodes: int = 100, seed: int = 0) -> dict[str, Any]:
    """Meta-World's own env and scripted policy in C MuJoCo with the files' elliptic friction cone
    and with the pyramidal one our MJX env uses: closed-loop success at any and at the final step."""
    out = {}
    for cone in ("elliptic", "pyramidal"):
        rates = reference.scripted_success(env.metaworld_name, episodes, seed, cone=cone)
        out[cone] = {key: rates[key] for key in ("success_any", "success_any_ci95", "success_final", "success_final_ci95")}
    return out


def scripted_actions(policy, obs: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Meta-World's scripted policy's actions for a batch of our observations, each shown its
    instance's goal (privileged, as `metaworld_reference.scripted_action`: the goal is hidden from
    the learner, not from the expert); a copy per row (door-open's policy edits its input)."""
    rows = []
    for o, goal in zip(obs, target):
        shown = np.array(o, np.float64, copy=True)
        shown[36:39] = goal
        rows.append(np.clip(policy.get_action(shown), -1.0, 1.0))
    return np.stack(rows).astype(np.float32)


def closed_loop(env: mw.MetaWorldTask, episodes: int = 20, seed: int = 0, steps: int | None = None) -> dict[str, Any]:
    """Meta-World's scripted policy (on the host, from our observations and each instance's goal)
    driving `episodes` instances of our env in one batch for whole episodes: success at any step,
    at the last step, and the step of first success (-1: never), as `metaworld_reference.
    scripted_success` reports Meta-World's own env."""
    steps = env.episode_length if steps is None else steps
    policy = reference.make_policy(env.metaworld_name)
    reset = _program(env, "reset", lambda: jax.vmap(env.reset))
    step = _program(env, "step", lambda: jax.vmap(env.step))
    started = time.perf_counter()
    state = reset(jax.random.split(jax.random.PRNGKey(seed), episodes))
    target = np.asarray(state.info["target"], np.float64)
    success = np.zeros((steps, episodes), bool)
    compiled_at = None
    for t in range(steps):
        actions = scripted_actions(policy, np.asarray(state.obs, np.float64), target)
        state = step(state, jp.asarray(actions))
        success[t] = np.asarray(state.reward) > 0
        if compiled_at is None:
            compiled_at = time.perf_counter() - started
    return _success_summary(success, seconds=time.perf_counter() - started, first_call_s=compiled_at)


def _success_summary(success: np.ndarray, **extra) -> dict[str, Any]:
    """Success rates of a [steps, episodes] success array, with Wilson 95 % intervals."""
    steps, episodes = success.shape
    hit, last = success.any(axis=0), success[-1]
    first = np.where(hit, success.argmax(axis=0), -1)
    return {
        "episodes": int(episodes),
        "steps": int(steps),
        "any_step": float(hit.mean()),
        "any_step_wilson95": reference.wilson(int(hit.sum()), episodes),
        "final_step": float(last.mean()),
        "final_step_wilson95": reference.wilson(int(last.sum()), episodes),
        "first_success_step": [int(x) for x in first],
        "first_success_median": float(np.median(first[hit])) if hit.any() else None,
        **{key: round(float(value), 1) for key, value in extra.items() if value is not None},
    }


def closed_loop_reference(task: str, episodes: int = 20, seed: int = 0, steps: int = 500) -> dict[str, Any]:
    """The same measurement on Meta-World's own env (C MuJoCo, the model files' settings, its own
    random goals)."""
    rates = reference.scripted_success(task, episodes, seed, steps_per_episode=steps)
    success = np.zeros((steps, episodes), bool)
    # scripted_success keeps any/final per episode and the first success step; rebuild the summary
    for e, (first, final) in enumerate(zip(rates["first_success_step"], rates["final_flags"])):
        if first >= 0:
            success[first, e] = True
        success[-1, e] = final
    return _success_summary(success, seconds=rates["wall_s"])


CLOSED_LOOP_VARIANTS: dict[str, dict[str, Any]] = {
    "ours": {},
    "files_solver_iterations": {"iterations": None, "ls_iterations": None},
    "no_pruning": {"prune_pairs": False},
    "mjx_capsules": {"capsule_stand_ins": False},
    "mjx_box_manifold": {"box_margins": False},
    "elliptic_cones": {"cone": "elliptic"},
    "cylinders": {"stand_ins": False, "capsule_stand_ins": True},
    "full_gripper_hull": {"gripper_hull_vertices": None},
}
"""`--variant` names: each undoes one of our model changes (the env overrides it applies), so a
difference from Meta-World can be traced to its cause. "cylinders" keeps the files' cylinders,
which MJX cannot collide with boxes or meshes: `put_model` refuses every task that has them
(all but the drawers), and the refusal is recorded as the variant's result. "elliptic_cones" and
"full_gripper_hull" are far slower per physics step on a CPU (docs/metaworld.md "Model changes for
MJX, and their measured effect")."""


def closed_loop_variant(name: str, variant: str, episodes: int, seed: int = 0, steps: int | None = None) -> dict[str, Any]:
    """`closed_loop` on task `name` with the overrides of `variant` (`CLOSED_LOOP_VARIANTS`)."""
    if variant not in CLOSED_LOOP_VARIANTS:
        raise ValueError(f"unknown closed-loop variant {variant!r}; valid: {', '.join(CLOSED_LOOP_VARIANTS)}")
    overrides = CLOSED_LOOP_VARIANTS[variant]
    try:
        env = mw.TASKS[name](mw.MetaWorldConfig(**overrides))
    except NotImplementedError as error:  # MJX has no collider for a pair of the files' shapes
        return {"overrides": overrides, "error": f"mjx.put_model: {error}"}
    return {"overrides": overrides, **closed_loop(env, episodes, seed, steps)}


def measure(name: str, records: str, *, one_step_states: int = 400) -> dict[str, Any]:
    """Every check for the task `name` against the records in `records/<mujoco version>/`."""
    env = mw.TASKS[name]()
    task = env.metaworld_name
    result: dict[str, Any] = {
        "task": name,
        "metaworld": task,
        "measured": time.strftime("%Y-%m-%d"),
        "env_config": dataclasses.asdict(env.config),
    }
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
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def markdown_table(results: dict[str, Any]) -> str:
    """The table of docs/metaworld.md "Against Meta-World itself" from a `measure` results file."""
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


def closed_loop_table(results: dict[str, Any]) -> str:
    """The closed-loop table of docs/metaworld.md "Against Meta-World itself" from a `--closed-loop` results file: Meta-World's own env
    beside ours, and our env with each measured model change undone (last step's success)."""
    variants = [v for v in CLOSED_LOOP_VARIANTS if v != "ours" and any(v in r.get("variants", {}) for r in results.values())]
    head = ["task", "episodes", "Meta-World (C) any / last", "ours any / last", "first success median C / ours"]
    head += [f"last, {v}" for v in variants]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def rate(r, key):
        return f"{r[key]:.2f}" if "error" not in r else "n/a"

    for name, r in results.items():
        c, ours = r["metaworld_c"], r["variants"].get("ours")
        if ours is None:
            continue
        row = [
            name,
            str(ours["episodes"]),
            f"{c['any_step']:.2f} / {c['final_step']:.2f}",
            f"{ours['any_step']:.2f} / {ours['final_step']:.2f}",
            f"{c['first_success_median']} / {ours['first_success_median']}",
        ]
        for v in variants:
            got = r["variants"].get(v)
            row.append("-" if got is None else ("put_model refuses" if "error" in got else rate(got, "final_step")))
        rows.append("| " + " | ".join(row) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", help="directory with <mujoco-version>/<task>.npz records (the record-based checks)")
    parser.add_argument("--tasks", nargs="*", default=list(mw.TASKS), choices=list(mw.TASKS))
    parser.add_argument("--closed-loop-episodes", type=int, default=0, help="batched scripted episodes per task and variant")
    parser.add_argument(
        "--variants", nargs="*", default=["ours"], choices=list(CLOSED_LOOP_VARIANTS), help="closed-loop model variants"
    )
    parser.add_argument("--one-step-states", type=int, default=400)
    parser.add_argument("--table", action="store_true", help="print the markdown table of --out and exit")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    if os.path.isfile(args.out):
        with open(args.out) as handle:
            results = json.load(handle)
    if args.table:
        print(markdown_table(results) if args.records else closed_loop_table(results))
        return 0
    if not args.records and not args.closed_loop_episodes:
        parser.error("give --records DIR (the record-based checks) and/or --closed-loop-episodes N (the closed loop)")

    def save():  # after every measurement: nothing measured is lost
        with open(args.out, "w") as handle:
            json.dump(results, handle, indent=1)

    for name in args.tasks:
        if args.records:
            results[name] = measure(name, args.records, one_step_states=args.one_step_states)
            print(json.dumps(results[name], indent=1), flush=True)
            save()
            continue
        entry = results.setdefault(name, {"variants": {}})
        task = mw.TASKS[name].metaworld_name
        if entry.get("metaworld_c", {}).get("episodes") != args.closed_loop_episodes:
            entry["metaworld_c"] = closed_loop_reference(task, args.closed_loop_episodes)
            save()
        for variant in args.variants:
            entry["variants"][variant] = closed_loop_variant(name, variant, args.closed_loop_episodes)
            print(name, variant, json.dumps({k: v for k, v in entry["variants"][variant].items() if k != "first_success_step"}), flush=True)
            save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
