"""Pictures of a trained policy: `train.py video` and `train.py report --frames`.

A member's episodes are rolled out on the device in the run's own evaluation program, recording
what each step shows (`Trainer.record`: the evaluation's episodes, keys and deterministic rule,
with the env's `render_fields`). The recorded states come to the host once, and a child process
(mjx_pbac/render.py) draws them with MuJoCo's renderer and writes the file, with the first
OpenGL backend that gives a context on this machine:

1. MUJOCO_GL as set, alone, when it is set (the user's choice);
2. else EGL (a GPU's driver, or Mesa), then Mesa's software EGL (llvmpipe: LIBGL_ALWAYS_SOFTWARE,
   glvnd pointed at Mesa), then OSMesa, then GLFW where there is a display.

Nothing here is imported by training: rendering costs a training run nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from mjx_pbac.rundir import RunError

KINDS = {".mp4": "mp4", ".gif": "gif", ".png": "png"}
"""Output file suffix -> what render.py writes: an MP4 (imageio-ffmpeg), a GIF or a PNG strip (Pillow)."""

MESA_EGL_VENDOR = ("/usr/share/glvnd/egl_vendor.d/50_mesa.json", "/etc/glvnd/egl_vendor.d/50_mesa.json")
"""Where glvnd finds Mesa's EGL: pointing __EGL_VENDOR_LIBRARY_FILENAMES at it skips a GPU vendor's EGL."""

GL_HELP = (
    "set MUJOCO_GL to a backend that works here (egl, osmesa or glfw; PYOPENGL_PLATFORM to match, "
    "LIBGL_ALWAYS_SOFTWARE=1 for Mesa's software renderer) after installing its library (libEGL with "
    "Mesa or a GPU driver, or libOSMesa)"
)


class RenderError(RunError):
    """Rendering failed (no OpenGL backend, a bad camera, no writer for the format): one line."""


@dataclasses.dataclass(frozen=True)
class Recording:
    """A member's recorded episodes, on the host."""

    env: Any
    """The member's env (an `envs.base.MjxEnv`): its C model is what is drawn."""
    fields: dict[str, np.ndarray]
    """`render_fields` of every picture, episode after episode (each from its reset to its last
    step): leaves [pictures, ...]."""
    episode_starts: list[int]
    """Index in `fields` of each episode's first picture."""
    returns: np.ndarray
    lengths: np.ndarray
    dt: float
    """Simulated seconds between two pictures."""


def mjx_env(env: Any, name: str) -> Any:
    """`env` unwrapped if it is an MJX env with a MuJoCo model to draw, else a RenderError."""
    from envs.base import MjxEnv

    inner = getattr(env, "unwrapped", env)
    if not isinstance(inner, MjxEnv):
        raise RenderError(f"{name} is not a MuJoCo env ({type(inner).__name__}): there is nothing to render")
    return inner


def record(restored: Any, member: int) -> Recording:
    """Member `member`'s evaluation episodes of a restored run (`policy.restore`, with the episode
    count wanted), recorded: all members run, as in evaluation, and `member`'s are kept."""
    env = mjx_env(restored.member_env(member), restored.members[member].task)
    result = restored.parts.trainer.record(restored.policy)
    returns = np.asarray(result["returns"])[member]
    lengths = np.asarray(result["lengths"])[member]
    frames = {name: np.asarray(value)[member] for name, value in result["frames"].items()}  # [T + 1, E, ...]
    fields = {  # each episode's reset, then each of its steps until it ended
        name: np.concatenate([value[: length + 1, episode] for episode, length in enumerate(lengths.tolist())])
        for name, value in frames.items()
    }
    starts = np.cumsum([0] + [int(length) + 1 for length in lengths[:-1]]).tolist()
    return Recording(env, fields, starts, returns, lengths, env.dt)


def camera_for(env: Any, camera: str | None) -> str:
    """The camera `camera` names (a camera of the env's model, or "free"), checked; None: the
    env's own (`MjxEnv.render_camera`), else the model's first camera, else "free"."""
    model = env.mj_model
    names = [model.camera(i).name for i in range(model.ncam) if model.camera(i).name]
    if camera is None:
        if env.render_camera in names:
            return env.render_camera
        return names[0] if names else "free"
    if camera != "free" and camera not in names:
        raise RenderError(f"unknown camera {camera!r}; this model's cameras: {', '.join(names + ['free'])}")
    return camera


def run_camera(run_dir: str | Path, camera: str) -> str:
    """`camera` checked against the model of `run_dir`'s env from its config.json alone, before
    any checkpoint is read or program built (a RunError names the run's cameras)."""
    from mjx_pbac import build, rundir

    config, _ = rundir.load_run_config(Path(run_dir))
    try:
        env, _ = build.make_env(config.train)
    except (ValueError, TypeError, RuntimeError) as error:
        raise RunError(str(error)) from None
    return camera_for(mjx_env(env, config.train.task_names[0]), camera)


def every_for(dt: float, fps: float) -> int:
    """Keep every n-th picture so that `fps` pictures a second show the episode in real time."""
    return max(1, round(1.0 / (dt * fps)))


def gl_backends() -> list[tuple[str, dict[str, str]]]:
    """(description, environment) of the OpenGL backends to try, in order (module docstring)."""
    chosen = os.environ.get("MUJOCO_GL", "").strip()
    if chosen:
        return [(f"MUJOCO_GL={chosen} (as set)", {})]
    software = {"MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl", "LIBGL_ALWAYS_SOFTWARE": "1"}
    mesa = next((path for path in MESA_EGL_VENDOR if os.path.isfile(path)), None)
    if mesa:
        software["__EGL_VENDOR_LIBRARY_FILENAMES"] = mesa
    backends = [
        ("MUJOCO_GL=egl", {"MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl"}),
        ("MUJOCO_GL=egl, Mesa's software renderer", software),
        ("MUJOCO_GL=osmesa", {"MUJOCO_GL": "osmesa", "PYOPENGL_PLATFORM": "osmesa"}),
    ]
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        backends.append(("MUJOCO_GL=glfw", {"MUJOCO_GL": "glfw"}))
    return backends


_working: list[tuple[str, dict[str, str]]] = []
"""The backend found by `gl_backend`, kept for the process (report --frames draws several times)."""


def _child(job: dict, scratch: Path, variables: dict[str, str], quiet: bool) -> subprocess.CompletedProcess:
    """render.py run on `job` with the environment `variables` added: its output captured if
    `quiet`, else shown as it comes (its backend line, its progress bar)."""
    job_path = scratch / f"job_{len(list(scratch.glob('job_*')))}.json"
    job_path.write_text(json.dumps(job))
    environment = {**os.environ, **variables}
    package_root = str(Path(__file__).resolve().parent.parent)
    environment["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    with warnings.catch_warnings():
        # JAX warns at every fork of its multithreaded process; this one execs at once, sharing nothing.
        warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
        return subprocess.run(
            [sys.executable, "-m", "mjx_pbac.render", str(job_path)], env=environment, capture_output=quiet, text=True, check=False
        )


def gl_backend(model_path: Path, scratch: Path) -> tuple[str, dict[str, str]]:
    """The first backend of `gl_backends` that draws a small picture of the model at `model_path`
    (each tried in a child, its messages kept back); a RenderError naming each one's failure and
    the variables to set when none does."""
    if _working:
        return _working[0]
    tried = []
    for description, variables in gl_backends():
        probe = {"model": str(model_path), "fields": None, "out": None, "kind": "probe", "width": 16, "height": 16, "backend": description}
        child = _child(probe, scratch, variables, quiet=True)
        if child.returncode == 0:
            _working.append((description, variables))
            return description, variables
        tried.append(f"{description}: {_last_line(child.stderr)}")
    raise RenderError(f"no OpenGL backend works here ({'; '.join(tried)}); {GL_HELP}")


def draw(
    env: Any, fields: dict[str, np.ndarray], out: Path, width: int, height: int, camera: str, fps: float = 30.0, label: str = ""
) -> str:
    """Draws the pictures `fields` (leaves [pictures, ...]) of `env`'s model from `camera` into
    `out`: an MP4 or a GIF at `fps`, or a PNG strip (by its suffix); the child says which backend
    and OpenGL renderer draw, and shows a progress bar. Returns the backend; a RenderError (one
    line) when no backend gives a context or the file cannot be written."""
    import mujoco

    kind = KINDS.get(out.suffix.lower())
    if kind is None:
        raise RenderError(f"cannot write {out.name}: give a file ending in {', '.join(KINDS)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mjx_pbac_render_") as directory:
        scratch = Path(directory)
        model_path, fields_path = scratch / "model.mjb", scratch / "fields.npz"
        mujoco.mj_saveModel(env.mj_model, str(model_path), None)
        np.savez(fields_path, **fields)
        description, variables = gl_backend(model_path, scratch)
        job = {
            "model": str(model_path), "fields": str(fields_path), "out": str(out), "kind": kind, "width": width,
            "height": height, "camera": camera, "fps": fps, "backend": description, "label": label or out.name,
        }
        child = _child(job, scratch, variables, quiet=False)
        if child.returncode != 0:
            raise RenderError(f"rendering {out.name} with {description} failed (exit {child.returncode}; its message is above)")
        return description


def _last_line(text: str) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def frame_strip(run_dir: str | Path, task: str, out: Path, label: str | None = None, pictures: int = 6, width: int = 240, height: int = 180) -> Path:
    """A PNG of `pictures` moments of one evaluation episode side by side, evenly spaced from its
    reset to its last step: the newest checkpoint's policy of the first member of `run_dir` that
    trains `task` (with `label`, if given), from the env's own camera (`train.py report --frames`)."""
    from mjx_pbac import policy

    restored = policy.restore(run_dir, None, episodes=1)
    chosen = [m for m in restored.members if m.task == task and label in (None, m.label)]
    if not chosen:
        raise RenderError(f"{run_dir} has no member that trains {task}" + (f" as {label}" if label else ""))
    env = mjx_env(restored.member_env(chosen[0].index), task)
    recording = record(restored, chosen[0].index)
    moments = np.unique(np.linspace(0, int(recording.lengths[0]), pictures).round().astype(int))
    fields = {name: value[moments] for name, value in recording.fields.items()}
    draw(env, fields, out, width, height, camera_for(env, None), label=f"{task} frames")
    return out
