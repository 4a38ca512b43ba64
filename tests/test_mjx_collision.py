"""`envs.mjx_collision`: MJX's box manifold with contacts within the pair's margin, against C MuJoCo.

A 4 cm cube above a fixed 10 cm box, both with margin 1 mm, at three heights: 0.5 mm apart
(inside the margin: C MuJoCo reports four contacts at +0.5 mm, MJX's own manifold none), 3 mm
apart (outside it by either rule, C's or MJX's sum of the two margins: neither reports one) and 4 mm deep (both report four at
-4 mm; C places them midway between the surfaces, and so does the patched manifold). One jitted
collision program per manifold, shared by the three heights.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest
from mujoco import mjx

from envs import mjx_collision

XML = """
<mujoco>
  <worldbody>
    <geom name="floor_box" type="box" size="0.05 0.05 0.05" pos="0 0 -0.05" margin="0.001"/>
    <body name="cube" pos="0 0 0.1">
      <freejoint/>
      <geom name="cube" type="box" size="0.02 0.02 0.02" margin="0.001"/>
    </body>
  </worldbody>
</mujoco>
"""
GAPS = (0.0005, 0.003, -0.004)
"""Distance between the cube's bottom face and the box's top face (negative: penetration)."""


@pytest.fixture(scope="module")
def model():
    return mujoco.MjModel.from_xml_string(XML)


def _c_contacts(model, gap):
    data = mujoco.MjData(model)
    data.qpos[2] = 0.02 + gap
    mujoco.mj_forward(model, data)
    return sorted((float(c.dist), float(c.pos[2])) for c in data.contact[: data.ncon])


@pytest.fixture(scope="module")
def mjx_contacts(model):
    mx = mjx.put_model(model)

    def contacts(patched):
        limit = mjx_collision.largest_pair_margin(model) if patched else 0.0
        with mjx_collision.margin_manifolds(limit):
            fn = jax.jit(lambda qpos: mjx.forward(mx, mjx.make_data(mx).replace(qpos=qpos))._impl.contact)
            fn = fn.lower(jp.zeros(model.nq)).compile()
        out = {}
        for gap in GAPS:
            qpos = jp.asarray(model.qpos0).at[2].set(0.02 + gap)
            c = fn(qpos)
            live = np.asarray(c.dist) < np.asarray(c.includemargin)
            out[gap] = sorted(zip(np.asarray(c.dist)[live].tolist(), np.asarray(c.pos)[live, 2].tolist()))
        return out

    return {"mjx": contacts(False), "patched": contacts(True)}


def test_largest_pair_margin_adds_the_two_largest_geom_margins(model):
    assert mjx_collision.largest_pair_margin(model) == pytest.approx(0.002)


def test_margin_contacts_as_c_mujoco_reports_them(model, mjx_contacts):
    inside, outside, deep = GAPS
    c = {gap: _c_contacts(model, gap) for gap in GAPS}
    # C MuJoCo: four contacts within the margin, none outside it, four when penetrating.
    assert len(c[inside]) == 4 and not c[outside] and len(c[deep]) == 4
    # MJX's own manifold has no contact inside the margin: the gap this module closes.
    assert mjx_contacts["mjx"][inside] == [] and mjx_contacts["mjx"][outside] == []
    patched = mjx_contacts["patched"]
    assert patched[outside] == []
    for gap in (inside, deep):
        assert len(patched[gap]) == 4
        np.testing.assert_allclose([d for d, _ in patched[gap]], [d for d, _ in c[gap]], atol=1e-6)
        # Midway between the surfaces, as C: the cube's bottom at 0.02 + gap - 0.02 = gap, the box's top at 0.
        np.testing.assert_allclose([z for _, z in patched[gap]], [z for _, z in c[gap]], atol=1e-6)
        np.testing.assert_allclose([z for _, z in patched[gap]], gap / 2, atol=1e-6)
    # Penetrating contacts keep MJX's depth; MJX put them on the reference face instead.
    np.testing.assert_allclose([d for d, _ in mjx_contacts["mjx"][deep]], [d for d, _ in patched[deep]], atol=1e-6)


def test_the_patch_is_undone_on_exit():
    from mujoco.mjx._src import collision_convex

    original = collision_convex._create_contact_manifold
    with mjx_collision.margin_manifolds(0.002):
        assert collision_convex._create_contact_manifold is not original
    assert collision_convex._create_contact_manifold is original
    with mjx_collision.margin_manifolds(0.0):  # no margin anywhere: MJX's own manifold
        assert collision_convex._create_contact_manifold is original
