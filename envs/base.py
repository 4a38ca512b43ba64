"""The environment interface shared by every task: Brax's `Env` and `State`, plus MJX plumbing.

Every environment here is a `brax.envs.Env`: `reset(rng) -> State` and `step(state, action) ->
State` are pure, jittable and vmappable, so Brax's training wrappers and trainers accept them
unchanged. Conventions (SPEC section 1):

- actions are in [-1, 1]^d; an env rescales them to its actuators' control range;
- `State.done` means *terminated* (a true terminal state: do not bootstrap). Truncation at the
  episode limit is added by `envs.wrappers.EpisodeAutoReset` as `info["truncation"]`;
- `episode_length` is the env's own time limit (1000 for the MuJoCo tasks).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jp
import mujoco
from brax.envs.base import Env, State
from mujoco import mjx

__all__ = ["Env", "State", "MjxEnv", "PhysicsConfig"]

_INTEGRATORS = {
    "euler": mujoco.mjtIntegrator.mjINT_EULER,
    "rk4": mujoco.mjtIntegrator.mjINT_RK4,
    "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST,
}
_SOLVERS = {"newton": mujoco.mjtSolver.mjSOL_NEWTON, "cg": mujoco.mjtSolver.mjSOL_CG}


@dataclasses.dataclass(frozen=True)
class PhysicsConfig:
    """Solver settings applied to the Gymnasium model before it is put on the device.

    `None` keeps the value in the model file. Every default that differs from the file is a
    deliberate change listed, with its measured effect, in the README.
    """

    integrator: str | None = None
    """"euler", "rk4" or "implicitfast"; None keeps the model file's integrator."""
    solver: str = "newton"
    """Constraint solver: "newton" or "cg" (MJX has no PGS)."""
    iterations: int | None = None
    """Constraint solver iterations; None keeps the model file's value."""
    ls_iterations: int | None = None
    """Line-search iterations of the solver; None keeps the model file's value."""

    def __post_init__(self) -> None:
        if self.integrator is not None and self.integrator not in _INTEGRATORS:
            raise ValueError(f"unknown integrator {self.integrator!r}; valid: {sorted(_INTEGRATORS)}")
        if self.solver not in _SOLVERS:
            raise ValueError(f"unknown solver {self.solver!r}; valid: {sorted(_SOLVERS)}")
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

    def __init__(self, mj_model: mujoco.MjModel, frame_skip: int):
        self._mj_model = mj_model
        self._mjx_model = mjx.put_model(mj_model)
        self._frame_skip = frame_skip
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
        """`mjx.Data` at (qpos, qvel) with every derived quantity computed (like `mj_forward`).

        MJX's forward pass writes normalised quaternions back into qpos; C MuJoCo's does not, so
        qpos is restored to what was given (Gymnasium's first observation shows it unnormalised).
        """
        data = mjx.make_data(self._mjx_model).replace(qpos=qpos, qvel=qvel)
        return mjx.forward(self._mjx_model, data).replace(qpos=qpos)

    def physics_step(self, data: mjx.Data, ctrl: jax.Array) -> mjx.Data:
        """Holds `ctrl` for `frame_skip` physics substeps (Gymnasium's `do_simulation`)."""
        data = data.replace(ctrl=ctrl)

        def substep(data: mjx.Data, _: Any) -> tuple[mjx.Data, None]:
            return mjx.step(self._mjx_model, data), None

        data, _ = jax.lax.scan(substep, data, None, length=self._frame_skip)
        return data
