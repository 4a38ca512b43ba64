"""Meta-World models for MJX (`envs.metaworld_model`): loading, hash pinning (the model files and the
kept contact pairs), stand-ins, pruning; episodes of the offline measurement (`envs.tools.metaworld_contacts`).

C MuJoCo only (plus `mjx.put_model`, which jits nothing)."""

from __future__ import annotations

import os
import shutil

import mujoco
import numpy as np
import pytest

pytest.importorskip("metaworld")

from mujoco import mjx

from envs import metaworld_model as mm
from envs.tools import metaworld_contacts as contacts

TASKS = sorted(mm.TASK_FILES)


@pytest.mark.parametrize("task", TASKS)
def test_every_task_loads_and_puts(task):
    model = mm.load_model(task)
    assert np.allclose(model.eq_data[:, : len(mm.WELD_EQ_DATA)], mm.WELD_EQ_DATA)
    mjx.put_model(model)
    assert 0 < mm.contact_candidates(model) < mm.contact_candidates(mm.load_model(task, prune_pairs=False))


def test_unknown_task():
    with pytest.raises(ValueError, match="drawer-open-v3"):
        mm.load_model("drawer-open-v2")


def test_manifest_covers_every_task_file():
    manifest = mm.read_manifest()
    assert set(mm.TASK_FILES.values()) <= set(manifest)
    assert all(len(digest) == 64 for digest in manifest.values())


def _copy_assets(tmp_path):
    root = mm.asset_dir()
    for rel in mm.read_manifest():
        os.makedirs(tmp_path / os.path.dirname(rel), exist_ok=True)
        shutil.copy(os.path.join(root, rel), tmp_path / rel)
    return str(tmp_path)


def test_hash_check_refuses_altered_file(tmp_path, monkeypatch):
    root = _copy_assets(tmp_path)
    monkeypatch.setattr(mm, "asset_dir", lambda: root)
    mm.load_model("reach-v3")  # the copy loads
    rel = "objects/assets/xyz_base.xml"
    with open(os.path.join(root, rel), "a", encoding="utf-8") as handle:
        handle.write("<!-- edited -->\n")
    with pytest.raises(RuntimeError, match=r"xyz_base.xml") as error:
        mm.load_model("reach-v3")
    assert mm.read_manifest()[rel] in str(error.value)
    assert "metaworld==3.0.0" in str(error.value)
    os.remove(os.path.join(root, rel))
    with pytest.raises(RuntimeError, match="found missing"):
        mm.load_model("reach-v3")


def test_kept_pairs_are_read_from_their_pinned_file_with_the_aliases():
    assert set(mm.KEPT_PAIRS) == set(mm.TASK_FILES)
    for alias, task in mm.KEPT_PAIRS_ALIASES.items():
        assert mm.TASK_FILES[alias] == mm.TASK_FILES[task] and mm.KEPT_PAIRS[alias] is mm.KEPT_PAIRS[task]
    for pairs in mm.KEPT_PAIRS.values():
        assert isinstance(pairs, tuple) and pairs and all(isinstance(pair, tuple) and len(pair) == 2 for pair in pairs)
        assert list(pairs) == sorted(set(pairs)) and all(first < second for first, second in pairs)  # as `choose_pairs` writes them
    assert len(mm.KEPT_PAIRS["window-close-v3"]) == 120 and len(mm.KEPT_PAIRS["reach-v3"]) == 20  # docs/metaworld_model.md


def test_the_kept_pairs_writer_reproduces_the_pinned_file(tmp_path):
    """`--measure --adopt` writes the file the loader pins: the same pairs give the same bytes, and
    it prints the hash the loader expects."""
    path = str(tmp_path / "kept.json")
    assert contacts.write_kept_pairs(mm.KEPT_PAIRS, path) == mm.KEPT_PAIRS_SHA256
    with open(path, "rb") as written, open(mm.KEPT_PAIRS_FILE, "rb") as pinned:
        assert written.read() == pinned.read()
    with pytest.raises(ValueError, match="window-open-v3"):
        contacts.write_kept_pairs({**mm.KEPT_PAIRS, "window-open-v3": mm.KEPT_PAIRS["reach-v3"]}, path)


def test_hash_check_refuses_altered_kept_pairs(tmp_path):
    path = str(tmp_path / "metaworld_kept_pairs.json")
    shutil.copy(mm.KEPT_PAIRS_FILE, path)
    assert mm.read_kept_pairs(path) == mm.KEPT_PAIRS  # the copy reads
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text.replace('["#34[2]", "leftclaw_it"],\n', "", 1))  # one pair dropped by hand
    with pytest.raises(RuntimeError, match=r"metaworld_kept_pairs\.json does not match its pinned sha256") as error:
        mm.read_kept_pairs(path)
    message = str(error.value)
    assert "\n" not in message and mm.KEPT_PAIRS_SHA256 in message and "KEPT_PAIRS_SHA256" in message
    os.remove(path)
    with pytest.raises(RuntimeError, match="found missing"):
        mm.read_kept_pairs(path)


def test_missing_package(monkeypatch):
    monkeypatch.setattr(mm.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install metaworld==3.0.0"):
        mm.asset_dir()


@pytest.mark.parametrize("task", ["door-open-v3", "window-open-v3", "drawer-open-v3"])
def test_stand_ins_change_only_collision_shapes(task):
    original = mm.load_model(task, stand_ins=False, prune_pairs=False)
    stand_in = mm.load_model(task, prune_pairs=False)
    assert stand_in.ngeom == original.ngeom and stand_in.nbody == original.nbody
    for name in ("body_mass", "body_inertia", "body_ipos", "body_iquat", "geom_pos", "geom_quat", "geom_friction"):
        np.testing.assert_array_equal(getattr(stand_in, name), getattr(original, name), err_msg=name)
    rel = mm.TASK_FILES[task]
    for label in mm.STAND_INS[rel]:
        geom = mm.geom_by_label(stand_in, label)
        assert original.geom_type[geom] == mujoco.mjtGeom.mjGEOM_CYLINDER
        assert stand_in.geom_type[geom] == mujoco.mjtGeom.mjGEOM_BOX
    for label in mm.CAPSULE_STAND_INS[rel]:  # the handle bars: a box around the capsule
        geom = mm.geom_by_label(stand_in, label)
        assert original.geom_type[geom] == mujoco.mjtGeom.mjGEOM_CAPSULE
        assert stand_in.geom_type[geom] == mujoco.mjtGeom.mjGEOM_BOX
        radius, half_length = original.geom_size[geom, :2]
        np.testing.assert_allclose(stand_in.geom_size[geom], [radius, radius, half_length + radius])
    for kind in (mujoco.mjtGeom.mjGEOM_CYLINDER, mujoco.mjtGeom.mjGEOM_CAPSULE):
        left = [g for g in range(stand_in.ngeom) if stand_in.geom_type[g] == kind]
        assert not any(stand_in.geom_contype[g] or stand_in.geom_conaffinity[g] for g in left), kind
    # capsule_stand_ins=False keeps Meta-World's capsules (MJX can collide them, though shallowly)
    capsules = mm.load_model(task, prune_pairs=False, capsule_stand_ins=False)
    for label in mm.CAPSULE_STAND_INS[rel]:
        assert capsules.geom_type[mm.geom_by_label(capsules, label)] == mujoco.mjtGeom.mjGEOM_CAPSULE
    mjx.put_model(capsules)


def _model_arrays(model):
    return {
        name: getattr(model, name)
        for name in dir(model)
        if not name.startswith("_") and isinstance(getattr(model, name, None), np.ndarray)
    }


def test_pruning_edits_only_the_pair_filter():
    full, pruned = (mm.load_model("window-close-v3", prune_pairs=p) for p in (False, True))
    a, b = _model_arrays(full), _model_arrays(pruned)
    changed = {name for name in a if a[name].shape != b[name].shape or not np.array_equal(a[name], b[name], equal_nan=True)}
    assert changed == {"geom_contype", "geom_conaffinity"}


@pytest.mark.parametrize("task", TASKS)
def test_pruned_pairs_keep_every_contact_of_a_scripted_episode(task):
    pruned = mm.load_model(task)
    kept = {tuple(sorted(p)) for p in mm.candidate_pairs(pruned)}
    assert len(kept) < len(mm.candidate_pairs(mm.load_model(task, prune_pairs=False)))
    episode = contacts.run_episode(task, seed=123, kind="noisy0.3", model=mm.load_model(task, prune_pairs=False), steps=150)
    assert episode["touched"] <= kept
    replay = contacts.run_episode(task, seed=123, kind="noisy0.3", model=pruned, actions=episode["actions"], steps=150)
    np.testing.assert_allclose(replay["qpos"], episode["qpos"], atol=1e-4)  # measured <= 2.6e-5


STAND_IN_HAND_BOUND_M = 0.02
STAND_IN_OBJECT_BOUND_M = 0.03
"""Bounds on the hand and object deviation of the stand-in model from the original, replaying the
original's actions of the 200-step scripted episode below (measured: button 0.0102 / 0.0053 m,
door 0.0081 / 0.0144 m; success agreement per step 1.0 and 0.945)."""


@pytest.mark.parametrize("task", ["button-press-topdown-v3", "door-open-v3"])
def test_stand_in_fidelity_on_a_scripted_episode(task):
    original = contacts.run_episode(task, 5, "scripted", model=mm.load_model(task, stand_ins=False, prune_pairs=False), steps=200)
    stand_in = contacts.run_episode(task, 5, "scripted", model=mm.load_model(task), actions=original["actions"], steps=200)
    assert np.linalg.norm(original["hand"] - stand_in["hand"], axis=1).max() < STAND_IN_HAND_BOUND_M
    assert np.linalg.norm(original["obj"] - stand_in["obj"], axis=1).max() < STAND_IN_OBJECT_BOUND_M
    assert (original["success"] == stand_in["success"]).mean() >= 0.9


HULL_ARRAYS = {
    "mesh_extrema", "mesh_graph", "mesh_graphadr", "mesh_polyadr", "mesh_polymap", "mesh_polymapadr", "mesh_polymapnum",
    "mesh_polynormal", "mesh_polynum", "mesh_polyvert", "mesh_polyvertadr", "mesh_polyvertnum",
}  # fmt: skip


def test_gripper_hull_cap_changes_only_the_hull():
    """The cap leaves every model array but the hull's alone (visual mesh, inertia, poses); the
    capped hull is 64 of the full hull's 883 vertices, and no vertex of the full hull lies more
    than 1.6 mm outside it (measured 1.52 mm)."""
    full = mm.load_model("window-close-v3", gripper_hull_vertices=None)
    capped = mm.load_model("window-close-v3")
    a, b = _model_arrays(full), _model_arrays(capped)
    changed = {name for name in a if a[name].shape != b[name].shape or not np.array_equal(a[name], b[name], equal_nan=True)}
    assert changed == HULL_ARRAYS
    mesh = mujoco.mj_name2id(full, mujoco.mjtObj.mjOBJ_MESH, mm.GRIPPER_MESH)
    outer, inner = contacts.hull(full, mesh)[0], contacts.hull(capped, mesh)[0]
    assert (len(outer), len(inner)) == (883, mm.GRIPPER_HULL_VERTICES)
    vertices = full.mesh_vert[full.mesh_vertadr[mesh] : full.mesh_vertadr[mesh] + full.mesh_vertnum[mesh]]
    assert {tuple(v) for v in inner} <= {tuple(v) for v in vertices}  # the mesh's own points, so the capped hull is inside
    assert 0.001 < contacts.hull_gap_m(full, capped, mesh) < 0.0016
    assert contacts.hull_gap_m(full, full, mesh) == pytest.approx(0.0, abs=1e-12)
    assert contacts.hull_gap_m(capped, full, mesh) == pytest.approx(0.0, abs=1e-12)
    geom = mm.geom_by_label(capped, "right_hand[0]")
    assert capped.geom_dataid[geom] == mesh and capped.geom_contype[geom] and capped.geom_conaffinity[geom]
    with pytest.raises(ValueError, match=r"gripper_hull_vertices must be None \(the file's full hull\) or >= 4, got 3"):
        mm.load_model("reach-v3", gripper_hull_vertices=3)


HULL_HAND_BOUND_M = HULL_OBJECT_BOUND_M = 0.005
"""Bounds on the hand and object deviation of the capped-hull model from the full hull's, replaying
the full hull's actions of the 200-step scripted episode below (both pruned, with stand-ins;
measured: drawer 1.7 / 1.4 mm, door 1.2 / 0.7 mm; success agreement per step 1.0 and 0.995)."""


@pytest.mark.parametrize("task", ["drawer-open-v3", "door-open-v3"])
def test_capped_hull_fidelity_on_a_scripted_episode(task):
    full = contacts.run_episode(task, 5, "scripted", model=mm.load_model(task, gripper_hull_vertices=None), steps=200)
    capped = contacts.run_episode(task, 5, "scripted", model=mm.load_model(task), actions=full["actions"], steps=200)
    assert np.linalg.norm(full["hand"] - capped["hand"], axis=1).max() < HULL_HAND_BOUND_M
    assert np.linalg.norm(full["obj"] - capped["obj"], axis=1).max() < HULL_OBJECT_BOUND_M
    assert full["success"].any() and (full["success"] == capped["success"]).mean() >= 0.99
