"""The offline measurements behind `envs/metaworld_model.py`: which geom pairs stay MJX contact
candidates (`KEPT_PAIRS`), and how much the pruning and the collision stand-ins change.

C MuJoCo only, in Meta-World 3.0.0's own envs under its own scripted policies (plus noisy and
random variants, `POLICY_KINDS`): `run_episode` plays one episode and, with `near`, records the
minimum distance of every geom pair; `measure` chooses the pairs that came within
`KEEP_DISTANCE` (`choose_pairs`), checks the pruned model on held-out episodes (`check_pruning`),
the stand-ins against the original cylinders (`stand_in_fidelity`) and the capped gripper hull
against the file's (`hull_fidelity`), and writes the numbers `docs/metaworld_model.md` reports.

    python -m envs.tools.metaworld_contacts --measure            # ~10 min on one core; writes docs/evidence/data/metaworld/metaworld_model.json
    python -m envs.tools.metaworld_contacts --measure --adopt    # and rewrites envs/metaworld_kept_pairs.json
    python -m envs.tools.metaworld_contacts --hull FILE.json     # only the capped gripper hull against the file's

After `--adopt`, set `KEPT_PAIRS_SHA256` in `envs/metaworld_model.py` to the sha256 it prints.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os

import mujoco
import numpy as np

from envs.metaworld_model import (
    GRIPPER_MESH,
    KEPT_PAIRS,
    KEPT_PAIRS_ALIASES,
    KEPT_PAIRS_FILE,
    MANIFEST_FILE,
    STAND_IN_KINDS,
    STAND_INS,
    TASK_FILES,
    candidate_pairs,
    contact_candidates,
    fix_weld_eq_data,
    geom_label,
    load_model,
)

KEEP_DISTANCE = 0.03
"""A geom pair stays a contact candidate if it came within this distance (m) in any of the
measured episodes (`measure`)."""

REPORT_FILE = os.path.normpath(os.path.join(os.path.dirname(MANIFEST_FILE), "..", "docs", "evidence", "data", "metaworld", "metaworld_model.json"))
"""Where `--measure` writes its report."""

POLICY_KINDS = ("scripted", "noisy0.3", "noisy1.0", "mixed", "sticky", "random")
"""scripted: Meta-World's scripted policy (fed the true goal); noisyS: scripted + N(0, S) per
component; mixed: scripted with random 10-40-step segments of uniform actions (a third of the
time); sticky: uniform actions held for 5-30 steps; random: uniform actions every step."""


def metaworld_env(task: str, seed: int, model: mujoco.MjModel | None = None):
    """Meta-World's goal-hidden env for `task` (goal random per episode, as MT1), built with the
    weld fix; `model` replaces its model (same structure) when given."""
    import metaworld.sawyer_xyz_env as sawyer_xyz_env
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS_GOAL_HIDDEN

    # Meta-World calls `reset_mocap_welds` only while the env is built: patched for that, then
    # restored, so other users of Meta-World's classes see them unchanged.
    base = sawyer_xyz_env.SawyerMocapBase
    original = base.reset_mocap_welds
    base.reset_mocap_welds = lambda self: fix_weld_eq_data(self.model)
    try:
        env = ALL_V3_ENVIRONMENTS_GOAL_HIDDEN[f"{task}-goal-hidden"](seed=seed)
    finally:
        base.reset_mocap_welds = original
    env._freeze_rand_vec = False
    if model is not None:
        env.model = model
        env.data = mujoco.MjData(model)
    return env


class _Policy:
    def __init__(self, task: str, kind: str, seed: int):
        import metaworld.policies

        from envs.tools import metaworld_reference

        self.scripted = getattr(metaworld.policies, metaworld_reference.POLICY_CLASSES[task])()
        self.kind = kind
        self.rng = np.random.default_rng(seed)
        self.held, self.left, self.random_left = None, 0, 0

    def __call__(self, obs: np.ndarray, target: np.ndarray) -> np.ndarray:
        obs = obs.copy()
        obs[-3:] = target  # the scripted policies read the goal
        rng, kind = self.rng, self.kind
        if kind == "scripted":
            action = self.scripted.get_action(obs)
        elif kind.startswith("noisy"):
            action = self.scripted.get_action(obs) + rng.normal(0.0, float(kind[5:]), 4)
        elif kind == "mixed":
            if self.random_left == 0 and rng.random() < 1 / 40:
                self.random_left = int(rng.integers(10, 41))
            if self.random_left > 0:
                self.random_left -= 1
                action = rng.uniform(-1, 1, 4)
            else:
                action = self.scripted.get_action(obs)
        elif kind == "sticky":
            if self.left == 0:
                self.held, self.left = rng.uniform(-1, 1, 4), int(rng.integers(5, 31))
            self.left -= 1
            action = self.held
        else:
            action = rng.uniform(-1, 1, 4)
        return np.clip(action, -1.0, 1.0)


def _near_model(model: mujoco.MjModel, near: float) -> mujoco.MjModel:
    """A copy whose collision detection reports every pair closer than `near`."""
    probe = copy.deepcopy(model)
    probe.geom_margin[:] = probe.geom_margin + near
    probe.geom_gap[:] = 0.0
    # every collision geom collides with every other (the filters by body stay)
    con = (model.geom_contype | model.geom_conaffinity) != 0
    probe.geom_contype[:] = np.where(con, 1, 0)
    probe.geom_conaffinity[:] = np.where(con, 1, 0)
    return probe


def run_episode(task, seed, kind, model=None, actions=None, near=None, steps=500):
    """One Meta-World episode. Returns a dict: actions, hand/object positions per step, qpos per
    step, success per step, and with `near` the minimum distance per geom pair (ids) seen by a
    probe with every margin enlarged by `near` (after each env step)."""
    env = metaworld_env(task, seed, model)
    state = np.random.get_state()
    np.random.seed(seed)  # Meta-World draws the random vector from the global generator
    try:
        obs, _ = env.reset()
    finally:
        np.random.set_state(state)
    policy = _Policy(task, kind, seed + 7919)
    probe = probe_data = None
    if near is not None:
        probe = _near_model(env.model, near)
        probe_data = mujoco.MjData(probe)
    dist: dict[tuple[int, int], float] = {}
    touched: set[tuple[int, int]] = set()
    out = {"actions": [], "hand": [], "obj": [], "qpos": [], "success": []}
    for t in range(steps):
        action = policy(obs, env._target_pos) if actions is None else actions[t]
        obs, _, _, truncated, info = env.step(action)
        out["actions"].append(np.asarray(action, np.float64))
        out["hand"].append(obs[:3].copy())
        out["obj"].append(obs[4:7].copy())
        out["qpos"].append(env.data.qpos.copy())
        out["success"].append(bool(info["success"]))
        data = env.data
        for c in data.contact[: data.ncon]:
            touched.add((min(c.geom1, c.geom2), max(c.geom1, c.geom2)))
        if probe is not None:
            probe.body_pos[:] = env.model.body_pos
            probe.body_quat[:] = env.model.body_quat
            probe_data.qpos[:] = data.qpos
            probe_data.mocap_pos[:] = data.mocap_pos
            probe_data.mocap_quat[:] = data.mocap_quat
            mujoco.mj_kinematics(probe, probe_data)
            mujoco.mj_collision(probe, probe_data)
            for c in probe_data.contact[: probe_data.ncon]:
                key = (min(c.geom1, c.geom2), max(c.geom1, c.geom2))
                dist[key] = min(dist.get(key, np.inf), float(c.dist))
        if truncated:
            break
    for key in touched:
        dist[key] = min(dist.get(key, np.inf), 0.0)
    out = {k: np.asarray(v) for k, v in out.items()}
    out["dist"], out["touched"] = dist, touched
    return out


CHOOSE_SEEDS = range(10)
"""Episodes used to choose the pairs: each seed with each of `POLICY_KINDS` (60 per task)."""
CHECK_SEEDS = range(1000, 1003)
"""Held-out episodes (each with each policy kind, 18 per task) to verify the pruning."""
FIDELITY_SEEDS = range(2000, 2010)
"""Scripted episodes comparing the stand-ins with the original cylinders, and the capped gripper
hull with the file's."""


def measure_pairs(task: str, seeds=CHOOSE_SEEDS, near: float = 2 * KEEP_DISTANCE) -> dict:
    """Minimum distance per geom pair over episodes of every policy kind (stand-in model)."""
    model = load_model(task, stand_ins=True, prune_pairs=False)
    dist: dict[tuple[int, int], float] = {}
    touched: set = set()
    successes = {}
    for kind in POLICY_KINDS:
        wins = 0
        for seed in seeds:
            episode = run_episode(task, seed, kind, model=copy.deepcopy(model), near=near)
            for key, value in episode["dist"].items():
                dist[key] = min(dist.get(key, np.inf), value)
            touched |= episode["touched"]
            wins += bool(episode["success"].any())
        successes[kind] = wins / len(seeds)
    return {"model": model, "dist": dist, "touched": touched, "success_rate": successes}


def measure(tasks=tuple(TASK_FILES), out_path: str | None = None) -> dict:
    """Choose the kept pairs, check the pruning on held-out episodes, and measure the stand-ins.
    Returns (and writes to `out_path` as JSON) the numbers `docs/metaworld_model.md` reports."""
    report = {"keep_distance": KEEP_DISTANCE, "policy_kinds": POLICY_KINDS, "gripper": GRIPPER, "tasks": {}}
    measured = {}
    for task in tasks:
        rel = TASK_FILES[task]
        for other in TASK_FILES:  # the tasks sharing a model file pool their episodes
            if TASK_FILES[other] == rel and other not in measured:
                measured[other] = measure_pairs(other)
        pairs = measured[task]
        model = pairs["model"]
        label = functools.partial(geom_label, model)
        dist: dict = {}
        for other, result in measured.items():
            if TASK_FILES[other] == rel:
                for key, value in result["dist"].items():
                    dist[key] = min(dist.get(key, np.inf), value)
        kept = choose_pairs(model, dist)
        touched = sorted((label(a), label(b)) for a, b in pairs["touched"])
        KEPT_PAIRS[task] = tuple(kept)
        original = load_model(task, stand_ins=False, prune_pairs=False)
        pruned = load_model(task)
        entry = {
            "file": rel,
            "stand_ins": dict.fromkeys(STAND_INS[rel], STAND_IN_KINDS[rel]),
            "pairs": {
                "original": len(candidate_pairs(original)),
                "stand_ins": len(candidate_pairs(model)),
                "pruned": len(candidate_pairs(pruned)),
            },
            "contact_slots": {
                "original": _slots_or_none(original),
                "stand_ins": contact_candidates(model),
                "pruned": contact_candidates(pruned),
            },
            "choose_episodes": {"seeds": list(CHOOSE_SEEDS), "kinds": POLICY_KINDS, "success_rate": pairs["success_rate"]},
            "kept_pairs": kept,
            "touched_pairs": touched,
            "min_distance": {f"{label(a)} | {label(b)}": round(d, 5) for (a, b), d in sorted(pairs["dist"].items())},
        }
        entry["pruning_check"] = check_pruning(task)
        entry["stand_in_fidelity"] = stand_in_fidelity(task) if STAND_INS[rel] else None
        entry["hull_fidelity"] = hull_fidelity(task)
        report["tasks"][task] = entry
        print(json.dumps({task: {k: entry[k] for k in ("pairs", "contact_slots", "pruning_check", "stand_in_fidelity", "hull_fidelity")}}), flush=True)
    if out_path:
        with open(out_path, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=1)
    return report


GRIPPER = ("right_hand[0]", "rightclaw_it", "rightpad_geom", "leftclaw_it", "leftpad_geom")
"""The Sawyer's collision geoms that move with the hand; they are kept or dropped as one unit."""


def choose_pairs(model: mujoco.MjModel, dist: dict) -> list[tuple[str, str]]:
    """The pairs (labels) that came within `KEEP_DISTANCE`, and, as a safety margin, every gripper
    geom against every geom that some gripper geom came within `KEEP_DISTANCE` of."""
    label = functools.partial(geom_label, model)
    near = {(label(a), label(b)) for (a, b), d in dist.items() if d < KEEP_DISTANCE}
    near_gripper = {x for pair in near for x in pair if x not in GRIPPER and set(pair) & set(GRIPPER)}
    near |= {(g, x) for g in GRIPPER for x in near_gripper}
    possible = {tuple(sorted((label(a), label(b)))) for a, b in candidate_pairs(model)}
    return sorted(p for p in {tuple(sorted(p)) for p in near} if p in possible)


def _slots_or_none(model):
    try:
        return contact_candidates(model)
    except ValueError:
        return None  # a pair MJX has no collision function for


def check_pruning(task: str, seeds=CHECK_SEEDS) -> dict:
    """Pruned vs unpruned (both with stand-ins) on held-out episodes: same actions, max |qpos
    difference| over the episode, and whether any dropped pair touched in the unpruned run."""
    full = load_model(task, prune_pairs=False)
    pruned = load_model(task)
    kept = {tuple(sorted(p)) for p in candidate_pairs(pruned)}
    worst, dropped_touched, episodes = 0.0, set(), 0
    for kind in POLICY_KINDS:
        for seed in seeds:
            a = run_episode(task, seed, kind, model=copy.deepcopy(full))
            b = run_episode(task, seed, kind, model=copy.deepcopy(pruned), actions=a["actions"])
            worst = max(worst, float(np.abs(a["qpos"] - b["qpos"]).max()))
            dropped_touched |= {p for p in a["touched"] if p not in kept}
            episodes += 1
    return {
        "episodes": episodes,
        "max_abs_qpos_diff": worst,
        "dropped_pairs_touched": sorted(f"{geom_label(full, a)} | {geom_label(full, b)}" for a, b in dropped_touched),
    }


def stand_in_fidelity(task: str, seeds=FIDELITY_SEEDS) -> dict:
    """Original cylinders vs stand-ins (both unpruned) on scripted episodes: the original's actions
    replayed open-loop (hand and object deviation, per-step success agreement), and each model
    closed-loop under the scripted policy (success rates)."""
    original = load_model(task, stand_ins=False, prune_pairs=False)
    stand_in = load_model(task, prune_pairs=False)
    return _replay_fidelity(task, original, stand_in, "stand_ins", seeds)


def hull_fidelity(task: str, seeds=FIDELITY_SEEDS) -> dict:
    """The file's gripper hull vs the capped one (`GRIPPER_HULL_VERTICES`; both with stand-ins,
    unpruned) on scripted episodes, as `stand_in_fidelity`, plus the hulls' sizes and the largest
    distance of a full-hull vertex outside the capped hull (`hull_gap_m`)."""
    full = load_model(task, prune_pairs=False, gripper_hull_vertices=None)
    capped = load_model(task, prune_pairs=False)
    mesh = mujoco.mj_name2id(full, mujoco.mjtObj.mjOBJ_MESH, GRIPPER_MESH)
    return {
        "hull_vertices": {"original": len(hull(full, mesh)[0]), "capped_hull": len(hull(capped, mesh)[0])},
        "hull_gap_m": hull_gap_m(full, capped, mesh),
        **_replay_fidelity(task, full, capped, "capped_hull", seeds),
    }


def hull(model: mujoco.MjModel, mesh: int) -> tuple[np.ndarray, np.ndarray]:
    """The convex hull MuJoCo computed for `mesh` (what C MuJoCo and MJX collide): its vertices
    (n, 3) and its triangles (m, 3, 3), in the mesh's frame, read from `mesh_graph`."""
    graph = model.mesh_graph[model.mesh_graphadr[mesh]:]
    nvert, nface = int(graph[0]), int(graph[1])
    vert_ids = graph[2 + nvert : 2 + 2 * nvert]
    face_start = 2 + 3 * nvert + 3 * nface  # after vert_edgeadr, vert_globalid, edge_localid
    face_ids = graph[face_start : face_start + 3 * nface].reshape(-1, 3)
    vertices = model.mesh_vert[model.mesh_vertadr[mesh] : model.mesh_vertadr[mesh] + model.mesh_vertnum[mesh]]
    return vertices[vert_ids], vertices[face_ids]


def hull_gap_m(full: mujoco.MjModel, capped: mujoco.MjModel, mesh: int, directions: int = 4096) -> float:
    """How much collision shape the cap removes: the Hausdorff distance (m) between `full`'s and
    `capped`'s hulls of `mesh`, i.e. the largest difference of their support functions, taken over
    the capped hull's facet normals and `directions` evenly spread directions (float64; the capped
    hull's vertices are the mesh's own points, so it lies inside the full one)."""
    from scipy.spatial import ConvexHull

    outer = hull(full, mesh)[0].astype(np.float64)
    inner = hull(capped, mesh)[0].astype(np.float64)
    i = np.arange(directions) + 0.5
    polar, azimuth = np.arccos(1 - 2 * i / directions), np.pi * (1 + 5**0.5) * i
    spread = np.stack([np.cos(azimuth) * np.sin(polar), np.sin(azimuth) * np.sin(polar), np.cos(polar)], axis=1)
    normals = np.concatenate([ConvexHull(inner).equations[:, :3], spread])
    return float(max(0.0, ((outer @ normals.T).max(axis=0) - (inner @ normals.T).max(axis=0)).max()))


def _replay_fidelity(task: str, reference: mujoco.MjModel, changed: mujoco.MjModel, name: str, seeds) -> dict:
    """`reference`'s scripted episodes replayed open-loop on `changed` (largest hand and object
    deviation, per-step success agreement), and each model closed-loop (episodes succeeded;
    `name` names the changed model's entries)."""
    hand = obj = 0.0
    agree = steps = 0
    success = {"original": 0, name: 0, f"{name}_open_loop": 0}
    for seed in seeds:
        a = run_episode(task, seed, "scripted", model=copy.deepcopy(reference))
        b = run_episode(task, seed, "scripted", model=copy.deepcopy(changed), actions=a["actions"])
        c = run_episode(task, seed, "scripted", model=copy.deepcopy(changed))
        hand = max(hand, float(np.linalg.norm(a["hand"] - b["hand"], axis=1).max()))
        obj = max(obj, float(np.linalg.norm(a["obj"] - b["obj"], axis=1).max()))
        agree += int((a["success"] == b["success"]).sum())
        steps += len(a["success"])
        success["original"] += bool(a["success"].any())
        success[f"{name}_open_loop"] += bool(b["success"].any())
        success[name] += bool(c["success"].any())
    return {
        "episodes": len(seeds),
        "max_hand_deviation_m": hand,
        "max_object_deviation_m": obj,
        "success_step_agreement": agree / steps,
        "episodes_succeeded": success,
    }


KEPT_PAIRS_ABOUT = (
    "Per Meta-World task, the geom pairs (labels: the geom's name, or '<body>[k]' for the k-th geom of its body) that "
    "stay MJX contact candidates in envs.metaworld_model.load_model(task, prune_pairs=True); measured by "
    "python -m envs.tools.metaworld_contacts --measure (docs/metaworld_model.md). window-open-v3 and drawer-close-v3 "
    "share one model file with window-close-v3 and drawer-open-v3, and their pairs (envs.metaworld_model.KEPT_PAIRS_ALIASES). "
    "Hash-pinned: envs.metaworld_model.KEPT_PAIRS_SHA256."
)
"""The `about` entry of the kept-pairs file: what the file is, for a reader who opens it."""


def write_kept_pairs(pairs: dict[str, tuple[tuple[str, str], ...]], path: str = KEPT_PAIRS_FILE) -> str:
    """Writes `pairs` (task -> geom-label pairs) as the file `envs.metaworld_model` reads, one pair
    a line, the aliased tasks left out (they must hold their task's pairs). Returns the file's
    sha256: what `KEPT_PAIRS_SHA256` must be set to."""
    for alias, task in KEPT_PAIRS_ALIASES.items():
        if alias in pairs and task in pairs and tuple(pairs[alias]) != tuple(pairs[task]):
            raise ValueError(f"{alias} shares the model file of {task}, so it must keep the same pairs")
    blocks = []
    for task, task_pairs in pairs.items():
        if task not in KEPT_PAIRS_ALIASES:
            rows = ",\n".join(f"   {json.dumps(list(pair))}" for pair in task_pairs)
            blocks.append(f"  {json.dumps(task)}: [\n{rows}\n  ]")
    text = f'{{\n "about": {json.dumps(KEPT_PAIRS_ABOUT)},\n "kept_pairs": {{\n' + ",\n".join(blocks) + "\n }\n}\n"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


if __name__ == "__main__":  # pragma: no cover
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--measure", action="store_true", help=f"rerun the measurements; writes {REPORT_FILE}")
    parser.add_argument("--hull", metavar="FILE", help="measure only the capped gripper hull (hull_fidelity, every model file) into FILE")
    parser.add_argument("--adopt", action="store_true", help="with --measure: write the chosen pairs to envs/metaworld_kept_pairs.json")
    args = parser.parse_args()
    if args.hull:
        tasks = [t for t in TASK_FILES if t not in KEPT_PAIRS_ALIASES]
        results = {}
        for task in tasks:
            results[task] = hull_fidelity(task)
            print(json.dumps({task: results[task]}), flush=True)
            with open(args.hull, "w", encoding="utf-8") as handle:
                json.dump(results, handle, indent=1)
    if args.measure:
        KEPT_PAIRS.clear()  # chosen afresh (`measure` fills it task by task)
        measure(out_path=REPORT_FILE)
        if args.adopt:
            digest = write_kept_pairs(KEPT_PAIRS)
            print(f"wrote {KEPT_PAIRS_FILE}; set KEPT_PAIRS_SHA256 in envs/metaworld_model.py to {digest}")
