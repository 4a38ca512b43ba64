"""`train.py video RUN_DIR`: a member's policy filmed: its evaluation episodes rolled out in MJX,
drawn by MuJoCo's renderer with the first OpenGL backend that works here, written as an MP4 (or
a GIF) under RUN_DIR/videos/ (mjx_pbac/video.py)."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import tyro

from mjx_pbac import cli
from mjx_pbac.commands import _common
from mjx_pbac.config import Platform

SUMMARY = "a member's policy filmed: its evaluation episodes rolled out in MJX and drawn by MuJoCo (MP4 or GIF)."

LARGEST = 4096
"""The largest picture side accepted (MuJoCo's offscreen buffer is grown to fit)."""


@dataclasses.dataclass(frozen=True)
class Args:
    """Film a member's policy: its deterministic evaluation episodes (the run's evaluation rule
    and episode keys), rendered by MuJoCo and written as an MP4 (imageio-ffmpeg: the `video`
    extra) or a GIF."""

    run_dir: tyro.conf.Positional[str]
    """The run directory (its config.json and checkpoints/)."""
    member: int = 0
    """The member filmed (the `evaluate` command lists them)."""
    episodes: int = 1
    """Episodes, one after another in the film."""
    checkpoint: str | None = None
    """The checkpoint: env steps, a file name in RUN_DIR/checkpoints or a path; default the newest."""
    out: str | None = None
    """The file (.mp4 or .gif); default RUN_DIR/videos/step_<env steps>_member<M>[_<overrides>].mp4,
    .gif when imageio-ffmpeg is not installed."""
    width: int = 480
    height: int = 360
    camera: str | None = None
    """A camera of the env's model, or "free" (MuJoCo's free camera); default the env's own: the
    tracking camera of a locomotion robot, a DM Control task's fixed camera, Meta-World's corner."""
    fps: float = 30.0
    """Pictures per second of film; every n-th step is drawn so that the film runs in real time."""
    set: tuple[str, ...] = ()
    """Env overrides KEY=VALUE added to the run's, as `evaluate --set`."""
    platform: Platform = "auto"
    """Where to roll out, as the training command's --train.platform."""


def main(argv: list[str]) -> None:
    """Films the member `argv` names and writes the file."""
    from mjx_pbac import policy, rundir, video

    args = cli.parse(Args, argv, f"{cli.program()} video")
    if args.episodes < 1:
        raise SystemExit(f"error: --episodes must be >= 1, got {args.episodes}")
    for name, value in (("--width", args.width), ("--height", args.height)):
        if not 16 <= value <= LARGEST:
            raise SystemExit(f"error: {name} must be in 16..{LARGEST}, got {value}")
    if not args.fps > 0:
        raise SystemExit(f"error: --fps must be > 0, got {args.fps}")
    mp4_writer = importlib.util.find_spec("imageio_ffmpeg") is not None
    out = Path(args.out) if args.out else None
    if out is not None:
        kind = video.KINDS.get(out.suffix.lower())
        if kind not in ("mp4", "gif"):
            raise SystemExit(f"error: --out {out}: give a file ending in .mp4 or .gif")
        if kind == "mp4" and not mp4_writer:
            raise SystemExit(f"error: --out {out}: MP4 needs imageio-ffmpeg (pip install 'mjx-pbac[video]'); or write a .gif")
        if kind == "mp4" and (args.width % 2 or args.height % 2):
            raise SystemExit(f"error: an MP4's sides must be even (H.264, yuv420p), got {args.width}x{args.height}")
    overrides = tuple(f"{key}={value}" for key, value in _common.parse_overrides(args.set))
    _common.use_platform(args.platform, "--platform")
    try:
        if args.camera is not None:  # a wrong camera named before the restore's seconds
            video.run_camera(args.run_dir, args.camera)
        restored = policy.restore(args.run_dir, args.checkpoint, args.episodes, overrides, (args.member, "--member"))
        member = restored.members[args.member]
        env = video.mjx_env(restored.member_env(args.member), member.task)
        camera = video.camera_for(env, args.camera)
        if out is None:
            suffix = ".mp4" if mp4_writer else ".gif"
            name = f"step_{restored.env_steps:09d}_member{args.member}{_common.overrides_tail(overrides)}{suffix}"
            out = Path(args.run_dir) / rundir.VIDEOS / name
            if not mp4_writer:
                print("imageio-ffmpeg is not installed (pip install 'mjx-pbac[video]' for MP4): writing a GIF")
        print(
            f"rolling out member {args.member} ({member.label}, seed {member.seed}, {member.task}) at "
            f"{restored.env_steps:,} env steps: {args.episodes} episode(s), compiling first"
        )
        recording = video.record(restored, args.member)
        for episode, (value, length) in enumerate(zip(recording.returns.tolist(), recording.lengths.tolist())):
            print(f"episode {episode}: return {value:.2f}, {length} steps")
        every = video.every_for(recording.dt, args.fps)
        fields = {name: value[::every] for name, value in recording.fields.items()}
        fps = 1.0 / (recording.dt * every)
        video.draw(env, fields, out, args.width, args.height, camera, fps)  # says which OpenGL backend drew
    except rundir.RunError as error:
        raise SystemExit(f"error: {error}") from None
    pictures = len(next(iter(fields.values())))
    print(f"wrote {out} ({pictures} frames, {args.width}x{args.height}, {fps:.4g} fps, camera {camera})")
