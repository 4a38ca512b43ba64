"""Ant, Hopper and Humanoid in MJX with Gymnasium v4 semantics, dense or reward-delayed.

Observation, reward and termination follow Gymnasium's `Ant-v4`, `Hopper-v4` and `Humanoid-v4`
on the model files Gymnasium ships (docs/design.md "Environments"). The delayed variants of the paper (section 4,
Table 3) replace the reward entirely by

    r = 1[x >= c] * v - w_a * ||a||^2,

x = qpos[0] and v = qvel[0] of the root after the step, a the action in [-1, 1]; no healthy
reward, termination when unhealthy kept.

Each env exposes the pure functions `observation(data)`, `reward(prev_data, data, action)` and
`terminated(data)` of `mjx.Data`; `step` is built from them, so they can be checked against
Gymnasium on the very same MuJoCo states.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from typing import ClassVar

import gymnasium
import jax
import jax.numpy as jp
import mujoco
from flax import struct
from mujoco import mjx

from envs.base import MjxEnv, PhysicsConfig, State

GYMNASIUM_ASSETS = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")


@dataclasses.dataclass(frozen=True)
class LocomotionConfig:
    """Task parameters of a locomotion env; every field can be overridden through `envs.make`."""

    TASK_FIELDS: ClassVar[tuple[str, ...]] = ("delay_threshold", "action_cost_weight", "healthy_reward", "forward_reward_weight")
    """The reward constants that `LocomotionTask` carries as arrays: tasks of one robot that differ
    only in these share one compiled program (`envs.make_family`)."""

    delay_threshold: float | None = None
    """c of the delayed reward 1[x >= c] v - w_a ||a||^2; None gives Gymnasium v4's dense reward."""
    action_cost_weight: float = 0.5
    """w_a: weight of the squared action (dense Humanoid: of the squared control, as v4)."""
    healthy_reward: float = 1.0
    """Dense reward paid every step (v4 pays it on the terminating step too)."""
    forward_reward_weight: float = 1.0
    """Dense reward per unit forward velocity."""
    reset_noise_scale: float = 0.1
    """Scale of the noise added to the initial qpos and qvel (distribution per robot, as v4)."""
    terminate_when_unhealthy: bool = True
    """End the episode (terminated, no bootstrap) when the robot leaves its healthy range."""
    episode_length: int = 1000
    """Steps after which an episode is truncated (by `envs.wrappers.EpisodeAutoReset`)."""
    integrator: str | None = None
    """Physics integrator: "rk4", "euler" or "implicitfast"; None keeps the model file's (RK4)."""
    solver: str = "newton"
    """Constraint solver: "newton" or "cg" (MJX has no PGS)."""
    iterations: int | None = 4
    """Constraint solver iterations (files: 100, Humanoid 50); None keeps the model file's.

    4 (with 2 line-search iterations below) leaves the one-step physics unchanged on the states
    we measured, and the solver then runs a fixed 4 trips (`solver_loop`); 3 or 2 iterations, or
    1 line-search iteration, double Ant's deviation from C MuJoCo (docs/environments.md "Physics changes, and their measured effect")."""
    ls_iterations: int | None = 2
    """Solver line-search iterations (files: 50); None keeps the model file's. 2 gives the same
    one-step physics as 8 and 50 on every robot (docs/environments.md "Physics changes, and their measured effect") at half the ops of an Ant step."""
    solver_loop: str = "fixed"
    """"fixed": the solver runs exactly `iterations` trips, no data-dependent loop or branch
    (`envs.mjx_solver`; same physics, measured in docs/environments.md "Physics changes, and their measured effect"); "while": MJX's own while loop."""
    math: str = "auto"
    """MJX's quaternion math: "compact" (`envs.mjx_math`: fewer operations to compile, the same
    physics to float32 rounding), "mjx" (MJX's own element-wise form), "auto" (compact on a CPU)."""

    def __post_init__(self) -> None:
        # Checked here, so `envs.config_of` rejects a bad value before any model is built.
        if self.episode_length < 1:
            raise ValueError(f"episode_length must be >= 1, got {self.episode_length}")
        if self.reset_noise_scale < 0:
            raise ValueError(f"reset_noise_scale must be >= 0, got {self.reset_noise_scale}")
        if self.action_cost_weight < 0:
            raise ValueError(f"action_cost_weight must be >= 0, got {self.action_cost_weight}")
        self.physics  # noqa: B018 - validates the solver settings

    @property
    def physics(self) -> PhysicsConfig:
        return PhysicsConfig(
            integrator=self.integrator,
            solver=self.solver,
            iterations=self.iterations,
            ls_iterations=self.ls_iterations,
            solver_loop=self.solver_loop,
            math=self.math,
        )


@struct.dataclass
class LocomotionTask:
    """A locomotion task's reward constants as arrays (`LocomotionConfig.TASK_FIELDS`), so they
    can be traced: the members of one program may train on ant, ant_delayed and
    ant_very_delayed at once (`Locomotion.with_task`)."""

    delayed: jax.Array
    """1.0 for the delayed reward 1[x >= c] v - w_a ||a||^2, 0.0 for Gymnasium's dense reward."""
    delay_threshold: jax.Array
    """c (read when delayed)."""
    action_cost_weight: jax.Array
    healthy_reward: jax.Array
    forward_reward_weight: jax.Array


class Locomotion(MjxEnv):
    """Shared step and reward logic; a robot subclass gives its model, observation and health."""

    xml_file: str
    root_is_free: bool
    """True when qpos starts with a free joint (x, y, z, quaternion); False for planar robots."""
    frame_skip: int
    render_camera = "track"  # every Gymnasium robot's model has it: it follows the centre of mass

    def __init__(self, config: LocomotionConfig):
        self.config = config
        self.episode_length = config.episode_length
        mj_model = mujoco.MjModel.from_xml_path(os.path.join(GYMNASIUM_ASSETS, self.xml_file))
        config.physics.apply(mj_model)
        super().__init__(mj_model, self.frame_skip, config.solver_loop, config.math)
        self._task = self.task_params()

    # -- task constants -------------------------------------------------------------------------
    def task_params(self) -> LocomotionTask:
        """This env's reward constants (from its config) as float32 arrays."""
        cfg = self.config

        def value(x):
            return jp.asarray(x, jp.float32)

        return LocomotionTask(
            delayed=value(cfg.delay_threshold is not None),
            delay_threshold=value(cfg.delay_threshold or 0.0),
            action_cost_weight=value(cfg.action_cost_weight),
            healthy_reward=value(cfg.healthy_reward),
            forward_reward_weight=value(cfg.forward_reward_weight),
        )

    def with_task(self, task: LocomotionTask) -> Locomotion:
        """This env (same model, same physics) with the reward constants `task`, which may be
        traced values, e.g. one member's of a vmapped program."""
        env = copy.copy(self)
        env._task = task
        return env

    # -- pure functions of mjx.Data, overridden per robot ------------------------------------
    def observation(self, data: mjx.Data) -> jax.Array:
        raise NotImplementedError

    def is_healthy(self, data: mjx.Data) -> jax.Array:
        raise NotImplementedError

    def forward_position(self, data: mjx.Data) -> jax.Array:
        """The x coordinate whose finite difference is the dense reward's forward velocity."""
        raise NotImplementedError

    def control_cost(self, data: mjx.Data, action: jax.Array) -> jax.Array:
        """Dense control cost: v4 weighs the squared action (Humanoid: the squared control)."""
        return self._task.action_cost_weight * jp.sum(jp.square(action))

    def sample_initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(qpos, qvel) at reset: qpos0 plus uniform noise, zero velocity plus `initial_velocity_noise`.

        All of it comes from one draw of nq + nv uniforms in (-1, 1): a reset is computed on
        every step (`envs.wrappers`), and each random draw is a kernel of its own on a GPU."""
        nq, nv = self._mj_model.nq, self._mj_model.nv
        unit = jax.random.uniform(rng, (nq + nv,), minval=jp.nextafter(-1.0, 0.0), maxval=1.0)
        qpos = self._mjx_model.qpos0 + self.config.reset_noise_scale * unit[:nq]
        return qpos, self.initial_velocity_noise(unit[nq:])

    def initial_velocity_noise(self, unit: jax.Array) -> jax.Array:
        """qvel at reset from uniforms in (-1, 1): uniform in +-reset_noise_scale (v4's Hopper and
        Humanoid)."""
        return self.config.reset_noise_scale * unit

    # -- reward and termination ---------------------------------------------------------------
    def reward(self, prev_data: mjx.Data, data: mjx.Data, action: jax.Array) -> jax.Array:
        """Reward of the transition prev_data -> data under `action` in [-1, 1], with this env's
        task constants (`with_task`): the delayed or the dense reward."""
        task = self._task
        action = jp.clip(action, -1.0, 1.0)
        past_threshold = (data.qpos[0] >= task.delay_threshold).astype(jp.float32)
        delayed = past_threshold * data.qvel[0] - task.action_cost_weight * jp.sum(jp.square(action))
        velocity = (self.forward_position(data) - self.forward_position(prev_data)) / self.dt
        healthy = jp.logical_or(self.is_healthy(data), self.config.terminate_when_unhealthy)
        dense = (
            task.forward_reward_weight * velocity
            + task.healthy_reward * healthy.astype(jp.float32)
            - self.control_cost(data, action)
        )
        return jp.where(task.delayed > 0, delayed, dense)

    def terminated(self, data: mjx.Data) -> jax.Array:
        if not self.config.terminate_when_unhealthy:
            return jp.zeros((), dtype=bool)
        return jp.logical_not(self.is_healthy(data))

    def position_metrics(self, data: mjx.Data) -> dict[str, jax.Array]:
        """Where the root is (reported in `State.metrics`, e.g. for exploration plots): the
        free-joint robots report x and y, the planar Hopper x and z."""
        if self.root_is_free:
            return {"x_position": data.qpos[0], "y_position": data.qpos[1]}
        return {"x_position": data.qpos[0], "z_position": data.qpos[1]}

    # -- Brax Env -----------------------------------------------------------------------------
    def reset(self, rng: jax.Array) -> State:
        qpos, qvel = self.sample_initial_state(rng)
        data = self.data_from_state(qpos, qvel)
        zero = jp.zeros(())
        return State(
            pipeline_state=data,
            obs=self.observation(data),
            reward=zero,
            done=zero,
            metrics={**self.position_metrics(data), "x_velocity": zero},
        )

    def step(self, state: State, action: jax.Array) -> State:
        prev_data = state.pipeline_state
        data = self.physics_step(prev_data, self.action_to_ctrl(action))
        x_velocity = (data.qpos[0] - prev_data.qpos[0]) / self.dt
        return state.replace(
            pipeline_state=data,
            obs=self.observation(data),
            reward=self.reward(prev_data, data, action),
            done=self.terminated(data).astype(jp.float32),
            # Update rather than replace: wrappers (Brax's among them) add their own metrics.
            metrics={**state.metrics, **self.position_metrics(data), "x_velocity": x_velocity},
        )


class Ant(Locomotion):
    """Gymnasium Ant-v4: 27 observations (qpos[2:], qvel; no contact forces), 8 actions."""

    xml_file = "ant.xml"
    root_is_free = True
    frame_skip = 5

    @staticmethod
    def default_config() -> LocomotionConfig:
        return LocomotionConfig(action_cost_weight=0.5, reset_noise_scale=0.1)

    def __init__(self, config: LocomotionConfig | None = None):
        super().__init__(config or self.default_config())
        self._torso = self._mj_model.body("torso").id

    def observation(self, data: mjx.Data) -> jax.Array:
        return jp.concatenate([data.qpos[2:], data.qvel])

    def is_healthy(self, data: mjx.Data) -> jax.Array:
        finite = jp.all(jp.isfinite(data.qpos)) & jp.all(jp.isfinite(data.qvel))
        z = data.qpos[2]
        return finite & (z >= 0.2) & (z <= 1.0)

    def forward_position(self, data: mjx.Data) -> jax.Array:
        return data.xpos[self._torso, 0]

    def initial_velocity_noise(self, unit: jax.Array) -> jax.Array:
        # v4's Ant: qvel = scale * standard normal (qpos noise uniform, as the others); a uniform
        # u in (-1, 1) gives sqrt(2) erfinv(u) ~ N(0, 1), as `jax.random.normal` computes it.
        return self.config.reset_noise_scale * jp.sqrt(2.0) * jax.scipy.special.erfinv(unit)


class Hopper(Locomotion):
    """Gymnasium Hopper-v4: 11 observations (qpos[1:], clip(qvel, -10, 10)), 3 actions."""

    xml_file = "hopper.xml"
    root_is_free = False  # slide x, slide z, hinge y
    frame_skip = 4

    @staticmethod
    def default_config() -> LocomotionConfig:
        return LocomotionConfig(action_cost_weight=1e-3, reset_noise_scale=5e-3)

    def __init__(self, config: LocomotionConfig | None = None):
        super().__init__(config or self.default_config())

    def observation(self, data: mjx.Data) -> jax.Array:
        return jp.concatenate([data.qpos[1:], jp.clip(data.qvel, -10.0, 10.0)])

    def is_healthy(self, data: mjx.Data) -> jax.Array:
        z, angle = data.qpos[1], data.qpos[2]
        state = jp.concatenate([data.qpos[2:], data.qvel])
        healthy_state = jp.all((state > -100.0) & (state < 100.0))
        return healthy_state & (z > 0.7) & (angle > -0.2) & (angle < 0.2)

    def forward_position(self, data: mjx.Data) -> jax.Array:
        return data.qpos[0]


class Humanoid(Locomotion):
    """Gymnasium Humanoid-v4: 376 observations, 17 actions (control range +-0.4).

    The observation is qpos[2:], qvel, cinert, cvel, qfrc_actuator and cfrc_ext; cfrc_ext is
    kept as zeros, as v4 produced it before Gymnasium 1.0 (docs/design.md "Environments").
    """

    xml_file = "humanoid.xml"
    root_is_free = True
    frame_skip = 5

    @staticmethod
    def default_config() -> LocomotionConfig:
        return LocomotionConfig(
            action_cost_weight=0.1,
            healthy_reward=5.0,
            forward_reward_weight=1.25,
            reset_noise_scale=1e-2,
        )

    def __init__(self, config: LocomotionConfig | None = None):
        super().__init__(config or self.default_config())
        masses = self._mj_model.body_mass.astype("float32")
        self._mass_fraction = jp.asarray(masses / masses.sum())

    def observation(self, data: mjx.Data) -> jax.Array:
        impl = data._impl  # MJX keeps the composite-body quantities on its implementation part
        return jp.concatenate(
            [
                data.qpos[2:],
                data.qvel,
                impl.cinert.ravel(),
                data.cvel.ravel(),
                data.qfrc_actuator,
                jp.zeros(self._mj_model.nbody * 6),
            ]
        )

    def is_healthy(self, data: mjx.Data) -> jax.Array:
        z = data.qpos[2]
        return (z > 1.0) & (z < 2.0)

    def forward_position(self, data: mjx.Data) -> jax.Array:
        # Centre of mass: body masses times the bodies' centres of mass (xipos).
        return self._mass_fraction @ data.xipos[:, 0]

    def control_cost(self, data: mjx.Data, action: jax.Array) -> jax.Array:
        return self._task.action_cost_weight * jp.sum(jp.square(data.ctrl))
