"""Contacts within a geom pair's margin from MJX's box colliders, as C MuJoCo reports them.

MuJoCo counts a contact from the moment two geoms come closer than their margin (`geom_margin`
summed over the pair): the contact row is built with distance `dist - margin` and pushes before
the surfaces touch. MJX 3.17 builds its rows the same way (`constraint._efc_contact_*`: active
iff `dist < includemargin`), but its face-clipping manifold (`collision_convex.
_create_contact_manifold`, used by box-box and box-mesh) keeps only incident points strictly
*behind* the reference face, so a box pair with a margin gets no contact until it penetrates.
C MuJoCo's box-box collider reports the points within the margin.

In Meta-World the gripper's claws and pads have margin 1 mm. Pressing the button, C MuJoCo holds
the hand with the left claw's margin contact against the button box's rim; MJX had none, the hand
tilted, sank through the button (the fingers' penetration grows past the button's half-height and
the separating axis flips), and lifted it out again: button-press-topdown's scripted policy lost
its success before the episode ended (docs/metaworld.md "Model changes for MJX, and their measured effect").

`margin_manifolds(limit)` swaps in, while MJX is traced, the same manifold with incident points
kept when they lie less than `limit` in front of the reference face (`limit` = the model's
largest pair margin); their distance is reported as is, positive, and MJX's rows make only those
within the pair's own margin active. Pairs without a margin keep exactly MJX's contacts unless a
point lies in front within `limit`, which the rows then ignore (`tests/test_mjx_collision.py`).
Mesh pairs cannot have margins in MJX (`put_model` refuses them), so only box-box pairs change.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax.numpy as jp
import mujoco
import numpy as np
from mujoco.mjx._src import collision_convex as mjx_convex

from envs.mjx_solver import require_pinned_mjx

_PRIVATE_NAMES = ("_create_contact_manifold", "_clip", "_project_poly_onto_plane", "_manifold_points")


def check_mjx_version() -> None:
    """Raises a clear error when the installed MJX is not the release this module was tested on."""
    require_pinned_mjx("envs.mjx_collision", mjx_convex, _PRIVATE_NAMES, "box_margins=False (MJX's own manifold)")


def largest_pair_margin(model: mujoco.MjModel) -> float:
    """The largest margin of any geom pair that can collide (geom margins add up; explicit pairs
    carry their own)."""
    colliding = (model.geom_contype | model.geom_conaffinity) != 0
    top = np.sort(model.geom_margin[colliding])[-2:] if colliding.any() else np.zeros(1)
    pair = float(model.pair_margin.max()) if model.npair else 0.0
    return max(float(top.sum()), pair)


def manifold_with_margin(limit: float):
    """`_create_contact_manifold` that keeps incident points less than `limit` in front of the
    reference face (MJX's keeps only those strictly behind it)."""

    def manifold(clipping_poly, subject_poly, clipping_norm, subject_norm, sep_axis):
        incident, inside = mjx_convex._clip(clipping_poly, subject_poly, clipping_norm, subject_norm)
        reference = mjx_convex._project_poly_onto_plane(incident, clipping_poly[0], clipping_norm)
        # Signed distance of each incident point from the reference face, along its outward normal.
        signed = (incident - clipping_poly[0]) @ clipping_norm
        keep = inside & (signed < limit)
        chosen = mjx_convex._manifold_points(reference, keep, clipping_norm)
        # C MuJoCo places a contact midway between the two surfaces; MJX's manifold on the
        # reference face, 12 mm off when the fingers press 24 mm into the button.
        points = 0.5 * (jp.take(reference, chosen, axis=0) + jp.take(incident, chosen, axis=0))
        dist = jp.where(jp.take(keep, chosen), jp.take(signed, chosen), 1.0)
        normal = -jp.stack([sep_axis] * 4, 0)
        return dist, points, normal

    return manifold


@contextlib.contextmanager
def margin_manifolds(limit: float) -> Iterator[None]:
    """While active (i.e. while MJX code is traced inside it), MJX's box-box and box-mesh
    manifolds keep points within `limit` of touching; MJX's own function is restored on exit."""
    check_mjx_version()
    saved = mjx_convex._create_contact_manifold
    if limit > 0:
        mjx_convex._create_contact_manifold = manifold_with_margin(float(limit))
    try:
        yield
    finally:
        mjx_convex._create_contact_manifold = saved

