"""The fixed-trip constraint solve (`envs.mjx_solver`) and the light reset state (`MjxEnv.data_from_state`):
same physics as MJX's own while loop and a full forward pass, bit for bit, and env steps that
XLA runs without a data-dependent loop or a branch."""

import jax
import jax.numpy as jp
import numpy as np
import pytest
from mujoco import mjx

import envs
from envs import mjx_solver
from mjx_pbac.hlo import program_stats


def test_scan_while_equals_a_python_while_loop_including_the_cap():
    # while x < limit: x = 2x + 1, for at most 4 trips: from 0 the loop runs 0 -> 1 -> 3 -> 7 -> 15
    # (capped at 4 trips); from 5 it stops after one trip (11); from 50 it never runs.
    def reference(x, limit, cap=4):
        trips = 0
        while x < limit and trips < cap:
            x, trips = 2 * x + 1, trips + 1
        return x

    run = jax.jit(lambda x, limit: mjx_solver.scan_while(lambda v: v < limit, lambda v: 2 * v + 1, x, 4))
    for x, limit in [(0.0, 100.0), (0.0, 4.0), (5.0, 10.0), (50.0, 10.0)]:
        assert float(run(jp.float32(x), jp.float32(limit))) == reference(x, limit)
    stats = program_stats(run.lower(jp.float32(0), jp.float32(1)).compile())
    assert stats["data_dependent_loops"] == 0 and stats["conditionals"] == 0


@pytest.fixture(scope="module")
def ant_training_steps():
    """Four Ant instances' training env step (auto-reset and all), compiled with the fixed-trip
    solve and with MJX's own while loop, and the instances' reset state: one program each, which
    both tests below read (an MJX Ant step is ~17 s to compile here)."""
    fixed, own = (envs.wrap_for_training(envs.make("ant", solver_loop=loop), 4) for loop in ("fixed", "while"))
    state = jax.jit(fixed.reset)(jax.random.PRNGKey(0))
    action = jax.random.uniform(jax.random.PRNGKey(1), (4, fixed.action_size), minval=-1, maxval=1)
    return state, action, {name: jax.jit(batched.step).lower(state, action).compile() for name, batched in (("fixed", fixed), ("while", own))}


@pytest.mark.slow
def test_fixed_trip_solve_equals_mjx_while_loop_on_ant_contacts(ant_training_steps):
    """Four Ant instances dropped onto the floor (contacts, active constraints), 3 training env
    steps (5 RK4 substeps each, auto-reset included): the fixed-trip solve and MJX's own give the
    same qpos and qvel, bit for bit."""
    state, action, steps = ant_training_steps
    a = b = state
    for _ in range(3):
        a, b = steps["fixed"](a, action), steps["while"](b, action)
    assert float(jp.max(jp.abs(a.pipeline_state.qvel))) > 0.1  # it moved
    np.testing.assert_array_equal(np.asarray(a.pipeline_state.qpos), np.asarray(b.pipeline_state.qpos))
    np.testing.assert_array_equal(np.asarray(a.pipeline_state.qvel), np.asarray(b.pipeline_state.qvel))


@pytest.mark.slow
def test_training_env_step_has_no_data_dependent_loop_or_branch(ant_training_steps):
    _, _, steps = ant_training_steps
    stats = program_stats(steps["fixed"])
    assert stats["data_dependent_loops"] == 0 and stats["conditionals"] == 0, stats
    assert program_stats(steps["while"])["data_dependent_loops"] > 0  # MJX's own solve: the check above can fail


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hopper", "humanoid", "ball_in_cup_catch"])
def test_light_reset_state_steps_exactly_like_a_full_forward_pass(name):
    """A reset computes kinematics, centres of mass, velocities and actuation, but no collision
    or constraint solve; the observation and the next physics step equal those from a full
    `mjx.forward` of the same (qpos, qvel), bit for bit."""
    env = envs.make(name)
    keys = jax.random.split(jax.random.PRNGKey(2), 4)
    states = jax.jit(jax.vmap(env.reset))(keys)
    light = states.pipeline_state
    full = jax.jit(jax.vmap(env.full_data_from_state))(light.qpos, light.qvel)
    if hasattr(env, "sync"):  # DM Control tasks: observation(data, info)
        obs_full = jax.vmap(env.observation)(full, states.info)
    else:
        obs_full = jax.vmap(env.observation)(full)
    np.testing.assert_array_equal(np.asarray(states.obs), np.asarray(obs_full))
    ctrl = jax.vmap(env.action_to_ctrl)(jax.random.uniform(keys[0], (4, env.action_size), minval=-1, maxval=1))
    # One instance at a time, its data committed to the device as `mjx.put_data` commits it: the
    # program `one_step_deviation` compiles in tests/test_locomotion.py, so the compile cache
    # serves it here (Hopper, Humanoid).
    step, device = jax.jit(env.physics_step), jax.devices()[0]
    for i in range(len(keys)):
        a, b = (step(jax.device_put(jax.tree.map(lambda x, i=i: x[i], data), device), ctrl[i]) for data in (light, full))
        np.testing.assert_array_equal(np.asarray(a.qpos), np.asarray(b.qpos))
        np.testing.assert_array_equal(np.asarray(a.qvel), np.asarray(b.qvel))


def test_a_wrong_mujoco_version_is_named(monkeypatch):
    import mujoco

    monkeypatch.setattr(mujoco, "__version__", "9.9.9")
    with pytest.raises(RuntimeError, match=r"3\.17\.0.*9\.9\.9.*solver_loop=while"):
        envs.make("hopper")
    envs.make("hopper", solver_loop="while", math="mjx")  # MJX's own solve and math need no particular version


def test_fixed_trip_solver_restores_mjx_on_exit():
    from mujoco.mjx._src import solver

    before = solver.solve, solver._while_loop_scan
    with pytest.raises(ZeroDivisionError), mjx_solver.fixed_trip_solver():
        assert solver.solve is mjx_solver.solve_fixed_trips
        1 / 0  # noqa: B018 - raises inside the context
    assert (solver.solve, solver._while_loop_scan) == before
    assert mjx.forward  # untouched public API


def test_compact_quaternion_math_agrees_with_mjxs_and_is_restored():
    """envs.mjx_math's products against MJX's element-wise ones on random quaternions (unit and
    not), vectors and angles: equal to float32 rounding; MJX's functions are back after the
    context, an exception inside it included."""
    from mujoco.mjx._src import math as own

    from envs import mjx_math

    keys = jax.random.split(jax.random.PRNGKey(0), 5)
    u, v = jax.random.normal(keys[0], (64, 4)), jax.random.normal(keys[1], (64, 4))
    unit = u / jp.linalg.norm(u, axis=-1, keepdims=True)
    vec, angle = jax.random.normal(keys[2], (64, 3)), jax.random.uniform(keys[3], (64,), minval=-4, maxval=4)
    before = {name: getattr(own, name) for name in mjx_math._REPLACED}
    pairs = {
        "quat_mul": (u, v),
        "quat_to_mat": (u,),
        "rotate": (vec, unit),
        "axis_angle_to_quat": (vec, angle),
    }
    assert set(pairs) == set(mjx_math._REPLACED)
    for name, args in pairs.items():
        expected = jax.vmap(before[name])(*args)
        with mjx_math.compact_math():
            assert getattr(own, name) is getattr(mjx_math, name)
            got = jax.vmap(getattr(own, name))(*args)
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=2e-6, atol=2e-6, err_msg=name)
        assert not np.array_equal(np.asarray(got), np.asarray(expected)) or name == "axis_angle_to_quat"  # another form, not MJX's own
    with pytest.raises(ZeroDivisionError), mjx_math.compact_math():
        1 / 0  # noqa: B018 - raises inside the context
    assert {name: getattr(own, name) for name in mjx_math._REPLACED} == before


def test_compact_math_shrinks_an_env_step_and_is_chosen_per_device(monkeypatch):
    """Hopper's batched training step lowered (nothing compiled) with the compact math has at
    most 75 % of the operations of MJX's own form; "auto" gives the compact form on a CPU and
    MJX's elsewhere; a bad value and a wrong MJX release are named."""
    import mujoco

    from envs import mjx_math

    def operations(math):
        batched = envs.wrap_for_training(envs.make("hopper", math=math), 2)
        state = jax.eval_shape(batched.reset, jax.random.PRNGKey(0))
        text = jax.jit(batched.step).lower(state, jax.ShapeDtypeStruct((2, 3), jp.float32)).as_text()
        return text.count(" = stablehlo.") + text.count(' = "stablehlo.')

    compact, own = operations("compact"), operations("mjx")
    assert compact <= 0.75 * own, (compact, own)
    assert mjx_math.compact_for("auto") == (jax.default_backend() == "cpu")
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert not mjx_math.compact_for("auto") and mjx_math.compact_for("compact") and not mjx_math.compact_for("mjx")
    with pytest.raises(ValueError, match="unknown math 'fast'; valid: auto, compact, mjx"):
        envs.make("hopper", math="fast")
    monkeypatch.setattr(mujoco, "__version__", "9.9.9")
    with pytest.raises(RuntimeError, match=r"envs.mjx_math .*3\.17\.0.*9\.9\.9.*math=mjx"):
        envs.make("hopper", solver_loop="while")  # "auto" checks too


@pytest.mark.parametrize(
    ("module", "private", "override"),
    [("mjx_solver", "solver", "solver_loop=while"), ("mjx_math", "math", "math=mjx"), ("mjx_collision", "collision_convex", "box_margins=False")],
)
def test_each_patch_of_mjx_names_its_module_and_override_on_a_wrong_release(module, private, override, monkeypatch):
    """The three modules that patch MJX's private parts share one check (`require_pinned_mjx`):
    a wrong release, or a missing private name, is one error naming the patcher, the private
    module, what is missing and the env override that does without the patch."""
    import importlib

    import mujoco

    patcher = importlib.import_module(f"envs.{module}")
    monkeypatch.setattr(mujoco, "__version__", "9.9.9")
    with pytest.raises(RuntimeError, match=rf"envs\.{module} patches MJX 3\.17\.0's private {private} module, but mujoco 9\.9\.9 .*{override}"):
        patcher.check_mjx_version()
    monkeypatch.setattr(mujoco, "__version__", mjx_solver.PINNED_MUJOCO)
    patcher.check_mjx_version()  # the pinned release passes
    with pytest.raises(RuntimeError, match=r"\(missing: gone\)"):
        mjx_solver.require_pinned_mjx(f"envs.{module}", mjx_solver.mjx_solver, ("gone",), override)
