"""`train.py video` and `train.py report --frames` (mjx_pbac/video.py, mjx_pbac/render.py): a
member's evaluation episodes filmed, for an MJX locomotion robot, a DM Control task and a
Meta-World task, decoded back to check their frame counts and sizes; the camera and backend
choices; every bad input a one-line error; and a training run that loads no renderer.

The films are of untrained policies (a run directory written as a run writes it, with its step-0
checkpoint): the rollout and the drawing are what is tested, and a trained checkpoint would cost
each env its training programs' compiles. The episodes are short (`episode_length`) and the
solver does one trip, so each env compiles one small rollout program."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import imageio.v2 as imageio
import jax
import mujoco
import numpy as np
import pytest
from PIL import Image

import envs
import train as cli
from mjx_pbac import checkpoint, rundir, runner, video
from mjx_pbac.config import load_profile_file
from mjx_pbac.records import Clocks
from mjx_pbac.resume import metadata

EPISODE_LENGTH = 6
SMALL_PHYSICS = ("iterations=1", "ls_iterations=1")


def untrained_run(run_dir: Path, env: str, seeds: int = 2) -> Path:
    """A run directory as a run writes it (config.json, then its step-0 checkpoint) for `env`,
    at tiny sizes, with episodes of EPISODE_LENGTH steps."""
    profile = run_dir.parent / f"{run_dir.name}.toml"
    overrides = ", ".join(f'"{item}"' for item in (f"episode_length={EPISODE_LENGTH}", *SMALL_PHYSICS))
    profile.write_text(
        f'description = "video test"\n[train]\nenv = "{env}"\nnum_seeds = {seeds}\nenv_overrides = [{overrides}]\n'
        "total_steps = 64\nnum_envs = 2\nbatch_size = 8\nbuffer_size = 64\nwarmup_steps = 16\nchunk_steps = 16\n"
        "eval_interval = 32\neval_episodes = 1\ncheckpoint_interval = 32\n"
        "[pbac]\nnum_critics = 2\nhidden_sizes = [8, 8]\n"
    )
    config = load_profile_file(profile)
    built = runner._build(config)
    run_dir.mkdir(parents=True)
    rundir.write_json(run_dir / rundir.CONFIG, runner._config_record(config, "video_test", built, {}))
    state = built.layout.gather(built.init_state())
    record = metadata(config, built.trainer.schedule, 0, False, Clocks(), {})
    checkpoint.save(run_dir / rundir.CHECKPOINTS, state, env_steps=0, metadata=record)
    return run_dir


@pytest.fixture(scope="session")
def hopper_run(tmp_path_factory) -> Path:
    return untrained_run(tmp_path_factory.mktemp("video") / "hopper", "hopper")


def _video(argv: list[str], capfd) -> tuple[int, str]:
    """`train.py video ARGV`: exit code and everything printed (the drawing child's lines too)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = cli.run(["video", *argv])
    captured = capfd.readouterr()
    return code, out.getvalue() + captured.out + captured.err


def _episodes(text: str) -> list[int]:
    """The episode lengths the command printed."""
    return [int(n) for _, n in _returns(text)]


def _returns(text: str) -> list[tuple[float, int]]:
    """(return, length) of each episode the command printed."""
    return [(float(r), int(n)) for r, n in re.findall(r"episode \d+: return ([-\d.]+), (\d+) steps", text)]


def _mp4(path: Path) -> list[np.ndarray]:
    with warnings.catch_warnings(), imageio.get_reader(path) as reader:
        warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)  # imageio starts ffmpeg
        return list(iter(reader))  # its len() is "unknown" (sys.maxsize), which list() would allocate


def _moving(frames: list[np.ndarray]) -> None:
    """Pictures of a scene (not blank), and not all the same picture."""
    assert all(frame.std() > 5 for frame in frames)
    assert max(np.abs(frame.astype(int) - frames[0].astype(int)).mean() for frame in frames) > 0.5


@pytest.mark.slow
@pytest.mark.heavy
def test_a_locomotion_film_has_a_frame_per_step_at_the_size_asked(hopper_run, tmp_path, capfd):
    out = tmp_path / "hopper.mp4"
    code, text = _video([str(hopper_run), "--member", "1", "--out", str(out), "--width", "64", "--height", "48", "--fps", "125"], capfd)
    assert code == 0, text
    (length,) = _episodes(text)
    assert 1 <= length <= EPISODE_LENGTH  # an untrained hopper may fall before the limit
    frames = _mp4(out)
    assert len(frames) == length + 1 and frames[0].shape == (48, 64, 3)  # the reset, then each step
    _moving(frames)
    assert "rendering with MUJOCO_GL=" in text and f"wrote {out} ({length + 1} frames, 64x48, 125 fps, camera track)" in text
    # The film's episode is the evaluation's: `train.py evaluate` with one episode, member 1.
    code, _, err = _evaluate([str(hopper_run), "--episodes", "1", "--member", "1", "--out", str(tmp_path / "e.json")])
    assert code == 0, err
    (row,) = json.loads((tmp_path / "e.json").read_text())["members"]
    ((value, _),) = _returns(text)
    assert row["lengths"] == [length] and value == pytest.approx(row["returns"][0], abs=0.006)


def _evaluate(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.run(["evaluate", *argv])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.slow
@pytest.mark.heavy
def test_a_dm_control_film_as_a_gif_holds_every_episode(tmp_path, capfd):
    """Two reacher episodes in one GIF: every step of each (a DM Control task never ends early),
    each from its reset."""
    run_dir = untrained_run(tmp_path / "reacher", "reacher_hard", seeds=1)
    out = tmp_path / "reacher.gif"
    code, text = _video([str(run_dir), "--episodes", "2", "--out", str(out), "--width", "48", "--height", "40", "--fps", "50"], capfd)
    assert code == 0, text
    assert _episodes(text) == [EPISODE_LENGTH, EPISODE_LENGTH]
    pictures = 2 * (EPISODE_LENGTH + 1)
    with Image.open(out) as gif:
        assert gif.size == (48, 40)
        # Pillow merges a picture identical to the one before into its delay: count the time.
        durations = []
        for index in range(gif.n_frames):
            gif.seek(index)
            durations.append(gif.info["duration"])
    assert sum(durations) == pictures * 20 and gif.n_frames <= pictures
    assert f"({pictures} frames, 48x40, 50 fps, camera fixed)" in text


@pytest.mark.slow
@pytest.mark.heavy
def test_a_meta_world_film_shows_the_arm_from_the_corner(tmp_path, capfd):
    run_dir = untrained_run(tmp_path / "reach", "mw_reach", seeds=1)
    out = tmp_path / "reach.mp4"
    code, text = _video([str(run_dir), "--out", str(out), "--width", "64", "--height", "64", "--fps", "80"], capfd)
    assert code == 0, text
    assert _episodes(text) == [EPISODE_LENGTH]
    frames = _mp4(out)
    assert len(frames) == EPISODE_LENGTH + 1 and frames[0].shape == (64, 64, 3)
    _moving(frames)
    assert "camera corner" in text


@pytest.mark.slow
@pytest.mark.heavy
def test_report_frames_adds_a_strip_per_task_beside_the_curves(hopper_run, tmp_path, capfd):
    # A report needs evaluations: the untrained run's, as a run logs them.
    run_dir = tmp_path / "logged"
    shutil.copytree(hopper_run, run_dir)
    rows = [{"member": m, "seed": m, "label": "pbac", "env_steps": 0, "return_mean": 1.0, "returns": [1.0], "lengths": [6]} for m in (0, 1)]
    (run_dir / rundir.EVAL).write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "report"
    code = cli.run(["report", str(run_dir), "--out", str(out), "--frames", "True"])
    captured = capfd.readouterr()
    assert code == 0, captured.err
    strip = out / "frames_hopper.png"
    with Image.open(strip) as image:
        width, height = image.size
    assert height == 180 and width % 240 == 0 and 2 <= width // 240 <= 6
    assert "![frames_hopper.png](frames_hopper.png)" in (out / "results.md").read_text()


def test_bad_input_is_one_line_each(hopper_run, tmp_path, capfd):
    # A camera is checked from the run's config before its checkpoint is looked for
    unread = shutil.copytree(hopper_run, tmp_path / "unread", ignore=shutil.ignore_patterns(rundir.CHECKPOINTS))
    cases = [
        ([str(unread), "--camera", "top"], r"unknown camera 'top'; this model's cameras: track, free"),
        ([str(tmp_path / "missing")], "no run directory .*missing"),
        ([str(hopper_run), "--member", "5"], r"--member 5 is out of range: .* has 2 member\(s\), 0..1"),
        ([str(hopper_run), "--camera", "top"], r"unknown camera 'top'; this model's cameras: track, free"),
        ([str(hopper_run), "--out", str(tmp_path / "a.avi")], r"give a file ending in \.mp4 or \.gif"),
        ([str(hopper_run), "--out", str(tmp_path / "a.mp4"), "--width", "65"], "an MP4's sides must be even"),
        ([str(hopper_run), "--episodes", "0"], "--episodes must be >= 1"),
        ([str(hopper_run), "--width", "8"], "--width must be in 16..4096"),
        ([str(hopper_run), "--fps", "0"], "--fps must be > 0"),
        ([str(hopper_run), "--checkpoint", "999"], r"no checkpoint .*step_000000999\.npz; the checkpoints of .*: step_000000000\.npz"),
        ([str(hopper_run), "--set", "no_such_field=1"], "unknown override"),
    ]
    for argv, expected in cases:
        code, text = _video(argv, capfd)
        lines = [line for line in text.strip().splitlines() if line.startswith("error")]
        assert code == 2 and len(lines) == 1 and re.search(expected, lines[0]), (argv, text)
    assert not (hopper_run / rundir.VIDEOS).exists()  # nothing was written


def test_each_env_has_its_camera_and_a_camera_is_checked():
    hopper, reacher, reach = envs.make("hopper"), envs.make("reacher_hard"), envs.make("mw_reach")
    assert (video.camera_for(hopper, None), video.camera_for(reacher, None), video.camera_for(reach, None)) == ("track", "fixed", "corner")
    assert video.camera_for(reach, "topview") == "topview" and video.camera_for(hopper, "free") == "free"
    with pytest.raises(video.RenderError, match=r"unknown camera 'track'; this model's cameras: fixed, hand, free"):
        video.camera_for(reacher, "track")
    # Real time at the frame rate asked: every n-th step of a hopper (8 ms a step) at 30 and 125 fps.
    assert (video.every_for(hopper.dt, 30.0), video.every_for(hopper.dt, 125.0), video.every_for(hopper.dt, 1000.0)) == (4, 1, 1)


def test_a_picture_carries_what_an_episode_keeps_in_the_model():
    """reacher's target (DM Control moves the target geom) and the window-close layout (Meta-World
    moves the window body and the goal marker) are in the fields a picture is posed from."""
    reacher = envs.make("reacher_hard")
    state = jax.jit(reacher.reset)(jax.random.key(3))
    fields = jax.jit(reacher.render_fields)(state)
    target = reacher.mj_model.geom("target").id
    np.testing.assert_array_equal(np.asarray(fields["model.geom_pos"])[target, :2], np.asarray(state.info["target"]))
    assert np.asarray(fields["model.geom_size"])[target, 0] == pytest.approx(0.015)  # hard's target, not the file's 0.05
    np.testing.assert_array_equal(np.asarray(fields["qpos"]), np.asarray(state.pipeline_state.qpos))
    window = envs.make("mw_window_close", iterations=1, ls_iterations=1)
    state = jax.jit(window.reset)(jax.random.key(3))
    fields = jax.jit(window.render_fields)(state)
    model = window.mj_model
    np.testing.assert_array_equal(np.asarray(fields["model.body_pos"])[model.body("window").id], np.asarray(state.info["body_pos"]))
    np.testing.assert_array_equal(np.asarray(fields["model.site_pos"])[model.site("goal").id], np.asarray(state.info["target"]))
    assert np.asarray(state.info["body_pos"])[1] != model.body_pos[model.body("window").id][1]  # it did move


def test_a_camera_set_upside_down_is_turned_over():
    """Meta-World's corner cameras look at the table upside down (made for a renderer whose
    pictures came out flipped): their pictures are turned 180 degrees; the top view's are not."""
    from mjx_pbac import render

    model = envs.make("mw_reach").mj_model
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    pixels = np.arange(2 * 3 * 3).reshape(2, 3, 3)
    np.testing.assert_array_equal(render._upright(pixels, data, model.camera("corner").id), pixels[::-1, ::-1])
    assert render._upright(pixels, data, model.camera("topview").id) is pixels
    assert render._upright(pixels, data, None) is pixels  # the free camera is always upright


def test_a_chain_run_has_nothing_to_film():
    with pytest.raises(video.RenderError, match=r"chain is not a MuJoCo env \(ContinuousChain\): there is nothing to render"):
        video.mjx_env(envs.make("chain"), "chain")


def test_without_a_working_backend_the_error_names_what_to_set(tmp_path, monkeypatch):
    """MUJOCO_GL set to what this machine cannot do: that backend alone is tried (the user's
    choice), and the one-line error says what failed and which variables choose another."""
    hopper = envs.make("hopper")
    fields = {"qpos": hopper.mj_model.qpos0[None], "mocap_pos": np.zeros((1, 0, 3)), "mocap_quat": np.zeros((1, 0, 4))}
    monkeypatch.setenv("MUJOCO_GL", "wgl")  # Windows' backend: an invalid value on Linux
    monkeypatch.setattr(video, "_working", [])
    with pytest.raises(video.RenderError) as raised:
        video.draw(hopper, fields, tmp_path / "x.gif", 32, 32, "track")
    message = str(raised.value)
    assert "\n" not in message and message.startswith("no OpenGL backend works here (MUJOCO_GL=wgl (as set): RuntimeError: invalid value")
    assert "set MUJOCO_GL to a backend that works here (egl, osmesa or glfw" in message and "LIBGL_ALWAYS_SOFTWARE=1" in message
    assert not (tmp_path / "x.gif").exists()


def test_the_drawn_pose_is_the_recorded_one(tmp_path):
    """Three pictures of the hopper from MuJoCo's free camera, the third with its torso 0.5 m
    lower: the same pose twice draws the same picture (a PNG strip keeps them exactly), the
    lowered one another."""
    hopper = envs.make("hopper")
    qpos = np.repeat(hopper.mj_model.qpos0[None], 3, axis=0)
    qpos[2, 1] -= 0.5
    fields = {"qpos": qpos, "mocap_pos": np.zeros((3, 0, 3)), "mocap_quat": np.zeros((3, 0, 4))}
    video.draw(hopper, fields, tmp_path / "strip.png", 32, 24, "free")
    with Image.open(tmp_path / "strip.png") as image:
        pixels = np.asarray(image.convert("RGB"))
    first, second, third = pixels[:, :32], pixels[:, 32:64], pixels[:, 64:]
    assert pixels.shape == (24, 96, 3) and np.array_equal(first, second) and not np.array_equal(first, third)


def test_training_loads_no_renderer(tmp_path):
    """`train.py --profile ...` imports none of the picture code (nor OpenGL, the video writers or
    the progress bar): rendering costs training nothing. (Pillow is loaded by MJX's trimesh; MuJoCo
    imports its GLFW module itself, which makes no context.)"""
    script = (
        "import sys, train\n"
        f"train.main(['--profile', 'chain', '--train.total-steps', '2000', '--train.eval-interval', '1000', "
        f"'--train.run-dir', {str(tmp_path / 'run')!r}, '--train.progress', 'False', '--train.tensorboard', 'False'])\n"
        "loaded = sorted(m for m in ('mjx_pbac.video', 'mjx_pbac.render', 'OpenGL', 'imageio', 'imageio_ffmpeg', 'tqdm') if m in sys.modules)\n"
        "print('loaded:', loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "loaded: []" in done.stdout, done.stdout
