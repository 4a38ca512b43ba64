"""The drawing half of `train.py video` (mjx_pbac/video.py), run as a child process:
`python -m mjx_pbac.render JOB.json`.

It reads a saved MuJoCo model and the recorded states of each picture (`MjxEnv.render_fields`:
whole `MjData` fields, and `MjModel` fields as "model.<name>"), poses the C model at each one
(`mj_forward`), draws it with MuJoCo's renderer and writes an MP4 (imageio with its ffmpeg
binary), a GIF (Pillow) or a PNG strip of the pictures side by side (Pillow).

A child, because MuJoCo picks its OpenGL backend from MUJOCO_GL once, when it is first imported:
the parent tries backends by starting this with each in turn (mjx_pbac/video.py), and training
processes never load a renderer or an OpenGL library. It imports neither JAX nor the envs.

Exit codes: 0 written; 3 no OpenGL context with this backend (the parent tries the next); 2 the
job failed otherwise (the message on stderr).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

NO_CONTEXT = 3
"""Exit code: this backend gave no OpenGL context (the last stderr line says why)."""


def _fail(code: int, message: str) -> None:
    print(message.replace("\n", " "), file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(code)  # no interpreter teardown: some GL drivers print noise when their context is collected late


def _renderer(model, width: int, height: int):
    """MuJoCo's renderer at width x height (the model's offscreen buffer grown to fit), and the
    OpenGL renderer's name; exits with NO_CONTEXT when the backend gives no context."""
    import mujoco

    model.vis.global_.offwidth = max(int(model.vis.global_.offwidth), width)
    model.vis.global_.offheight = max(int(model.vis.global_.offheight), height)
    try:
        renderer = mujoco.Renderer(model, height, width)
    except Exception as error:  # noqa: BLE001 - every backend fails its own way (ImportError, OSError, RuntimeError, GLError)
        _fail(NO_CONTEXT, f"{type(error).__name__}: {error}")
    try:
        from OpenGL import GL

        name = GL.glGetString(GL.GL_RENDERER)
        name = name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 - the name is only shown; a backend without PyOpenGL access still draws
        name = "unknown renderer"
    return renderer, name


def _camera(model, camera: str):
    """(the `update_scene` camera, its id in the model or None): a model camera by name, or
    MuJoCo's free camera ("free")."""
    import mujoco

    if camera != "free":
        return camera, model.camera(camera).id
    free = mujoco.MjvCamera()
    mujoco.mjv_defaultFreeCamera(model, free)
    return free, None


def _upright(pixels, data, camera_id):
    """The picture turned over (180 degrees) when the camera's up points below the horizon: some
    model cameras are set upside down (Meta-World's corner cameras, made for a renderer whose
    pictures came out flipped)."""
    if camera_id is not None and data.cam_xmat[camera_id][7] < 0:  # z of the camera's up axis (its y)
        return pixels[::-1, ::-1]
    return pixels


def _pose(model, data, fields: dict, index: int) -> None:
    """Writes picture `index`'s recorded fields into `model` and `data`, then `mj_forward`."""
    import mujoco

    for name, values in fields.items():
        target = getattr(model, name.removeprefix("model.")) if name.startswith("model.") else getattr(data, name)
        target[...] = values[index]
    mujoco.mj_forward(model, data)


class _Writer:
    """Takes the pictures one by one: an MP4 or a GIF streamed to its file, or a PNG strip."""

    def __init__(self, out: Path, kind: str, fps: float):
        self.out, self.kind, self.fps = out, kind, fps
        self.kept: list = []
        self.video = None
        if kind == "mp4":
            import imageio.v2 as imageio

            # yuv420p (what every player reads) needs even sizes: the parent checks them.
            self.video = imageio.get_writer(out, fps=fps, codec="libx264", quality=7, macro_block_size=2, ffmpeg_log_level="error")

    def add(self, pixels) -> None:
        if self.video is not None:
            self.video.append_data(pixels)
            return
        from PIL import Image

        image = Image.fromarray(pixels)
        # A GIF holds 256 colours a picture: each is quantised as it comes (a byte a pixel kept).
        self.kept.append(image.quantize(colors=256, method=Image.Quantize.MEDIANCUT) if self.kind == "gif" else image)

    def close(self) -> None:
        if self.video is not None:
            self.video.close()
            return
        from PIL import Image

        if self.kind == "gif":
            duration = max(20, round(1000 / self.fps / 10) * 10)  # GIF delays are in 10 ms; players slow < 20 ms
            self.kept[0].save(self.out, save_all=True, append_images=self.kept[1:], duration=duration, loop=0, optimize=True)
            return
        width, height = self.kept[0].size
        strip = Image.new("RGB", (width * len(self.kept), height))
        for position, image in enumerate(self.kept):
            strip.paste(image, (position * width, 0))
        strip.save(self.out)


def main(job_path: str) -> None:
    import numpy as np

    try:
        import mujoco  # reads MUJOCO_GL: an invalid value fails here
    except Exception as error:  # noqa: BLE001 - as a context that fails: this backend cannot draw here
        _fail(NO_CONTEXT, f"{type(error).__name__}: {error}")

    job = json.loads(Path(job_path).read_text())
    model = mujoco.MjModel.from_binary_path(job["model"])
    renderer, gl_name = _renderer(model, job["width"], job["height"])
    if job["kind"] == "probe":  # does this backend draw? (mjx_pbac/video.py's gl_backend)
        try:
            renderer.update_scene(mujoco.MjData(model))
            renderer.render()
        except Exception as error:  # noqa: BLE001 - as for the context: this backend does not draw here
            _fail(NO_CONTEXT, f"{type(error).__name__}: {error}")
        print(f"{job['backend']} ({gl_name})", flush=True)
        os._exit(0)
    print(f"rendering with {job['backend']} ({gl_name})", flush=True)
    with np.load(job["fields"]) as stored:
        fields = {name: stored[name] for name in stored.files}
    data = mujoco.MjData(model)
    camera, camera_id = _camera(model, job["camera"])
    out = Path(job["out"])
    count = len(next(iter(fields.values())))
    try:
        from tqdm import tqdm

        writer = _Writer(out, job["kind"], job["fps"])
        for index in tqdm(range(count), desc=job.get("label", "rendering"), unit="frame", file=sys.stderr, mininterval=0.5):
            _pose(model, data, fields, index)
            renderer.update_scene(data, camera=camera)
            writer.add(_upright(renderer.render(), data, camera_id))
        writer.close()
    except Exception as error:  # noqa: BLE001 - reported to the parent in one line, whatever failed
        _fail(2, f"{type(error).__name__}: {error}")
    renderer.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m mjx_pbac.render JOB.json (written by mjx_pbac/video.py)")
    main(sys.argv[1])
