"""The Meta-World reference recorder (envs/tools/metaworld_reference.py), C MuJoCo only (no JAX work):
records are complete (a fresh env put into recorded state i and stepped with the recorded action
reproduces the recorded next state bit for bit), the eq_data weld patch is needed and sufficient
under mujoco >= 3.4-ish (12 eq_data columns), record files carry their metadata, and the module runs
alone, as benchmarks/metaworld_reference_mujoco33.sh runs it under MuJoCo 3.3."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

metaworld = pytest.importorskip("metaworld")

from envs.tools import metaworld_reference as R  # noqa: E402

POLICIES = ["scripted", "noisy", "random"]


@pytest.fixture(scope="module")
def drawer_record():
    return R.record("drawer-open-v3", 3, POLICIES, seed=3, steps_per_episode=40)


@pytest.mark.parametrize("task", ["drawer-open-v3", "window-close-v3", "button-press-topdown-v3", "door-open-v3"])
def test_replay_step_reproduces_record_exactly(task, drawer_record):
    rec = drawer_record if task == "drawer-open-v3" else R.record(task, 3, POLICIES, seed=1, steps_per_episode=25)
    assert list(rec["ep_policy"]) == POLICIES
    env = R.make_reference_env(task, seed=12345)  # another seed and never reset: all state comes from rec
    n = len(rec["action"])
    for i in range(n):
        assert R.replay_mismatches(env, rec, i) == [], (task, i)
    # out of order, back into an earlier episode (model edits must be restored too)
    for i in (n - 1, 0, n // 2, 1):
        assert R.replay_mismatches(env, rec, i) == [], (task, i)


def test_record_layout_and_semantics(drawer_record):
    rec = drawer_record
    n, e = 120, 3
    assert rec["obs"].shape == rec["next_obs"].shape == (n, 39)
    assert rec["prev_obs"].shape == (n, 18)
    assert rec["action"].shape == (n, 4) and rec["action"].dtype == np.float32
    assert rec["qpos"].shape == rec["next_qpos"].shape == (n, 10)
    assert rec["mocap_pos"].shape == (n, 1, 3)
    assert rec["ep_body_pos"].shape[0] == e and rec["ep_body_pos"].shape[2] == 3
    assert rec["reset_obs"].shape == (e, 39)
    np.testing.assert_array_equal(rec["t"], np.tile(np.arange(40), e))
    # hidden goal
    assert not rec["obs"][:, 36:].any() and not rec["next_obs"][:, 36:].any()
    # obs is the frame stack: next_obs[18:36] is obs[:18] of the same step
    np.testing.assert_array_equal(rec["next_obs"][:, 18:36], rec["obs"][:, :18])
    np.testing.assert_array_equal(rec["prev_obs"], rec["obs"][:, :18])
    # the observation fed to step t+1 is step t's next_obs
    same_ep = rec["episode"][1:] == rec["episode"][:-1]
    np.testing.assert_array_equal(rec["obs"][1:][same_ep], rec["next_obs"][:-1][same_ep])
    # a random goal per episode, and the drawer body moved in the *model*
    assert len({tuple(v) for v in rec["ep_rand_vec"]}) == e
    drawer = np.argmax(np.abs(rec["ep_body_pos"][0] - rec["ep_body_pos"][1]).sum(1))
    np.testing.assert_array_equal(rec["ep_body_pos"][:, drawer], rec["ep_rand_vec"])
    assert set(np.unique(rec["success"])) <= {0.0, 1.0}
    np.testing.assert_array_equal(rec["ep_success_final"], rec["success"].reshape(e, -1)[:, -1] > 0)
    np.testing.assert_array_equal(rec["ep_success_any"], rec["success"].reshape(e, -1).max(1) > 0)


def test_same_seed_same_record():
    a = R.record("reach-v3", 2, ["noisy", "random"], seed=7, steps_per_episode=10)
    b = R.record("reach-v3", 2, ["noisy", "random"], seed=7, steps_per_episode=10)
    for k in ("action", "next_obs", "ep_rand_vec", "reset_qpos"):
        np.testing.assert_array_equal(a[k], b[k])


def test_eq_data_patch_needed_and_sufficient():
    import mujoco

    if not R.eq_patch_needed():
        pytest.skip(f"mujoco {mujoco.__version__} has 11 eq_data columns: no patch needed")
    with pytest.raises(ValueError, match="broadcast"):
        R.make_reference_env("drawer-open-v3", 0, patch=False)
    env = R.make_reference_env("drawer-open-v3", 0)  # patch=None: auto
    assert env._reference_eq_patch
    weld = env.model.eq_type == mujoco.mjtEq.mjEQ_WELD
    assert weld.any()
    np.testing.assert_array_equal(env.model.eq_data[weld][:, :11], np.tile(R._WELD_DATA, (weld.sum(), 1)))
    # sufficient: the patched env runs and replays exactly (also test_replay_step_...)
    rec = R.record("drawer-open-v3", 1, "scripted", seed=0, steps_per_episode=5)
    assert all(R.replay_mismatches(env, rec, i) == [] for i in range(5))


def test_metadata_and_npz_roundtrip(tmp_path, drawer_record):
    import mujoco

    path = tmp_path / "rec.npz"
    R._save_npz(str(path), drawer_record)
    rec = R.load(str(path))  # allow_pickle=False: no object arrays
    meta = R.metadata(rec)
    assert meta["mujoco_version"] == str(rec["meta_mujoco_version"]) == mujoco.__version__
    assert meta["metaworld_version"] == "3.0.0"
    assert meta["task"] == str(rec["meta_task"]) == "drawer-open-v3"
    assert meta["policy"] == "list" and meta["episode_policies"] == POLICIES
    assert meta["seed"] == int(rec["meta_seed"]) == 3
    assert meta["eq_patch"] == R.eq_patch_needed()
    env = R.make_reference_env("drawer-open-v3", seed=0)
    for i in (0, 55, 119):
        assert R.replay_mismatches(env, rec, i) == []


def test_resets_and_wilson():
    res = R.record_resets("window-open-v3", 3, seed=0)
    assert res["reset_obs"].shape == (3, 39) and res["ep_body_pos"].shape[0] == 3
    assert R.metadata(res)["kind"] == "resets"
    lo, hi = R.wilson(50, 100)
    assert lo < 0.5 < hi and abs((lo + hi) / 2 - 0.5) < 1e-12
    assert R.wilson(100, 100)[1] == 1.0


def test_it_runs_alone_as_the_mujoco33_script_runs_it(tmp_path):
    """The script copies the file it names into an empty folder and runs `python -m metaworld_reference`
    there (no `envs` package, no jax); the same here, with this venv's interpreter."""
    root = Path(__file__).resolve().parent.parent
    script = (root / "benchmarks" / "metaworld_reference_mujoco33.sh").read_text()
    copied = re.search(r'^cp "\$REPO/(\S+)" "\$SRC/metaworld_reference\.py"$', script, re.MULTILINE)
    assert copied and (root / copied.group(1)) == Path(R.__file__).resolve()
    shutil.copy(root / copied.group(1), tmp_path / "metaworld_reference.py")
    code = "import sys, metaworld_reference; sys.exit(('envs' in sys.modules or 'jax' in sys.modules) or metaworld_reference.main(['speed', '--help']))"
    environment = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0 and "usage: python -m envs.tools.metaworld_reference speed" in done.stdout, done.stderr[-2000:]
