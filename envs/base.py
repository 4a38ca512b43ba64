"""The environment interface shared by every task: Brax's `Env` and `State`, plus MJX plumbing.

Every environment here is a `brax.envs.Env`: `reset(rng) -> State` and `step(state, action) ->
State` are pure, jittable and vmappable, so Brax's training wrappers and trainers accept them
unchanged. Conventions (docs/design.md "Environments"):

- actions are in [-1, 1]^d; an env rescales them to its actuators' control range;
- `State.done` means *terminated* (a true terminal state: do not bootstrap). Truncation at the
  episode limit is added by `envs.wrappers.EpisodeAutoReset` as `info["truncation"]`;
- `episode_length` is the env's own time limit (1000 for the MuJoCo tasks).

Optional, for tasks that share a robot and differ only in constants (the locomotion reward
variants): the env's config class names those fields in `TASK_FIELDS`, `task_params()` returns
them as a pytree of arrays, and `with_task(params)` returns the same env using `params` (which
may be traced). `envs.make_family` then runs such tasks as members of one program; an env
without them trains one task per run.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import jax
import jax.numpy as jp
import mujoco
from brax.envs.base import Env, State
from mujoco import mjx

from envs import mjx_math, mjx_solver

__all__ = ["Env", "MjxEnv", "PhysicsConfig", "State"]

_INTEGRATORS = {
    "euler": mujoco.mjtIntegrator.mjINT_EULER,
    "rk4": mujoco.mjtIntegrator.mjINT_RK4,
    "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST,
}
_SOLVERS = {"newton": mujoco.mjtSolver.mjSOL_NEWTON, "cg": mujoco.mjtSolver.mjSOL_CG}
_SOLVER_LOOPS = ("fixed", "while")


@dataclasses.dataclass(frozen=True)
class PhysicsConfig:
    """Solver settings applied to the Gymnasium model before it is put on the device.

    `None` keeps the value in the model file. Every default that differs from the file is a
    deliberate change listed, with its measured effect, in docs/environments.md "Physics changes, and their measured effect".
    """

    integrator: str | None = None
    """"euler", "rk4" or "implicitfast"; None keeps the model file's integrator."""
    solver: str = "newton"
    """Constraint solver: "newton" or "cg" (MJX has no PGS)."""
    iterations: int | None = None
    """Constraint solver iterations; None keeps the model file's value."""
    ls_iterations: int | None = None
    """Line-search iterations of the solver; None keeps the model file's value."""
    solver_loop: str = "fixed"
    """"fixed": the solver runs exactly `iterations` trips (`envs.mjx_solver`: no loop whose trip
    count depends on data, no branch; same result); "while": MJX's own `lax.while_loop`."""
    math: str = "auto"
    """MJX's quaternion math: "compact" (`envs.mjx_math`: one small matrix product each, fewer
    operations to compile), "mjx" (MJX's own element-wise form), "auto" (compact on a CPU)."""

    def __post_init__(self) -> None:
        if self.integrator is not None and self.integrator not in _INTEGRATORS:
            raise ValueError(f"unknown integrator {self.integrator!r}; valid: {sorted(_INTEGRATORS)}")
        if self.solver not in _SOLVERS:
            raise ValueError(f"unknown solver {self.solver!r}; valid: {sorted(_SOLVERS)}")
        if self.solver_loop not in _SOLVER_LOOPS:
            raise ValueError(f"unknown solver_loop {self.solver_loop!r}; valid: {', '.join(_SOLVER_LOOPS)}")
        if self.math not in mjx_math.FORMS:
            raise ValueError(f"unknown math {self.math!r}; valid: {', '.join(mjx_math.FORMS)}")
        for name in ("iterations", "ls_iterations"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 (or None for the model file's), got {value}")

    def apply(self, model: mujoco.MjModel) -> None:
        """Writes these settings into `model` (in place)."""
        if self.integrator is not None:
            model.opt.integrator = _INTEGRATORS[self.integrator]
        model.opt.solver = _SOLVERS[self.solver]
        if self.iterations is not None:
            model.opt.iterations = self.iterations
        if self.ls_iterations is not None:
            model.opt.ls_iterations = self.ls_iterations


class MjxEnv(Env):
    """Base of the MJX tasks: holds the C model and its device copy, and steps the physics.

    Subclasses build `mj_model`, then implement `reset` and the pure functions of `mjx.Data`
    that `step` is made of.
    """

    episode_length: int = 1000
    render_camera: str | None = None
    """The model camera a video of this env is filmed from by default (`render_fields`); None:
    the model's first camera, or MuJoCo's free camera when it has none."""

    def __init__(self, mj_model: mujoco.MjModel, frame_skip: int, solver_loop: str = "fixed", math: str = "auto"):
        if solver_loop == "fixed":
            mjx_solver.check_mjx_version()  # fail at construction, not deep inside a trace
        if math != "mjx":  # "auto" too: which form it takes is known only when traced
            mjx_math.check_mjx_version()
        self._mj_model = mj_model
        self._solver_loop = solver_loop
        self._math = math
        self._mjx_model = mjx.put_model(mj_model)
        self._frame_skip = frame_skip
        # `physics_step`'s trace, kept by jax.jit and shared by the copies `with_task` makes
        self._traced_physics_step = jax.jit(self._physics_step, inline=True)
        ctrl_range = mj_model.actuator_ctrlrange.astype("float32")
        self._ctrl_low = jp.asarray(ctrl_range[:, 0])
        self._ctrl_high = jp.asarray(ctrl_range[:, 1])

    # -- Brax Env interface ---------------------------------------------------------------
    @property
    def observation_size(self) -> int:
        state = jax.eval_shape(self.reset, jax.random.PRNGKey(0))
        return state.obs.shape[-1]

    @property
    def action_size(self) -> int:
        return self._mj_model.nu

    @property
    def backend(self) -> str:
        return "mjx"

    # -- physics --------------------------------------------------------------------------
    @property
    def mj_model(self) -> mujoco.MjModel:
        """The `mujoco.MjModel` this env simulates (solver settings already applied)."""
        return self._mj_model

    @property
    def mjx_model(self) -> mjx.Model:
        return self._mjx_model

    @property
    def dt(self) -> float:
        """Seconds of simulated time per env step."""
        return float(self._mj_model.opt.timestep) * self._frame_skip

    def action_to_ctrl(self, action: jax.Array) -> jax.Array:
        """Maps an action in [-1, 1] (clipped) affinely onto the actuators' control range."""
        action = jp.clip(action, -1.0, 1.0)
        return self._ctrl_low + 0.5 * (action + 1.0) * (self._ctrl_high - self._ctrl_low)

    def data_from_state(self, qpos: jax.Array, qvel: jax.Array) -> mjx.Data:
        """`mjx.Data` at (qpos, qvel) with what an observation or reward can read of a state:
        body poses (kinematics), composite inertias and centres of mass, body velocities, actuator
        transmission and forces; neither collision nor the constraint solve.

        This is what a reset needs. `mjx.step` recomputes every derived quantity from qpos, qvel,
        ctrl and the solver's warm start (zero here, as after `mj_resetData`) before it
        integrates, so stepping from this state is bit for bit stepping from a full `mj_forward`
        (tested), at a fraction of a forward pass: no collision, no constraint solve.

        MJX writes normalised quaternions back into qpos; C MuJoCo does not, so qpos is restored
        to what was given (Gymnasium's first observation shows it unnormalised).
        """
        model = self._mjx_model
        data = mjx.make_data(model).replace(qpos=qpos, qvel=qvel)
        with self.solver_context():
            for stage in (mjx.kinematics, mjx.com_pos, mjx.transmission, mjx.com_vel, mjx.fwd_actuation):
                data = stage(model, data)
        return data.replace(qpos=qpos)

    def full_data_from_state(self, qpos: jax.Array, qvel: jax.Array) -> mjx.Data:
        """`mjx.Data` at (qpos, qvel) after a full forward pass (`mj_forward`: collision and
        constraint forces included)."""
        data = mjx.make_data(self._mjx_model).replace(qpos=qpos, qvel=qvel)
        with self.solver_context():
            return mjx.forward(self._mjx_model, data).replace(qpos=qpos)

    def solver_context(self) -> contextlib.AbstractContextManager:
        """Active while MJX is traced: the fixed-trip constraint solve (`envs.mjx_solver`) unless
        the env was configured with `solver_loop="while"`, and the compact quaternion math
        (`envs.mjx_math`) where the env's `math` setting gives it."""
        stack = contextlib.ExitStack()
        if self._solver_loop == "fixed":
            stack.enter_context(mjx_solver.fixed_trip_solver())
        if mjx_math.compact_for(self._math):
            stack.enter_context(mjx_math.compact_math())
        return stack

    # -- rendering (mjx_pbac/video.py) ------------------------------------------------------------
    def render_fields(self, state: State) -> dict[str, jax.Array]:
        """What a picture of `state` shows, as whole `MjData` fields (plain names) and `MjModel`
        fields ("model.<name>") to write into the C model before `mj_forward`: the positions and
        the mocap bodies here; a task that keeps per-episode constants in the model (a target, a
        moved body) adds those fields. Pure and jittable: a rollout records it at every step."""
        data = state.pipeline_state
        return {"qpos": data.qpos, "mocap_pos": data.mocap_pos, "mocap_quat": data.mocap_quat}

    def physics_step(self, data: mjx.Data, ctrl: jax.Array) -> mjx.Data:
        """Holds `ctrl` for `frame_skip` physics substeps (Gymnasium's `do_simulation`).

        Traced once per shape: the training and the evaluation programs share the trace, which
        is inlined into each (`jax.jit(..., inline=True)`, the same program as tracing it anew)."""
        return self._traced_physics_step(data, ctrl)

    def _physics_step(self, data: mjx.Data, ctrl: jax.Array) -> mjx.Data:
        data = data.replace(ctrl=ctrl)

        def substep(data: mjx.Data, _: Any) -> tuple[mjx.Data, None]:
            return mjx.step(self._mjx_model, data), None

        with self.solver_context():  # the scan traces its body here
            data, _ = jax.lax.scan(substep, data, None, length=self._frame_skip)
        return data
