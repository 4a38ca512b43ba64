"""What the gripper hull's vertex cap trades: collision shape against MJX's box-mesh cost.

For each cap (and the file's full hull): the hull's vertices, how far the full hull reaches
beyond it (`envs.tools.metaworld_contacts.hull_gap_m`), the seconds of MJX's box-mesh collision
group of one window-close instance at its reset state (jitted alone: the group whose cost grows
with the hull's faces and edges), and of one env step of a batch of instances.

    python benchmarks/metaworld_hull.py [--caps 32 64 128] [--instances 4] [--out FILE.json]

It reaches into MJX's collision driver (`_geom_groups`, `_COLLISION_FUNC`) to time one group;
those names are those of the MJX release `envs.mjx_solver.require_pinned_mjx` pins.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import jax
import jax.numpy as jp
import mujoco
import numpy as np
from mujoco import mjx

from envs import metaworld as mw, metaworld_model as mm
from envs.tools.metaworld_contacts import hull, hull_gap_m

TASK = "mw_window_close"


def _seconds(function, argument, repeats: int) -> float:
    jax.block_until_ready(function(argument))  # compiled and warm
    start = time.perf_counter()
    for _ in range(repeats):
        result = function(argument)
    jax.block_until_ready(result)
    return (time.perf_counter() - start) / repeats


def box_mesh_seconds(model: mujoco.MjModel, repeats: int = 10) -> tuple[int, float]:
    """The box-mesh pairs of `model` and the seconds MJX's collision function takes over them
    (one instance, positions of the model's default state)."""
    from mujoco.mjx._src import collision_driver, smooth

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message='Mesh "eGripperBase" has a coplanar face')
        mx = mjx.put_model(model)
    data = jax.jit(lambda d: smooth.kinematics(mx, d))(mjx.make_data(mx))
    for key, pairs in collision_driver._geom_groups(mx).items():
        if tuple(int(t) for t in key.types) == (int(mujoco.mjtGeom.mjGEOM_BOX), int(mujoco.mjtGeom.mjGEOM_MESH)):
            collide = collision_driver._COLLISION_FUNC[key.types]
            geoms = jp.array(np.array(pairs)[:, :2])
            group = jax.jit(lambda d, collide=collide, key=key, geoms=geoms: collide(mx, d, key, geoms))
            return len(pairs), _seconds(group, data, repeats)
    raise ValueError("the model has no box-mesh pair")


def env_step_seconds(cap: int | None, instances: int, repeats: int = 10) -> float:
    """Seconds of one env step of `instances` batched window-close instances (zero actions)."""
    env = mw.TASKS[TASK](mw.MetaWorldConfig(gripper_hull_vertices=cap))
    states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), instances))
    actions = jp.zeros((instances, env.action_size))
    step = jax.jit(jax.vmap(env.step))
    return _seconds(lambda s: step(s, actions), states, repeats)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--caps", type=int, nargs="*", default=[32, 64, 128], help="hull vertex caps (the full hull is always measured)")
    parser.add_argument("--instances", type=int, default=4, help="batched instances of the env step timed")
    parser.add_argument("--out", help="write the rows as JSON")
    args = parser.parse_args(argv)
    task = mw.TASKS[TASK].metaworld_name
    full = mm.load_model(task, gripper_hull_vertices=None)
    mesh = mujoco.mj_name2id(full, mujoco.mjtObj.mjOBJ_MESH, mm.GRIPPER_MESH)
    rows = []
    for cap in [None, *args.caps]:
        model = mm.load_model(task, gripper_hull_vertices=cap)
        pairs, group = box_mesh_seconds(model)
        row = {
            "cap": cap,
            "hull_vertices": len(hull(model, mesh)[0]),
            "hull_gap_mm": round(1000 * hull_gap_m(full, model, mesh), 3),
            "box_mesh_pairs": pairs,
            "box_mesh_ms": round(1000 * group, 2),
            f"env_step_s_{args.instances}_instances": round(env_step_seconds(cap, args.instances), 4),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    report = {"task": TASK, "device": jax.devices()[0].device_kind, "jax": jax.__version__, "mujoco": mujoco.__version__, "rows": rows}
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(report, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
