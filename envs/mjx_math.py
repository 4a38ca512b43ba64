"""MJX's quaternion math in a compact form: fewer operations for XLA to compile.

MJX 3.17.0 (`mujoco.mjx._src.math`) writes its quaternion products out element by element
(`quat_mul`'s 16 products and 12 sums, `quat_to_mat`'s nine entries, `rotate`'s cross product),
each element its own operation in the program: a form tuned for XLA:GPU, where they all fuse into
one kernel. They are called for every joint, body and contact, so on Hopper they are almost half
of an env step's operations. `compact_math()` swaps in, while MJX is being traced, the same
products as one small matrix product each: the quaternions' outer product (16 numbers) times a
constant table of signs. On a CPU, where an env step's compile costs more than its first minutes
of stepping, this compiles in about a quarter less time; Hopper steps faster, Ant and Humanoid
3-4 % slower (docs/evidence/compact-math-cpu.md).

The values are the same products summed in another order: they agree with MJX's to float32
rounding (tested), not bit for bit. MJX's own functions are restored on exit. These replace
functions of MJX's private math module, so the pinned version is checked on use.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax
import jax.numpy as jp
import numpy as np
from mujoco.mjx._src import math as mjx_math

from envs.mjx_solver import require_pinned_mjx

FORMS = ("auto", "compact", "mjx")
"""The `math` env setting: "compact" (this module), "mjx" (MJX's own element-wise form) or
"auto" (compact on a CPU; MJX's own form on an accelerator, where it was tuned and where the
compact form's step time is not yet measured)."""

_REPLACED = ("quat_mul", "quat_to_mat", "rotate", "axis_angle_to_quat")


def _quat_mul_table() -> np.ndarray:
    """T with (u * v)_i = sum_jk T[i, j, k] u_j v_k (Hamilton product, w first)."""
    table = np.zeros((4, 4, 4), np.float32)
    terms = (
        ((0, 0, 1), (1, 1, -1), (2, 2, -1), (3, 3, -1)),
        ((0, 1, 1), (1, 0, 1), (2, 3, 1), (3, 2, -1)),
        ((0, 2, 1), (1, 3, -1), (2, 0, 1), (3, 1, 1)),
        ((0, 3, 1), (1, 2, 1), (2, 1, -1), (3, 0, 1)),
    )
    for i, row in enumerate(terms):
        for j, k, sign in row:
            table[i, j, k] = sign
    return table


def _rotation_table() -> np.ndarray:
    """R with rotation matrix(q)_ab = sum_jk R[a, b, j, k] q_j q_k (MJX's `quat_to_mat`)."""
    table = np.zeros((3, 3, 4, 4), np.float32)
    entries = {
        (0, 0): ((0, 0, 1), (1, 1, 1), (2, 2, -1), (3, 3, -1)),
        (0, 1): ((1, 2, 2), (0, 3, -2)),
        (0, 2): ((1, 3, 2), (0, 2, 2)),
        (1, 0): ((1, 2, 2), (0, 3, 2)),
        (1, 1): ((0, 0, 1), (1, 1, -1), (2, 2, 1), (3, 3, -1)),
        (1, 2): ((2, 3, 2), (0, 1, -2)),
        (2, 0): ((1, 3, 2), (0, 2, -2)),
        (2, 1): ((2, 3, 2), (0, 1, 2)),
        (2, 2): ((0, 0, 1), (1, 1, -1), (2, 2, -1), (3, 3, 1)),
    }
    for (a, b), terms in entries.items():
        for j, k, weight in terms:
            table[a, b, j, k] = weight
    return table


_QUAT_MUL = _quat_mul_table().reshape(4, 16).T
_ROTATION = _rotation_table().reshape(9, 16).T


def quat_mul(u: jax.Array, v: jax.Array) -> jax.Array:
    """The quaternion product u * v (w, x, y, z), as MJX's `quat_mul`."""
    return jp.dot((u[:, None] * v[None, :]).reshape(16), _QUAT_MUL)


def quat_to_mat(q: jax.Array) -> jax.Array:
    """The 3x3 rotation matrix of q, as MJX's `quat_to_mat`."""
    return jp.dot((q[:, None] * q[None, :]).reshape(16), _ROTATION).reshape(3, 3)


def rotate(vec: jax.Array, quat: jax.Array) -> jax.Array:
    """vec (3,) rotated by the unit quaternion quat, as MJX's `rotate` (the same quadratic form
    of quat applied to vec)."""
    if len(vec.shape) != 1:
        raise ValueError("vec must have no batch dimensions.")
    return (quat_to_mat(quat) * vec[None, :]).sum(1)


def axis_angle_to_quat(axis: jax.Array, angle: jax.Array) -> jax.Array:
    """The quaternion rotating by `angle` about `axis`, as MJX's `axis_angle_to_quat`."""
    s, c = jp.sin(angle * 0.5), jp.cos(angle * 0.5)
    return jp.concatenate([c[None], axis * s])


def check_mjx_version() -> None:
    """Raises a clear error when the installed MJX is not the release this module was tested on."""
    require_pinned_mjx("envs.mjx_math", mjx_math, _REPLACED, "math=mjx (MJX's own math)")


def compact_for(form: str) -> bool:
    """Whether the env setting `form` (`FORMS`) traces the compact math on the default backend."""
    if form not in FORMS:
        raise ValueError(f"unknown math {form!r}; valid: {', '.join(FORMS)}")
    return form == "compact" or (form == "auto" and jax.default_backend() == "cpu")


@contextlib.contextmanager
def compact_math() -> Iterator[None]:
    """While active (i.e. while MJX code is traced inside it), MJX's quaternion and small-matrix
    products are this module's; MJX's own functions are restored on exit."""
    check_mjx_version()
    saved = {name: getattr(mjx_math, name) for name in _REPLACED}
    for name in _REPLACED:
        setattr(mjx_math, name, globals()[name])
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(mjx_math, name, function)
