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


@pytest.mark.slow
def test_fixed_trip_solve_equals_mjx_while_loop_on_ant_contacts():
    """Four Ant instances dropped onto the floor (contacts, active constraints), 3 env steps of 5
    RK4 substeps: the fixed-trip solve and MJX's own give the same qpos and qvel, bit for bit."""
    fixed, own = envs.make("ant"), envs.make("ant", solver_loop="while")
    reset = jax.jit(jax.vmap(fixed.reset))(jax.random.split(jax.random.PRNGKey(0), 4))
    data = reset.pipeline_state
    ctrl = jax.random.uniform(jax.random.PRNGKey(1), (4, 8), minval=-1, maxval=1)

    def rollout(env):
        def step(data, _):
            return jax.vmap(env.physics_step)(data, ctrl), None

        return jax.jit(lambda d: jax.lax.scan(step, d, None, length=3)[0])

    a, b = rollout(fixed)(data), rollout(own)(data)
    assert float(jp.max(jp.abs(a.qvel))) > 0.1  # it moved
    np.testing.assert_array_equal(np.asarray(a.qpos), np.asarray(b.qpos))
    np.testing.assert_array_equal(np.asarray(a.qvel), np.asarray(b.qvel))


@pytest.mark.slow
def test_training_env_step_has_no_data_dependent_loop_or_branch():
    env = envs.make("ant")
    batched = envs.wrap_for_training(env, 2)
    state = jax.jit(batched.reset)(jax.random.PRNGKey(0))
    action = jp.zeros((2, env.action_size))
    stats = program_stats(jax.jit(batched.step).lower(state, action).compile())
    assert stats["data_dependent_loops"] == 0 and stats["conditionals"] == 0, stats
    own = envs.wrap_for_training(envs.make("ant", solver_loop="while"), 2)
    stats_own = program_stats(jax.jit(own.step).lower(state, action).compile())
    assert stats_own["data_dependent_loops"] > 0  # MJX's own solve: the check above can fail


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
    envs.make("hopper", solver_loop="while")  # MJX's own solve needs no particular version


def test_fixed_trip_solver_restores_mjx_on_exit():
    from mujoco.mjx._src import solver

    before = solver.solve, solver._while_loop_scan
    with pytest.raises(ZeroDivisionError), mjx_solver.fixed_trip_solver():
        assert solver.solve is mjx_solver.solve_fixed_trips
        1 / 0  # noqa: B018 - raises inside the context
    assert (solver.solve, solver._while_loop_scan) == before
    assert mjx.forward  # untouched public API
