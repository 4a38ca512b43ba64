"""DM Control's sparse tasks in MJX: cartpole swing-up sparse, ball-in-cup catch, reacher hard
(paper Table 1, top block; appendix B.2.2), with DM Control's semantics (docs/design.md "Environments").

The models are the XML files the `dm-control` package ships (read from its installation, with its
`common/` includes; nothing is copied here), stepped by MJX with the files' physics except for the solver's iteration caps (4 and 8 instead of
100 and 50; measured to change nothing, see `DMControlConfig.iterations`). What DM Control
defines, kept:

- 1000-step episodes (10 s of cartpole at its 0.01 s physics step; 20 s of ball-in-cup at a 0.02 s
  control step = 10 physics steps of 0.002 s; 20 s of reacher at 0.02 s), no action repeat;
- never terminal: `done` is always 0 and the time limit is a truncation (always bootstrap);
- rewards in {0, 1} (`dm_control.utils.rewards.tolerance` with zero margin is an indicator of
  its bounds, edges included);
- observations: DM Control's observation dict, flattened in its order (below);
- after each step the position-dependent quantities are brought in sync with the new qpos
  (`mjx.kinematics`), as DM Control's "legacy step" does with `mj_step1`, so observations and
  rewards read the state the step reached;
- resets as DM Control's `initialize_episode` (below), each from the env's key.

Observations (flattened DM Control order):

- cartpole_swingup_sparse [5]: position = (cart x, pole xmat zz, pole xmat xz), velocity = qvel (2);
- ball_in_cup_catch [8]: position = qpos (cup x, cup z, ball x, ball z), velocity = qvel (4);
- reacher_hard [6]: position = qpos (shoulder, wrist), to_target = target xy - finger xy,
  velocity = qvel (2).

Rewards:

- cartpole: 1 when |cart x| <= 0.25 and cos(pole angle) >= 0.995;
- ball-in-cup: 1 when the ball centre is inside the cup's target box shrunk by the ball radius
  (x and z);
- reacher: 1 when the finger is within target radius + finger radius (0.015 + 0.01) of the target.

Resets:

- cartpole (swing-up): slider = 0.01 N(0,1), hinge = pi + 0.01 N(0,1), qvel = 0.01 N(0,1) each;
- ball-in-cup: cup at rest at its model position, ball x ~ U(-0.2, 0.2), z ~ U(0.2, 0.5),
  redrawn while the ball penetrates anything (DM Control loops on `ncon > 0`; here the first of
  16 candidates drawn at once whose contact distances are all >= 0, see `BallInCupCatch`);
- reacher: shoulder ~ U(-pi, pi), wrist ~ U(its range), target at radius ~ U(0.05, 0.2) and
  angle ~ U(0, 2 pi) as (r sin, r cos). DM Control moves the target geom in the model; here the
  target lives in `State.info["target"]` (redrawn at every reset: `EpisodeAutoReset` restarts the
  env's own info entries) and the observation and reward read it from there. The target geom
  has no collisions (the model disables contacts), so the physics is the same.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os

import jax
import jax.numpy as jp
import mujoco
from mujoco import mjx

from envs.base import MjxEnv, PhysicsConfig, State


def dm_control_suite_dir() -> str:
    """The installed `dm_control/suite` directory (located without importing dm_control)."""
    spec = importlib.util.find_spec("dm_control")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "the DM Control tasks read their models from the dm-control package: pip install dm-control"
        )
    return os.path.join(spec.submodule_search_locations[0], "suite")


def load_suite_model(xml_file: str) -> mujoco.MjModel:
    """DM Control's model `xml_file` with its `./common/*.xml` includes."""
    suite = dm_control_suite_dir()
    common = os.path.join(suite, "common")
    assets = {}
    for name in os.listdir(common):
        if name.endswith(".xml"):
            with open(os.path.join(common, name), "rb") as handle:
                assets[f"./common/{name}"] = handle.read()
    with open(os.path.join(suite, xml_file)) as handle:
        return mujoco.MjModel.from_xml_string(handle.read(), assets)


@dataclasses.dataclass(frozen=True)
class DMControlConfig:
    """Settings of a DM Control task; every field can be overridden through `envs.make`."""

    episode_length: int = 1000
    """Steps after which an episode is truncated (DM Control: 1000 for all three tasks)."""
    integrator: str | None = None
    """Physics integrator; None keeps the model file's (cartpole RK4, the others Euler)."""
    solver: str = "newton"
    """Constraint solver: "newton" (the files' default) or "cg"."""
    iterations: int | None = 4
    """Constraint solver iterations (files: 100); None keeps the model file's.

    4 and 2 below leave the one-step physics and every observation and reward unchanged on the
    states we measured (docs/environments.md "Our port or MuJoCo Playground's? Measured, ours"); ball-in-cup steps 5.5x faster at 256 instances on the CPU with
    4 / 8 than with the files' 100 / 50, and the solver runs a fixed 4 trips (`solver_loop`)."""
    ls_iterations: int | None = 2
    """Line-search iterations (files: 50); None keeps the model file's. 2 gives the same one-step
    physics as 8 and 50 on all three tasks (docs/environments.md "Physics changes, and their measured effect"); 1 does not (ball-in-cup)."""
    solver_loop: str = "fixed"
    """"fixed": the solver runs exactly `iterations` trips, no data-dependent loop or branch
    (`envs.mjx_solver`; same physics, measured in docs/environments.md "Physics changes, and their measured effect"); "while": MJX's own while loop."""
    math: str = "auto"
    """MJX's quaternion math: "compact" (`envs.mjx_math`: fewer operations to compile, the same
    physics to float32 rounding), "mjx" (MJX's own element-wise form), "auto" (compact on a CPU)."""
    target_size: float = 0.015
    """Reacher only: radius of the target (hard 0.015; DM Control's easy task uses 0.05)."""

    def __post_init__(self) -> None:
        if self.episode_length < 1:
            raise ValueError(f"episode_length must be >= 1, got {self.episode_length}")
        if self.target_size <= 0:
            raise ValueError(f"target_size must be > 0, got {self.target_size}")
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


class DMControlTask(MjxEnv):
    """Shared step of the three tasks; a subclass gives its model, reset, observation and reward.

    `observation(data, info)` and `reward(data, info)` are pure functions of a state whose
    position-dependent fields are in sync with qpos (`sync(data)`), so tests can check them
    against DM Control on the very same physics states.
    """

    xml_file: str
    frame_skip: int

    @staticmethod
    def default_config() -> DMControlConfig:
        return DMControlConfig()

    def __init__(self, config: DMControlConfig | None = None):
        self.config = config or self.default_config()
        self.episode_length = self.config.episode_length
        mj_model = load_suite_model(self.xml_file)
        # cartpole.xml enables energy computation, which MJX does not implement; it only fills
        # data.energy (never read by the tasks) and does not change the dynamics.
        mj_model.opt.enableflags &= ~int(mujoco.mjtEnableBit.mjENBL_ENERGY)
        self.config.physics.apply(mj_model)
        super().__init__(mj_model, self.frame_skip, self.config.solver_loop, self.config.math)

    # -- per task -------------------------------------------------------------------------------
    def sample_initial_state(self, rng: jax.Array) -> tuple[mjx.Data, dict]:
        """(synced data, the env's info entries) at the start of an episode."""
        raise NotImplementedError

    def observation(self, data: mjx.Data, info: dict) -> jax.Array:
        raise NotImplementedError

    def reward(self, data: mjx.Data, info: dict) -> jax.Array:
        raise NotImplementedError

    def position_metrics(self, data: mjx.Data, info: dict) -> dict[str, jax.Array]:
        """Scalars that say where the system is (logged as visits, e.g. for exploration plots)."""
        raise NotImplementedError

    # -- shared -----------------------------------------------------------------------------------
    def sync(self, data: mjx.Data) -> mjx.Data:
        """Position-dependent fields (xpos, xmat, site and geom poses) at the current qpos."""
        return mjx.kinematics(self._mjx_model, data)

    def reset(self, rng: jax.Array) -> State:
        data, info = self.sample_initial_state(rng)
        zero = jp.zeros(())
        return State(
            pipeline_state=data,
            obs=self.observation(data, info),
            reward=zero,
            done=zero,
            metrics=self.position_metrics(data, info),
            info=info,
        )

    def step(self, state: State, action: jax.Array) -> State:
        data = self.sync(self.physics_step(state.pipeline_state, self.action_to_ctrl(action)))
        return state.replace(
            pipeline_state=data,
            obs=self.observation(data, state.info),
            reward=self.reward(data, state.info),
            done=jp.zeros(()),  # never terminal (DM Control's semantics)
            metrics={**state.metrics, **self.position_metrics(data, state.info)},
        )


def _indicator(value: jax.Array, low: float, high: float) -> jax.Array:
    """`rewards.tolerance(value, (low, high))` with zero margin: 1 inside [low, high], else 0."""
    return jp.logical_and(value >= low, value <= high).astype(jp.float32)


class CartpoleSwingupSparse(DMControlTask):
    """DM Control `cartpole.swingup_sparse`: 5 observations, 1 action (slider force, gear 10)."""

    xml_file = "cartpole.xml"
    frame_skip = 1  # control step = physics step = 0.01 s
    render_camera = "fixed"

    def __init__(self, config: DMControlConfig | None = None):
        super().__init__(config)
        self._pole = self._mj_model.body("pole_1").id

    def sample_initial_state(self, rng: jax.Array) -> tuple[mjx.Data, dict]:
        noise = 0.01 * jax.random.normal(rng, (4,))  # one draw: slider, hinge, their velocities
        qpos = jp.array([0.0, math.pi]) + noise[:2]
        return self.data_from_state(qpos, noise[2:]), {}

    def pole_angle_cosine(self, data: mjx.Data) -> jax.Array:
        return data.xmat[self._pole, 2, 2]

    def observation(self, data: mjx.Data, info: dict) -> jax.Array:
        xmat = data.xmat[self._pole]
        return jp.stack([data.qpos[0], xmat[2, 2], xmat[0, 2], data.qvel[0], data.qvel[1]])

    def reward(self, data: mjx.Data, info: dict) -> jax.Array:
        return _indicator(data.qpos[0], -0.25, 0.25) * _indicator(self.pole_angle_cosine(data), 0.995, 1.0)

    def position_metrics(self, data: mjx.Data, info: dict) -> dict[str, jax.Array]:
        # The pole angle from upright, wrapped to [-pi, pi) (0 = upright, +-pi = hanging down).
        angle = jp.mod(data.qpos[1] + math.pi, 2 * math.pi) - math.pi
        return {"cart_position": data.qpos[0], "pole_angle": angle}


class BallInCupCatch(DMControlTask):
    """DM Control `ball_in_cup.catch`: 8 observations, 2 actions (cup x and z forces)."""

    xml_file = "ball_in_cup.xml"
    frame_skip = 10  # control step 0.02 s = 10 physics steps of 0.002 s
    render_camera = "cam0"

    def __init__(self, config: DMControlConfig | None = None):
        super().__init__(config)
        model = self._mj_model
        self._ball = model.body("ball").id
        self._target = model.site("target").id
        ball_radius = float(model.geom_size[model.geom("ball").id, 0])
        target_half = model.site_size[self._target][[0, 2]]
        self._inside = jp.asarray(target_half - ball_radius, jp.float32)  # [x, z]

    reset_candidates: int = 16
    """Ball positions drawn per reset; the first that penetrates nothing is used (below)."""

    def sample_initial_state(self, rng: jax.Array) -> tuple[mjx.Data, dict]:
        # DM Control redraws the ball while it penetrates anything (~15 % of draws touch the
        # cup). A loop that runs until success has a data-dependent trip count (a host round
        # trip per trip on a GPU), so a fixed batch of candidates is drawn and checked at once
        # and the first one clear of contact is taken: the same distribution as drawing until
        # success, except when all 16 fail (measured probability ~1e-13), when the last is used.
        balls = jax.random.uniform(
            rng, (self.reset_candidates, 2), minval=jp.array([-0.2, 0.2]), maxval=jp.array([0.2, 0.5])
        )

        def qpos_of(ball):
            return jp.zeros(4).at[2:].set(ball)

        def penetrating(ball):
            data = mjx.collision(self._mjx_model, self.data_from_state(qpos_of(ball), jp.zeros(4)))
            return jp.any(data._impl.contact.dist < 0)

        clear = jp.logical_not(jax.vmap(penetrating)(balls))
        chosen = jp.where(jp.any(clear), jp.argmax(clear), self.reset_candidates - 1)
        return self.data_from_state(qpos_of(balls[chosen]), jp.zeros(4)), {}

    def ball_to_target(self, data: mjx.Data) -> jax.Array:
        """Target site minus ball centre, (x, z)."""
        return data.site_xpos[self._target][jp.array([0, 2])] - data.xpos[self._ball][jp.array([0, 2])]

    def observation(self, data: mjx.Data, info: dict) -> jax.Array:
        return jp.concatenate([data.qpos, data.qvel])

    def reward(self, data: mjx.Data, info: dict) -> jax.Array:
        return jp.all(jp.abs(self.ball_to_target(data)) < self._inside).astype(jp.float32)

    def position_metrics(self, data: mjx.Data, info: dict) -> dict[str, jax.Array]:
        relative = -self.ball_to_target(data)  # ball relative to the cup's target
        return {"ball_x": relative[0], "ball_z": relative[1]}


class ReacherHard(DMControlTask):
    """DM Control `reacher.hard`: 6 observations, 2 actions (shoulder and wrist torques)."""

    xml_file = "reacher.xml"
    frame_skip = 1  # control step = physics step = 0.02 s
    render_camera = "fixed"

    def __init__(self, config: DMControlConfig | None = None):
        super().__init__(config)
        model = self._mj_model
        self._finger = model.geom("finger").id
        self._target_geom = model.geom("target").id
        self._radii = self.config.target_size + float(model.geom_size[self._finger, 0])
        wrist = model.joint("wrist").id
        self._wrist_range = tuple(float(v) for v in model.jnt_range[wrist])

    def sample_initial_state(self, rng: jax.Array) -> tuple[mjx.Data, dict]:
        # One draw for all four (a reset is computed every step; each draw is a GPU kernel):
        # shoulder, wrist, target angle, target radius.
        low = jp.array([-math.pi, self._wrist_range[0], 0.0, 0.05])
        high = jp.array([math.pi, self._wrist_range[1], 2 * math.pi, 0.20])
        shoulder, wrist, angle, radius = jax.random.uniform(rng, (4,), minval=low, maxval=high)
        target = jp.stack([radius * jp.sin(angle), radius * jp.cos(angle)])
        return self.data_from_state(jp.stack([shoulder, wrist]), jp.zeros(2)), {"target": target}

    def render_fields(self, state: State) -> dict[str, jax.Array]:
        # The episode's target is drawn where DM Control puts it (the target geom's x, y), at the
        # task's size (DM Control sets the geom's radius to it; here only the reward reads it).
        geom_pos = self._mjx_model.geom_pos.at[self._target_geom, :2].set(state.info["target"])
        geom_size = self._mjx_model.geom_size.at[self._target_geom, 0].set(self.config.target_size)
        return {**super().render_fields(state), "model.geom_pos": geom_pos, "model.geom_size": geom_size}

    def finger_to_target(self, data: mjx.Data, info: dict) -> jax.Array:
        return info["target"] - data.geom_xpos[self._finger, :2]

    def observation(self, data: mjx.Data, info: dict) -> jax.Array:
        return jp.concatenate([data.qpos, self.finger_to_target(data, info), data.qvel])

    def reward(self, data: mjx.Data, info: dict) -> jax.Array:
        distance = jp.linalg.norm(self.finger_to_target(data, info))
        return _indicator(distance, 0.0, self._radii)

    def position_metrics(self, data: mjx.Data, info: dict) -> dict[str, jax.Array]:
        finger = data.geom_xpos[self._finger, :2]
        return {"finger_x": finger[0], "finger_y": finger[1]}
