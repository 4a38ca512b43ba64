"""Slim wheels of the two packages the envs read files from, for a GPU machine without registry
access (benchmarks/gpu/wheels.sh): dm-control's suite XML files and Meta-World's model files (the
ones envs/metaworld_assets.sha256 pins), each as an empty package of the installed version with
those files and a minimal dist-info. The full wheels would be most of the copy to the machine;
the envs import neither package, they only locate its directory (envs/dm_control.py,
envs/metaworld_model.py).

    python benchmarks/gpu/slim_wheels.py OUT_DIR
"""

from __future__ import annotations

import importlib.metadata as md
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build(distribution: str, package: str, files: dict[str, bytes], summary: str, out_dir: str | Path) -> Path:
    """Writes `package`'s wheel at the installed version of `distribution` into `out_dir`:
    `files` ({path inside the package: bytes}), an empty `__init__.py` and a dist-info without
    dependencies. Returns the wheel's path."""
    version = md.version(distribution)
    name = f"{package}-{version}"
    contents = {f"{package}/__init__.py": b""}
    contents.update({f"{package}/{path}": data for path, data in sorted(files.items())})
    contents[f"{name}.dist-info/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\nSummary: {summary}\n".encode()
    )
    contents[f"{name}.dist-info/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: mjx-pbac\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    contents[f"{name}.dist-info/RECORD"] = ("".join(f"{path},,\n" for path in contents) + f"{name}.dist-info/RECORD,,\n").encode()
    out = Path(out_dir) / f"{name}-py3-none-any.whl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as wheel:
        for path, data in contents.items():
            wheel.writestr(path, data)
    return out


def dm_control_wheel(out_dir: str | Path) -> Path:
    """dm_control with its suite's XML files (and an empty `dm_control.suite`)."""
    sys.path.insert(0, str(ROOT))
    from envs.dm_control import dm_control_suite_dir

    suite = Path(dm_control_suite_dir())
    files = {"suite/__init__.py": b""}
    files.update({f"suite/{path.relative_to(suite)}": path.read_bytes() for path in sorted(suite.rglob("*.xml"))})
    return build("dm-control", "dm_control", files, "dm_control's suite XML files only (mjx-pbac GPU runs)", out_dir)


def metaworld_wheel(out_dir: str | Path) -> Path:
    """metaworld with the model files the seven Meta-World tasks load (the pinned manifest)."""
    sys.path.insert(0, str(ROOT))
    from envs.metaworld_model import asset_dir, read_manifest

    assets = Path(asset_dir())
    files = {f"assets/{rel}": (assets / rel).read_bytes() for rel in read_manifest()}
    return build("metaworld", "metaworld", files, "Meta-World's model files of the seven tasks only (mjx-pbac GPU runs)", out_dir)


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit("usage: python benchmarks/gpu/slim_wheels.py OUT_DIR")
    for wheel in (dm_control_wheel(argv[0]), metaworld_wheel(argv[0])):
        print(f"{wheel} ({wheel.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main(sys.argv[1:])
