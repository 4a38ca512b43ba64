"""Meta-World 3.0.0's models of the seven sparse tasks (paper Table 2), made steppable by MJX.

The models are Meta-World's own XML files, read from the installed `metaworld` package (nothing
is copied here) after a sha256 check against `metaworld_assets.sha256` (every file the seven
tasks load: XMLs, meshes, textures; listed by tracing what MuJoCo opens). `load_model(task)`
returns the model as Meta-World 3.0.0 runs it under mujoco 3.17 (the weld `eq_data` that its
`reset_mocap_welds` writes, below), plus two edits that `docs/metaworld_model.md` measures:

- stand-ins (`stand_ins=True`): MJX has no cylinder-box and cylinder-mesh collisions, so the
  cylinder collision geoms of the window handle, the button, the door handle and the reach puck
  are replaced, in place (same geom id, name, body, pose, friction, solref, solimp, margin,
  contype), by the stand-in that `STAND_IN_KINDS` names: a box or a 16-sided prism (a convex
  mesh with its vertices on the cylinder's surface). The bodies' mass, centre of mass and
  inertia are pinned to the original model's, so only the collision shape changes;
- contact pruning (`prune_pairs=True`): MJX reserves contact slots for every candidate geom pair
  and pays for each at every step, so only the geom pairs listed in `KEPT_PAIRS` (those measured
  to come within `KEEP_DISTANCE` of touching, see `measure`) stay candidates. The pruning edits
  only `geom_contype`/`geom_conaffinity` (each kept geom gets its own contype bit and the bits
  of its partners as conaffinity), which enter the pair filter and nothing else: the contact
  parameters of the kept pairs (friction, solref, solimp, margin, gap, condim) are computed
  exactly as before, and C MuJoCo steps the pruned model bit-for-bit like the unpruned one as
  long as no dropped pair would have touched.

Meta-World 3.0.0 under mujoco 3.17: `SawyerMocapBase.reset_mocap_welds` assigns an 11-value row
to `model.eq_data[i]`, which has 12 columns now, and crashes; its intent (and what this module
applies) is `eq_data[i, :11] = (0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 5)` for every weld row (the
twelfth column is left as compiled).

`python -m envs.metaworld_model --measure` reruns the measurements (C MuJoCo, Meta-World's own
envs and scripted policies) and writes `docs/metaworld_model.json`;
`python -m envs.metaworld_model --manifest` rewrites the hash manifest from the installed files.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib.util
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
WELD_EQ_DATA = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 5.0)
"""What Meta-World's `reset_mocap_welds` writes into each weld row of `eq_data` (first 11 columns)."""

PRISM_SIDES = 16

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
colliders, which keep deep contacts (docs/metaworld.md "Against Meta-World itself", `docs/metaworld/closed_loop_cpu.json`)."""

STAND_IN_KINDS: dict[str, str] = dict.fromkeys(STAND_INS, "box")
"""Per model file, the stand-in shape: "box" (half-sizes r, r, h: the cylinder's bounding box,
touching it along the geom's local x and y axes) or "prism" (`PRISM_SIDES`-gon prism mesh,
vertices on the cylinder). Boxes everywhere: MJX's `put_model` refuses the prism, because
box-mesh pairs may have no margin and the finger pads have margin 0.001 (their partners would
need a changed margin, i.e. changed physics); the box's fidelity is measured by `measure`."""

KEEP_DISTANCE = 0.03
"""A geom pair stays a contact candidate if it came within this distance (m) in any of the
measured episodes (`measure`)."""

# fmt: off
KEPT_PAIRS: dict[str, tuple[tuple[str, str], ...]] = {
    "window-close-v3": (
        ("#34[2]", "leftclaw_it"),
        ("#34[2]", "leftpad_geom"),
        ("#34[2]", "right_hand[0]"),
        ("#34[2]", "rightclaw_it"),
        ("#34[2]", "rightpad_geom"),
        ("#34[2]", "windowb_a[13]"),
        ("#34[2]", "windowb_a[16]"),
        ("#34[3]", "leftclaw_it"),
        ("#34[3]", "leftpad_geom"),
        ("#34[3]", "right_hand[0]"),
        ("#34[3]", "rightclaw_it"),
        ("#34[3]", "rightpad_geom"),
        ("#34[4]", "leftclaw_it"),
        ("#34[4]", "leftpad_geom"),
        ("#34[4]", "right_hand[0]"),
        ("#34[4]", "rightclaw_it"),
        ("#34[4]", "rightpad_geom"),
        ("#34[4]", "windowb_a[10]"),
        ("#34[4]", "windowb_a[12]"),
        ("#34[4]", "windowb_a[14]"),
        ("#34[4]", "windowb_a[15]"),
        ("#34[4]", "windowb_a[17]"),
        ("#34[4]", "windowb_a[7]"),
        ("#34[4]", "windowb_a[8]"),
        ("#34[4]", "windowb_a[9]"),
        ("#34[6]", "leftclaw_it"),
        ("#34[6]", "leftpad_geom"),
        ("#34[6]", "right_hand[0]"),
        ("#34[6]", "rightclaw_it"),
        ("#34[6]", "rightpad_geom"),
        ("leftclaw_it", "rightclaw_it"),
        ("leftclaw_it", "rightpad_geom"),
        ("leftclaw_it", "tablelink[2]"),
        ("leftclaw_it", "windowb_a[10]"),
        ("leftclaw_it", "windowb_a[11]"),
        ("leftclaw_it", "windowb_a[12]"),
        ("leftclaw_it", "windowb_a[13]"),
        ("leftclaw_it", "windowb_a[14]"),
        ("leftclaw_it", "windowb_a[16]"),
        ("leftclaw_it", "windowb_a[17]"),
        ("leftclaw_it", "windowb_a[7]"),
        ("leftclaw_it", "windowb_a[8]"),
        ("leftclaw_it", "windowb_a[9]"),
        ("leftclaw_it", "windowb_b[3]"),
        ("leftclaw_it", "windowb_b[4]"),
        ("leftclaw_it", "windowb_b[5]"),
        ("leftclaw_it", "windowb_b[6]"),
        ("leftclaw_it", "windowb_b[7]"),
        ("leftpad_geom", "rightclaw_it"),
        ("leftpad_geom", "rightpad_geom"),
        ("leftpad_geom", "tablelink[2]"),
        ("leftpad_geom", "windowb_a[10]"),
        ("leftpad_geom", "windowb_a[11]"),
        ("leftpad_geom", "windowb_a[12]"),
        ("leftpad_geom", "windowb_a[13]"),
        ("leftpad_geom", "windowb_a[14]"),
        ("leftpad_geom", "windowb_a[16]"),
        ("leftpad_geom", "windowb_a[17]"),
        ("leftpad_geom", "windowb_a[7]"),
        ("leftpad_geom", "windowb_a[8]"),
        ("leftpad_geom", "windowb_a[9]"),
        ("leftpad_geom", "windowb_b[3]"),
        ("leftpad_geom", "windowb_b[4]"),
        ("leftpad_geom", "windowb_b[5]"),
        ("leftpad_geom", "windowb_b[6]"),
        ("leftpad_geom", "windowb_b[7]"),
        ("right_hand[0]", "tablelink[2]"),
        ("right_hand[0]", "windowb_a[10]"),
        ("right_hand[0]", "windowb_a[11]"),
        ("right_hand[0]", "windowb_a[12]"),
        ("right_hand[0]", "windowb_a[13]"),
        ("right_hand[0]", "windowb_a[14]"),
        ("right_hand[0]", "windowb_a[16]"),
        ("right_hand[0]", "windowb_a[17]"),
        ("right_hand[0]", "windowb_a[7]"),
        ("right_hand[0]", "windowb_a[8]"),
        ("right_hand[0]", "windowb_a[9]"),
        ("right_hand[0]", "windowb_b[3]"),
        ("right_hand[0]", "windowb_b[4]"),
        ("right_hand[0]", "windowb_b[5]"),
        ("right_hand[0]", "windowb_b[6]"),
        ("right_hand[0]", "windowb_b[7]"),
        ("rightclaw_it", "tablelink[2]"),
        ("rightclaw_it", "windowb_a[10]"),
        ("rightclaw_it", "windowb_a[11]"),
        ("rightclaw_it", "windowb_a[12]"),
        ("rightclaw_it", "windowb_a[13]"),
        ("rightclaw_it", "windowb_a[14]"),
        ("rightclaw_it", "windowb_a[16]"),
        ("rightclaw_it", "windowb_a[17]"),
        ("rightclaw_it", "windowb_a[7]"),
        ("rightclaw_it", "windowb_a[8]"),
        ("rightclaw_it", "windowb_a[9]"),
        ("rightclaw_it", "windowb_b[3]"),
        ("rightclaw_it", "windowb_b[4]"),
        ("rightclaw_it", "windowb_b[5]"),
        ("rightclaw_it", "windowb_b[6]"),
        ("rightclaw_it", "windowb_b[7]"),
        ("rightpad_geom", "tablelink[2]"),
        ("rightpad_geom", "windowb_a[10]"),
        ("rightpad_geom", "windowb_a[11]"),
        ("rightpad_geom", "windowb_a[12]"),
        ("rightpad_geom", "windowb_a[13]"),
        ("rightpad_geom", "windowb_a[14]"),
        ("rightpad_geom", "windowb_a[16]"),
        ("rightpad_geom", "windowb_a[17]"),
        ("rightpad_geom", "windowb_a[7]"),
        ("rightpad_geom", "windowb_a[8]"),
        ("rightpad_geom", "windowb_a[9]"),
        ("rightpad_geom", "windowb_b[3]"),
        ("rightpad_geom", "windowb_b[4]"),
        ("rightpad_geom", "windowb_b[5]"),
        ("rightpad_geom", "windowb_b[6]"),
        ("rightpad_geom", "windowb_b[7]"),
        ("windowb_a[14]", "windowb_b[3]"),
        ("windowb_a[14]", "windowb_b[6]"),
        ("windowb_a[15]", "windowb_b[2]"),
        ("windowb_a[15]", "windowb_b[6]"),
        ("windowb_a[9]", "windowb_b[4]"),
        ("windowb_a[9]", "windowb_b[6]"),
    ),
    "drawer-open-v3": (
        ("RetainingWall[1]", "drawer_link[3]"),
        ("RetainingWall[1]", "drawer_link[4]"),
        ("RetainingWall[1]", "drawer_link[5]"),
        ("RetainingWall[1]", "drawer_link[6]"),
        ("drawer_link[2]", "leftclaw_it"),
        ("drawer_link[2]", "leftpad_geom"),
        ("drawer_link[2]", "right_hand[0]"),
        ("drawer_link[2]", "rightclaw_it"),
        ("drawer_link[2]", "rightpad_geom"),
        ("drawer_link[3]", "drawercase_link[3]"),
        ("drawer_link[3]", "drawercase_link[5]"),
        ("drawer_link[3]", "leftclaw_it"),
        ("drawer_link[3]", "leftpad_geom"),
        ("drawer_link[3]", "right_hand[0]"),
        ("drawer_link[3]", "rightclaw_it"),
        ("drawer_link[3]", "rightpad_geom"),
        ("drawer_link[4]", "drawercase_link[1]"),
        ("drawer_link[4]", "drawercase_link[3]"),
        ("drawer_link[4]", "drawercase_link[4]"),
        ("drawer_link[4]", "drawercase_link[5]"),
        ("drawer_link[4]", "leftclaw_it"),
        ("drawer_link[4]", "leftpad_geom"),
        ("drawer_link[4]", "right_hand[0]"),
        ("drawer_link[4]", "rightclaw_it"),
        ("drawer_link[4]", "rightpad_geom"),
        ("drawer_link[5]", "drawercase_link[3]"),
        ("drawer_link[5]", "drawercase_link[5]"),
        ("drawer_link[5]", "leftclaw_it"),
        ("drawer_link[5]", "leftpad_geom"),
        ("drawer_link[5]", "right_hand[0]"),
        ("drawer_link[5]", "rightclaw_it"),
        ("drawer_link[5]", "rightpad_geom"),
        ("drawer_link[6]", "drawercase_link[1]"),
        ("drawer_link[6]", "drawercase_link[2]"),
        ("drawer_link[6]", "drawercase_link[3]"),
        ("drawer_link[6]", "drawercase_link[4]"),
        ("drawer_link[6]", "leftclaw_it"),
        ("drawer_link[6]", "leftpad_geom"),
        ("drawer_link[6]", "right_hand[0]"),
        ("drawer_link[6]", "rightclaw_it"),
        ("drawer_link[6]", "rightpad_geom"),
        ("drawer_link[7]", "leftclaw_it"),
        ("drawer_link[7]", "leftpad_geom"),
        ("drawer_link[7]", "right_hand[0]"),
        ("drawer_link[7]", "rightclaw_it"),
        ("drawer_link[7]", "rightpad_geom"),
        ("drawer_link[8]", "leftclaw_it"),
        ("drawer_link[8]", "leftpad_geom"),
        ("drawer_link[8]", "right_hand[0]"),
        ("drawer_link[8]", "rightclaw_it"),
        ("drawer_link[8]", "rightpad_geom"),
        ("drawer_link[9]", "leftclaw_it"),
        ("drawer_link[9]", "leftpad_geom"),
        ("drawer_link[9]", "right_hand[0]"),
        ("drawer_link[9]", "rightclaw_it"),
        ("drawer_link[9]", "rightpad_geom"),
        ("drawercase_link[1]", "leftclaw_it"),
        ("drawercase_link[1]", "leftpad_geom"),
        ("drawercase_link[1]", "right_hand[0]"),
        ("drawercase_link[1]", "rightclaw_it"),
        ("drawercase_link[1]", "rightpad_geom"),
        ("drawercase_link[2]", "leftclaw_it"),
        ("drawercase_link[2]", "leftpad_geom"),
        ("drawercase_link[2]", "right_hand[0]"),
        ("drawercase_link[2]", "rightclaw_it"),
        ("drawercase_link[2]", "rightpad_geom"),
        ("drawercase_link[5]", "leftclaw_it"),
        ("drawercase_link[5]", "leftpad_geom"),
        ("drawercase_link[5]", "right_hand[0]"),
        ("drawercase_link[5]", "rightclaw_it"),
        ("drawercase_link[5]", "rightpad_geom"),
        ("leftclaw_it", "rightclaw_it"),
        ("leftclaw_it", "rightpad_geom"),
        ("leftclaw_it", "tablelink[2]"),
        ("leftpad_geom", "rightclaw_it"),
        ("leftpad_geom", "rightpad_geom"),
        ("leftpad_geom", "tablelink[2]"),
        ("right_hand[0]", "tablelink[2]"),
        ("rightclaw_it", "tablelink[2]"),
        ("rightpad_geom", "tablelink[2]"),
    ),
    "reach-v3": (
        ("RetainingWall[1]", "leftclaw_it"),
        ("RetainingWall[1]", "leftpad_geom"),
        ("RetainingWall[1]", "right_hand[0]"),
        ("RetainingWall[1]", "rightclaw_it"),
        ("RetainingWall[1]", "rightpad_geom"),
        ("leftclaw_it", "objGeom"),
        ("leftclaw_it", "rightclaw_it"),
        ("leftclaw_it", "rightpad_geom"),
        ("leftclaw_it", "tablelink[2]"),
        ("leftpad_geom", "objGeom"),
        ("leftpad_geom", "rightclaw_it"),
        ("leftpad_geom", "rightpad_geom"),
        ("leftpad_geom", "tablelink[2]"),
        ("objGeom", "right_hand[0]"),
        ("objGeom", "rightclaw_it"),
        ("objGeom", "rightpad_geom"),
        ("objGeom", "tablelink[2]"),
        ("right_hand[0]", "tablelink[2]"),
        ("rightclaw_it", "tablelink[2]"),
        ("rightpad_geom", "tablelink[2]"),
    ),
    "button-press-topdown-v3": (
        ("button[2]", "buttonbox[3]"),
        ("button[2]", "buttonbox[4]"),
        ("button[2]", "buttonbox[5]"),
        ("button[2]", "buttonbox[6]"),
        ("button[3]", "buttonbox[3]"),
        ("button[3]", "buttonbox[4]"),
        ("button[3]", "buttonbox[5]"),
        ("button[3]", "buttonbox[6]"),
        ("button[4]", "buttonbox[3]"),
        ("button[4]", "buttonbox[4]"),
        ("button[4]", "buttonbox[5]"),
        ("button[4]", "buttonbox[6]"),
        ("button[4]", "leftclaw_it"),
        ("button[4]", "leftpad_geom"),
        ("button[4]", "right_hand[0]"),
        ("button[4]", "rightclaw_it"),
        ("button[4]", "rightpad_geom"),
        ("buttonbox[3]", "leftclaw_it"),
        ("buttonbox[3]", "leftpad_geom"),
        ("buttonbox[3]", "right_hand[0]"),
        ("buttonbox[3]", "rightclaw_it"),
        ("buttonbox[3]", "rightpad_geom"),
        ("buttonbox[4]", "leftclaw_it"),
        ("buttonbox[4]", "leftpad_geom"),
        ("buttonbox[4]", "right_hand[0]"),
        ("buttonbox[4]", "rightclaw_it"),
        ("buttonbox[4]", "rightpad_geom"),
        ("buttonbox[5]", "leftclaw_it"),
        ("buttonbox[5]", "leftpad_geom"),
        ("buttonbox[5]", "right_hand[0]"),
        ("buttonbox[5]", "rightclaw_it"),
        ("buttonbox[5]", "rightpad_geom"),
        ("leftclaw_it", "rightclaw_it"),
        ("leftclaw_it", "rightpad_geom"),
        ("leftclaw_it", "tablelink[2]"),
        ("leftpad_geom", "rightclaw_it"),
        ("leftpad_geom", "rightpad_geom"),
        ("leftpad_geom", "tablelink[2]"),
        ("right_hand[0]", "tablelink[2]"),
        ("rightclaw_it", "tablelink[2]"),
        ("rightpad_geom", "tablelink[2]"),
    ),
    "door-open-v3": (
        ("door_link[5]", "leftclaw_it"),
        ("door_link[5]", "leftpad_geom"),
        ("door_link[5]", "right_hand[0]"),
        ("door_link[5]", "rightclaw_it"),
        ("door_link[5]", "rightpad_geom"),
        ("door_link[6]", "leftclaw_it"),
        ("door_link[6]", "leftpad_geom"),
        ("door_link[6]", "right_hand[0]"),
        ("door_link[6]", "rightclaw_it"),
        ("door_link[6]", "rightpad_geom"),
        ("door_link[7]", "leftclaw_it"),
        ("door_link[7]", "leftpad_geom"),
        ("door_link[7]", "right_hand[0]"),
        ("door_link[7]", "rightclaw_it"),
        ("door_link[7]", "rightpad_geom"),
        ("door_link[8]", "leftclaw_it"),
        ("door_link[8]", "leftpad_geom"),
        ("door_link[8]", "right_hand[0]"),
        ("door_link[8]", "rightclaw_it"),
        ("door_link[8]", "rightpad_geom"),
        ("door_link[9]", "doorlockB[1]"),
        ("door_link[9]", "leftclaw_it"),
        ("door_link[9]", "leftpad_geom"),
        ("door_link[9]", "right_hand[0]"),
        ("door_link[9]", "rightclaw_it"),
        ("door_link[9]", "rightpad_geom"),
        ("doorlockB[1]", "leftclaw_it"),
        ("doorlockB[1]", "leftpad_geom"),
        ("doorlockB[1]", "right_hand[0]"),
        ("doorlockB[1]", "rightclaw_it"),
        ("doorlockB[1]", "rightpad_geom"),
        ("doorlockB[2]", "leftclaw_it"),
        ("doorlockB[2]", "leftpad_geom"),
        ("doorlockB[2]", "right_hand[0]"),
        ("doorlockB[2]", "rightclaw_it"),
        ("doorlockB[2]", "rightpad_geom"),
        ("doorlockB[3]", "leftclaw_it"),
        ("doorlockB[3]", "leftpad_geom"),
        ("doorlockB[3]", "right_hand[0]"),
        ("doorlockB[3]", "rightclaw_it"),
        ("doorlockB[3]", "rightpad_geom"),
        ("leftclaw_it", "rightclaw_it"),
        ("leftclaw_it", "rightpad_geom"),
        ("leftclaw_it", "tablelink[2]"),
        ("leftpad_geom", "rightclaw_it"),
        ("leftpad_geom", "rightpad_geom"),
        ("leftpad_geom", "tablelink[2]"),
        ("right_hand[0]", "tablelink[2]"),
        ("rightclaw_it", "tablelink[2]"),
        ("rightpad_geom", "tablelink[2]"),
    ),
}
"""Per task, the geom pairs (labels) that stay contact candidates; written by `measure`."""
# fmt: on
# The two tasks of one model file pool their measured episodes, so they keep the same pairs.
KEPT_PAIRS["window-open-v3"] = KEPT_PAIRS["window-close-v3"]
KEPT_PAIRS["drawer-close-v3"] = KEPT_PAIRS["drawer-open-v3"]


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


def load_model(task: str, *, stand_ins: bool = True, capsule_stand_ins: bool | None = None, prune_pairs: bool = True) -> mujoco.MjModel:
    """The task's model as Meta-World 3.0.0 runs it (weld fix applied), with MJX stand-ins for the
    cylinders (`stand_ins`) and the capsules (`capsule_stand_ins`, default: as `stand_ins`), and
    only the geom pairs that can touch as contact candidates (`prune_pairs`). Verifies the
    installed files against the manifest first."""
    rel = _check_task(task)
    root = asset_dir()
    verify_assets(root)
    path = os.path.join(root, rel)
    original = mujoco.MjModel.from_xml_path(path)
    cylinders = STAND_INS[rel] if stand_ins else ()
    capsules = CAPSULE_STAND_INS[rel] if (stand_ins if capsule_stand_ins is None else capsule_stand_ins) else ()
    if cylinders or capsules:
        spec = mujoco.MjSpec.from_file(path)
        _apply_stand_ins(spec, original, cylinders, STAND_IN_KINDS[rel], capsules)
        model = spec.compile()
    else:
        model = original
    fix_weld_eq_data(model)
    if prune_pairs:
        if task not in KEPT_PAIRS:
            raise ValueError(f"no measured contact pairs for {task}; run python -m envs.metaworld_model --measure")
        _prune(model, KEPT_PAIRS[task])
    return model


# -- MJX's contact candidates -----------------------------------------------------------------------
def candidate_pairs(model: mujoco.MjModel) -> list[tuple[int, int]]:
    """The geom pairs MJX would collide (its `geom_pairs`: contype/conaffinity, exclusions,
    self and parent-child filters, explicit pairs)."""
    from mujoco.mjx._src import collision_driver

    return [(int(a), int(b)) for a, b, _ in collision_driver.geom_pairs(model)]


def contact_candidates(model: mujoco.MjModel) -> int:
    """The number of contact slots MJX reserves for `model` (the leading size of
    `mjx.make_data(mjx.put_model(model)).contact`); no jit, no device transfer."""
    from mujoco.mjx._src import collision_driver

    return len(collision_driver.make_condim(model))


# -- measurement (C MuJoCo, Meta-World's own envs; `python -m envs.metaworld_model --measure`) ------
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

        from envs import metaworld_reference

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
"""Scripted episodes comparing the stand-ins with the original cylinders."""


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
    import json

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
        report["tasks"][task] = entry
        print(json.dumps({task: {k: entry[k] for k in ("pairs", "contact_slots", "pruning_check", "stand_in_fidelity")}}), flush=True)
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
    hand = obj = 0.0
    agree = steps = 0
    success = {"original": 0, "stand_ins": 0, "stand_ins_open_loop": 0}
    for seed in seeds:
        a = run_episode(task, seed, "scripted", model=copy.deepcopy(original))
        b = run_episode(task, seed, "scripted", model=copy.deepcopy(stand_in), actions=a["actions"])
        c = run_episode(task, seed, "scripted", model=copy.deepcopy(stand_in))
        hand = max(hand, float(np.linalg.norm(a["hand"] - b["hand"], axis=1).max()))
        obj = max(obj, float(np.linalg.norm(a["obj"] - b["obj"], axis=1).max()))
        agree += int((a["success"] == b["success"]).sum())
        steps += len(a["success"])
        success["original"] += bool(a["success"].any())
        success["stand_ins_open_loop"] += bool(b["success"].any())
        success["stand_ins"] += bool(c["success"].any())
    return {
        "episodes": len(seeds),
        "max_hand_deviation_m": hand,
        "max_object_deviation_m": obj,
        "success_step_agreement": agree / steps,
        "episodes_succeeded": success,
    }


if __name__ == "__main__":  # pragma: no cover
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--manifest", action="store_true", help="rewrite metaworld_assets.sha256")
    parser.add_argument("--measure", action="store_true", help="rerun the measurements")
    args = parser.parse_args()
    if args.manifest:
        write_manifest()
    if args.measure:
        KEPT_PAIRS.clear()  # chosen afresh; paste the JSON's kept_pairs into KEPT_PAIRS to adopt them
        measure(out_path=os.path.join(os.path.dirname(MANIFEST_FILE), "..", "docs", "metaworld_model.json"))
