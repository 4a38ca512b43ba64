"""Meta-World 3.0.0's models of the seven sparse tasks (paper Table 2), made steppable by MJX.

The models are Meta-World's own XML files, read from the installed `metaworld` package (nothing
is copied here) after a sha256 check against `metaworld_assets.sha256` (every file the seven
tasks load: XMLs, meshes, textures; listed by tracing what MuJoCo opens). `load_model(task)`
returns the model as Meta-World 3.0.0 runs it under mujoco 3.17 (the weld `eq_data` that its
`reset_mocap_welds` writes, below), plus three edits that `docs/metaworld_model.md` measures:

- stand-ins (`stand_ins=True`): MJX has no cylinder-box and cylinder-mesh collisions, so the
  cylinder collision geoms of the window handle, the button, the door handle and the reach puck
  are replaced, in place (same geom id, name, body, pose, friction, solref, solimp, margin,
  contype), by the stand-in that `STAND_IN_KINDS` names: a box or a 16-sided prism (a convex
  mesh with its vertices on the cylinder's surface). The bodies' mass, centre of mass and
  inertia are pinned to the original model's, so only the collision shape changes;
- contact pruning (`prune_pairs=True`): MJX reserves contacts for every candidate geom pair
  and pays for each at every step, so only the geom pairs listed in `KEPT_PAIRS` (read from
  `metaworld_kept_pairs.json`, hash-checked: those measured to come within 3 cm of touching in
  Meta-World's own envs, `envs.tools.metaworld_contacts`) stay candidates. The pruning edits
  only `geom_contype`/`geom_conaffinity` (each kept geom gets its own contype bit and the bits
  of its partners as conaffinity), which enter the pair filter and nothing else: the contact
  parameters of the kept pairs (friction, solref, solimp, margin, gap, condim) are computed
  exactly as before, and C MuJoCo steps the pruned model bit-for-bit like the unpruned one as
  long as no dropped pair would have touched;
- the gripper's hull (`gripper_hull_vertices=GRIPPER_HULL_VERTICES`): the hand's collision mesh
  (`GRIPPER_MESH`, 6,693 vertices) collides through its convex hull, 883 vertices, and MJX's
  box-mesh separating-axis test runs over all its faces and edges for every pair: 95 % of a
  Meta-World physics step on a CPU. The mesh's `maxhullvert` caps the hull (qhull keeps the
  farthest points first), for C MuJoCo and MJX alike; the visual mesh and the inertia are unchanged.

Meta-World 3.0.0 under mujoco 3.17: `SawyerMocapBase.reset_mocap_welds` assigns an 11-value row
to `model.eq_data[i]`, which has 12 columns now, and crashes; its intent (and what this module
applies) is `eq_data[i, :11] = (0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 5)` for every weld row (the
twelfth column is left as compiled).

`python -m envs.tools.metaworld_contacts --measure` reruns the measurements (C MuJoCo, Meta-World's
own envs and scripted policies) and writes `docs/evidence/data/metaworld/metaworld_model.json`;
`python -m envs.metaworld_model --manifest` rewrites the hash manifest from the installed files.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os

import mujoco
import numpy as np

PINNED = "metaworld==3.0.0"
"""The Meta-World release whose files the manifest pins."""

TASK_FILES: dict[str, str] = {
    "window-close-v3": "sawyer_xyz/sawyer_window_horizontal.xml",
    "window-open-v3": "sawyer_xyz/sawyer_window_horizontal.xml",
    "drawer-close-v3": "sawyer_xyz/sawyer_drawer.xml",
    "drawer-open-v3": "sawyer_xyz/sawyer_drawer.xml",
    "reach-v3": "sawyer_xyz/sawyer_reach_v3.xml",
    "button-press-topdown-v3": "sawyer_xyz/sawyer_button_press_topdown.xml",
    "door-open-v3": "sawyer_xyz/sawyer_door_pull.xml",
}
"""Meta-World task name -> its model file, relative to `asset_dir()`."""

MANIFEST_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "metaworld_assets.sha256")
KEPT_PAIRS_FILE = os.path.join(os.path.dirname(MANIFEST_FILE), "metaworld_kept_pairs.json")
WELD_EQ_DATA = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 5.0)
"""What Meta-World's `reset_mocap_welds` writes into each weld row of `eq_data` (first 11 columns)."""

PRISM_SIDES = 16

GRIPPER_MESH = "eGripperBase"
"""The Sawyer hand's mesh, the one colliding mesh of every task (geom `right_hand[0]`)."""

GRIPPER_HULL_VERTICES = 64
"""The default cap on the gripper hull's vertices (the file's hull has 883). At 64 every vertex of
the full hull lies within 1.6 mm of the capped hull, and the box-mesh collisions of a window-close
step cost 21x less on a CPU (docs/metaworld.md "Model changes for MJX, and their measured effect")."""

# Collision geoms are named by `geom_label`: the geom's name, or "<body name>[k]" for the k-th
# geom of its body (unnamed bodies as "#<body id>"). Ids are stable: the files are hash-pinned.
STAND_INS: dict[str, tuple[str, ...]] = {
    "sawyer_xyz/sawyer_window_horizontal.xml": ("windowb_a[7]", "windowb_a[8]"),
    "sawyer_xyz/sawyer_drawer.xml": (),
    "sawyer_xyz/sawyer_reach_v3.xml": ("objGeom",),
    "sawyer_xyz/sawyer_button_press_topdown.xml": ("button[2]", "button[3]", "button[4]"),
    "sawyer_xyz/sawyer_door_pull.xml": ("door_link[5]", "door_link[6]", "door_link[7]", "door_link[8]"),
}
"""Per model file, the cylinder collision geoms replaced by stand-ins (every cylinder that can
meet a box or a mesh)."""

CAPSULE_STAND_INS: dict[str, tuple[str, ...]] = {
    "sawyer_xyz/sawyer_window_horizontal.xml": ("windowb_a[9]", "windowb_a[10]", "windowb_a[11]"),
    "sawyer_xyz/sawyer_drawer.xml": ("drawer_link[7]", "drawer_link[8]", "drawer_link[9]"),
    "sawyer_xyz/sawyer_reach_v3.xml": (),
    "sawyer_xyz/sawyer_button_press_topdown.xml": (),
    "sawyer_xyz/sawyer_door_pull.xml": (),
}
"""Per model file, the capsule collision geoms replaced by boxes (half-sizes r, r, h + r: the
capsule's bounding box) when `capsule_stand_ins` is on: the window's and the drawer's handle bars.
MJX collides capsules with boxes and meshes (`capsule_convex`), but only by the convex's face
normals plus a *shallow* edge test: once the capsule's axis segment passes an edge of the convex
(penetration deeper than the 8 mm radius), it returns no contact at all, where C MuJoCo's
GJK/EPA keeps one. Pushing a closed window, the hand (`right_hand[0]`, a mesh) sinks 11 mm into
the bar; MJX then drops the contact and the hand passes through it (window-close's scripted
policy reopened the window in 3 of 4 episodes). Box-box and box-mesh use MJX's separating-axis
colliders, which keep deep contacts (docs/metaworld.md "Against Meta-World itself", `docs/evidence/data/metaworld/closed_loop_cpu.json`)."""

STAND_IN_KINDS: dict[str, str] = dict.fromkeys(STAND_INS, "box")
"""Per model file, the stand-in shape: "box" (half-sizes r, r, h: the cylinder's bounding box,
touching it along the geom's local x and y axes) or "prism" (`PRISM_SIDES`-gon prism mesh,
vertices on the cylinder). Boxes everywhere: MJX's `put_model` refuses the prism, because
box-mesh pairs may have no margin and the finger pads have margin 0.001 (their partners would
need a changed margin, i.e. changed physics); the box's fidelity is measured by `envs.tools.metaworld_contacts.stand_in_fidelity`."""

KEPT_PAIRS_SHA256 = "6e0e9a6647aa6df441934f215bb28c72d4a41ad5c6c866dd451acd1b0f0dadb9"
"""The sha256 of `KEPT_PAIRS_FILE` as measured: the pairs are data, and an edit by hand would
silently let geoms pass through each other (`python -m envs.tools.metaworld_contacts --measure
--adopt` rewrites the file and prints its new hash)."""

KEPT_PAIRS_ALIASES: dict[str, str] = {"window-open-v3": "window-close-v3", "drawer-close-v3": "drawer-open-v3"}
"""Task -> the task whose kept pairs it uses: the two tasks of one model file pool their measured
episodes, so they keep the same pairs (the file lists each set once)."""


# -- files ----------------------------------------------------------------------------------------
def asset_dir() -> str:
    """The installed `metaworld/assets` directory (located without importing metaworld)."""
    spec = importlib.util.find_spec("metaworld")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the Meta-World tasks read their models from the metaworld package: pip install {PINNED}"
        )
    return os.path.join(spec.submodule_search_locations[0], "assets")


def read_manifest(path: str = MANIFEST_FILE) -> dict[str, str]:
    """{path relative to `asset_dir()`: sha256 hex} from the manifest (`sha256sum` format)."""
    manifest = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if line and not line.startswith("#"):
                digest, rel = line.split(maxsplit=1)
                manifest[rel.strip()] = digest
    return manifest


def _sha256(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def verify_assets(root: str | None = None) -> None:
    """Raise `RuntimeError` unless every manifest file under `root` (default `asset_dir()`) has its
    pinned sha256."""
    root = asset_dir() if root is None else root
    for rel, expected in read_manifest().items():
        path = os.path.join(root, rel)
        found = _sha256(path) if os.path.isfile(path) else "missing"
        if found != expected:
            raise RuntimeError(
                f"Meta-World asset {path} does not match the pinned release {PINNED}: "
                f"expected sha256 {expected}, found {found}. Install {PINNED} (pip install {PINNED})."
            )


def read_kept_pairs(path: str = KEPT_PAIRS_FILE, sha256: str = KEPT_PAIRS_SHA256) -> dict[str, tuple[tuple[str, str], ...]]:
    """{task: the geom pairs (labels) that stay contact candidates} from the kept-pairs file, after
    checking its sha256; the aliased tasks (`KEPT_PAIRS_ALIASES`) share their task's tuple."""
    found = _sha256(path) if os.path.isfile(path) else "missing"
    if found != sha256:
        raise RuntimeError(
            f"{path} does not match its pinned sha256 (KEPT_PAIRS_SHA256 in envs/metaworld_model.py): "
            f"expected {sha256}, found {found}. Restore the file (git checkout -- envs/metaworld_kept_pairs.json), "
            "or, adopting new measurements, set KEPT_PAIRS_SHA256 to the found hash."
        )
    with open(path, encoding="utf-8") as handle:
        listed = json.load(handle)["kept_pairs"]
    pairs = {task: tuple((first, second) for first, second in task_pairs) for task, task_pairs in listed.items()}
    for alias, task in KEPT_PAIRS_ALIASES.items():
        pairs[alias] = pairs[task]
    return pairs


KEPT_PAIRS: dict[str, tuple[tuple[str, str], ...]] = read_kept_pairs()
"""Per task, the geom pairs (labels) that stay contact candidates; measured by
`envs.tools.metaworld_contacts.measure`."""


def _traced_files(xml_path: str, root: str) -> list[str]:
    """The files under `root` that MuJoCo opens to compile `xml_path` (needs strace; for
    `--manifest` only)."""
    import subprocess
    import sys
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".trace") as trace:
        code = f"import mujoco; mujoco.MjModel.from_xml_path({xml_path!r})"
        subprocess.run(
            ["strace", "-f", "-e", "trace=openat", "-o", trace.name, sys.executable, "-c", code], check=True
        )
        files = set()
        with open(trace.name, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if "ENOENT" in line or '"' not in line:
                    continue
                path = os.path.realpath(line.split('"')[1])
                if path.startswith(os.path.realpath(root) + os.sep) and os.path.isfile(path):
                    files.add(os.path.relpath(path, os.path.realpath(root)))
    return sorted(files)


def write_manifest(path: str = MANIFEST_FILE) -> None:
    root = asset_dir()
    files = sorted({f for rel in set(TASK_FILES.values()) for f in _traced_files(os.path.join(root, rel), root)})
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"# sha256 of every file the seven Meta-World tasks load ({PINNED}), relative to metaworld/assets.\n")
        handle.write("# Regenerate: python -m envs.metaworld_model --manifest\n")
        for rel in files:
            handle.write(f"{_sha256(os.path.join(root, rel))}  {rel}\n")


# -- model ----------------------------------------------------------------------------------------
def geom_label(model: mujoco.MjModel, geom: int) -> str:
    """A geom's name, or "<body>[k]" for the k-th geom of its body."""
    name = model.geom(geom).name
    if name:
        return name
    body = int(model.geom_bodyid[geom])
    return f"{model.body(body).name or f'#{body}'}[{geom - int(model.body_geomadr[body])}]"


def geom_by_label(model: mujoco.MjModel, label: str) -> int:
    for geom in range(model.ngeom):
        if geom_label(model, geom) == label:
            return geom
    raise KeyError(f"no geom labelled {label!r} in the model")


def _check_task(task: str) -> str:
    if task not in TASK_FILES:
        raise ValueError(f"unknown Meta-World task {task!r}; valid: {', '.join(sorted(TASK_FILES))}")
    return TASK_FILES[task]


def fix_weld_eq_data(model: mujoco.MjModel) -> None:
    """What Meta-World's `reset_mocap_welds` means to do (its 11-value row fails on 12 columns)."""
    for i in range(model.neq):
        if model.eq_type[i] == mujoco.mjtEq.mjEQ_WELD:
            model.eq_data[i, : len(WELD_EQ_DATA)] = WELD_EQ_DATA


def _prism_vertices(radius: float, half_height: float, sides: int = PRISM_SIDES) -> np.ndarray:
    angle = 2 * np.pi * np.arange(sides) / sides
    ring = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    return np.concatenate(
        [np.concatenate([ring, np.full((sides, 1), z)], axis=1) for z in (-half_height, half_height)]
    ).astype(np.float64)


def _apply_stand_ins(spec: mujoco.MjSpec, original: mujoco.MjModel, labels, kind: str, capsules=()) -> None:
    geoms = list(spec.geoms)
    bodies = set()
    for label in capsules:
        gid = geom_by_label(original, label)
        if original.geom_type[gid] != mujoco.mjtGeom.mjGEOM_CAPSULE:
            raise ValueError(f"capsule stand-in target {label} is not a capsule")
        radius, half_length = (float(x) for x in original.geom_size[gid, :2])
        geoms[gid].type = mujoco.mjtGeom.mjGEOM_BOX
        geoms[gid].size = [radius, radius, half_length + radius]
        bodies.add(int(original.geom_bodyid[gid]))
    for label in labels:
        gid = geom_by_label(original, label)
        if original.geom_type[gid] != mujoco.mjtGeom.mjGEOM_CYLINDER:
            raise ValueError(f"stand-in target {label} is not a cylinder")
        radius, half_height = (float(x) for x in original.geom_size[gid, :2])
        geom = geoms[gid]
        if kind == "box":
            geom.type = mujoco.mjtGeom.mjGEOM_BOX
            geom.size = [radius, radius, half_height]
        elif kind == "prism":
            mesh = spec.add_mesh()
            mesh.name = f"stand_in_prism_{gid}"
            mesh.uservert = _prism_vertices(radius, half_height).ravel().tolist()
            geom.type = mujoco.mjtGeom.mjGEOM_MESH
            geom.meshname = mesh.name
        else:
            raise ValueError(f"unknown stand-in kind {kind!r}")
        bodies.add(int(original.geom_bodyid[gid]))
    # The collision shape changes; the mass distribution must not.
    spec_bodies = list(spec.bodies)
    for body in bodies:
        b = spec_bodies[body]
        b.explicitinertial = True
        b.mass = float(original.body_mass[body])
        b.ipos = original.body_ipos[body].tolist()
        b.iquat = original.body_iquat[body].tolist()
        b.inertia = original.body_inertia[body].tolist()
        b.fullinertia = [np.nan] * 6


def _prune(model: mujoco.MjModel, pairs) -> None:
    ids = [(geom_by_label(model, a), geom_by_label(model, b)) for a, b in pairs]
    kept = sorted({g for pair in ids for g in pair})
    if len(kept) > 32:
        raise ValueError(f"{len(kept)} geoms in kept pairs: more than the 32 contype bits")
    bit = {g: np.uint32(1) << np.uint32(i) for i, g in enumerate(kept)}
    contype = np.zeros(model.ngeom, np.uint32)
    conaffinity = np.zeros(model.ngeom, np.uint32)
    for a, b in ids:
        contype[a], contype[b] = bit[a], bit[b]
        conaffinity[a] |= bit[b]
        conaffinity[b] |= bit[a]
    model.geom_contype[:] = contype.view(np.int32)
    model.geom_conaffinity[:] = conaffinity.view(np.int32)


def check_gripper_hull_vertices(vertices: int | None) -> None:
    """Raises ValueError unless `vertices` is None (the file's full hull) or a cap of at least 4
    (the fewest a hull with volume has)."""
    if vertices is not None and vertices < 4:
        raise ValueError(f"gripper_hull_vertices must be None (the file's full hull) or >= 4, got {vertices}")


def _cap_hull(spec: mujoco.MjSpec, vertices: int) -> None:
    meshes = [mesh for mesh in spec.meshes if mesh.name == GRIPPER_MESH]
    if len(meshes) != 1:
        raise ValueError(f"expected one mesh named {GRIPPER_MESH!r} in the model, found {len(meshes)}")
    meshes[0].maxhullvert = vertices


def load_model(
    task: str,
    *,
    stand_ins: bool = True,
    capsule_stand_ins: bool | None = None,
    prune_pairs: bool = True,
    gripper_hull_vertices: int | None = GRIPPER_HULL_VERTICES,
) -> mujoco.MjModel:
    """The task's model as Meta-World 3.0.0 runs it (weld fix applied), with MJX stand-ins for the
    cylinders (`stand_ins`) and the capsules (`capsule_stand_ins`, default: as `stand_ins`), only
    the geom pairs that can touch as contact candidates (`prune_pairs`), and the gripper's
    collision hull capped at `gripper_hull_vertices` (None: the file's full hull). Verifies the
    installed files against the manifest first."""
    rel = _check_task(task)
    check_gripper_hull_vertices(gripper_hull_vertices)
    root = asset_dir()
    verify_assets(root)
    path = os.path.join(root, rel)
    original = mujoco.MjModel.from_xml_path(path)
    cylinders = STAND_INS[rel] if stand_ins else ()
    capsules = CAPSULE_STAND_INS[rel] if (stand_ins if capsule_stand_ins is None else capsule_stand_ins) else ()
    if cylinders or capsules or gripper_hull_vertices is not None:
        spec = mujoco.MjSpec.from_file(path)
        _apply_stand_ins(spec, original, cylinders, STAND_IN_KINDS[rel], capsules)
        if gripper_hull_vertices is not None:
            _cap_hull(spec, gripper_hull_vertices)
        model = spec.compile()
    else:
        model = original
    fix_weld_eq_data(model)
    if prune_pairs:
        if task not in KEPT_PAIRS:
            raise ValueError(f"no measured contact pairs for {task}; run python -m envs.tools.metaworld_contacts --measure")
        _prune(model, KEPT_PAIRS[task])
    return model


# -- MJX's contact candidates -----------------------------------------------------------------------
def candidate_pairs(model: mujoco.MjModel) -> list[tuple[int, int]]:
    """The geom pairs MJX would collide (its `geom_pairs`: contype/conaffinity, exclusions,
    self and parent-child filters, explicit pairs)."""
    from mujoco.mjx._src import collision_driver

    return [(int(a), int(b)) for a, b, _ in collision_driver.geom_pairs(model)]


def contact_candidates(model: mujoco.MjModel) -> int:
    """The number of contacts MJX reserves for `model` (the leading size of
    `mjx.make_data(mjx.put_model(model)).contact`); no jit, no device transfer."""
    from mujoco.mjx._src import collision_driver

    return len(collision_driver.make_condim(model))


if __name__ == "__main__":  # pragma: no cover
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--manifest", action="store_true", help="rewrite metaworld_assets.sha256")
    args = parser.parse_args()
    if args.manifest:
        write_manifest()
