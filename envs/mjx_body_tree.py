"""One fusion boundary per level of MJX's body-tree scans, for deep kinematic trees on XLA.

MJX 3.17.0 (`mujoco.mjx._src.scan.body_tree`) computes kinematics, composite inertias and the
recursive Newton-Euler pass level by level down (or up) the body tree, unrolled in Python: each
level is a vmapped function of the level above. XLA then fuses neighbouring levels and, inside a
fusion, recomputes a shared value once per use instead of storing it. The work of a level is
repeated for every level below it, so the cost grows about exponentially with the depth.

Meta-World's Sawyer is 13 bodies deep (the Gymnasium Ant: 4). Measured on a 2-core CPU, one
instance of `sawyer_drawer.xml` (docs/metaworld.md "Model changes for MJX, and their measured effect"): a jitted `mjx.kinematics` took 381 ms
(Ant: 0.65 ms) and `mjx.step` 406 ms; with a barrier after each level, 1.2 ms and 75 ms, with
the same compile time and results equal to float32 rounding (tested).

`level_barriers()` swaps in, while MJX is traced, `scan._nvmap` followed by
`jax.lax.optimization_barrier` on its output: each level's result is materialised once and read
by the levels below it. It reaches into MJX's private scan module, so the pinned MJX release is
checked on use (as `envs.mjx_solver` does).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import jax
import mujoco
from mujoco.mjx._src import scan as mjx_scan

from envs.mjx_solver import PINNED_MUJOCO


def check_mjx_version() -> None:
    """Raises a clear error when MJX is not the release whose `scan._nvmap` this patches."""
    if mujoco.__version__ != PINNED_MUJOCO or not hasattr(mjx_scan, "_nvmap"):
        raise RuntimeError(
            f"envs.mjx_body_tree patches MJX {PINNED_MUJOCO}'s private scan module, but mujoco "
            f"{mujoco.__version__} is installed; install mujoco=={PINNED_MUJOCO} mujoco-mjx=={PINNED_MUJOCO} "
            "(the project's pins), or use the env override body_tree_barriers=False"
        )


def _barrier(tree: Any) -> Any:
    return tree if tree is None else jax.lax.optimization_barrier(tree)


@contextlib.contextmanager
def level_barriers() -> Iterator[None]:
    """While active (while MJX code is traced inside it), every level of MJX's body-tree scans
    ends in an optimization barrier; MJX's own `_nvmap` is restored on exit."""
    check_mjx_version()
    original: Callable[..., Any] = mjx_scan._nvmap

    def nvmap_with_barrier(f: Callable[..., Any], *args: Any) -> Any:
        return _barrier(original(f, *args))

    mjx_scan._nvmap = nvmap_with_barrier
    try:
        yield
    finally:
        mjx_scan._nvmap = original
