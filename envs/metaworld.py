"""Meta-World's seven sparse tasks in MJX (paper Table 2), with Meta-World 3.0.0's semantics.

window-close, window-open, drawer-close, drawer-open, reach, button-press-topdown and door-open,
as the paper runs them: MT1 with the goal hidden and drawn afresh for every episode, reward 1 on
success and 0 otherwise, 500-step episodes (docs/metaworld.md "Meta-World (paper Table 2)"). The models are Meta-World's own
files, read from the installed `metaworld==3.0.0` and hash-checked (`envs.metaworld_model`), with
stand-ins for the collision pairs MJX lacks and only the contact pairs that can touch.

What Meta-World 3.0.0 defines (`metaworld/sawyer_xyz_env.py` and `metaworld/envs/*_v3.py`), kept:

- action [4] in [-1, 1] (clipped): the mocap body moves by 0.01 x action[:3] (clipped to the
  box (-0.5, 0.4, 0.05)..(0.5, 1.0, 0.5)) with its quaternion held at (1, 0, 1, 0); the two
  finger actuators get (action[3], -action[3]); 5 physics steps of 2.5 ms per env step;
- after the physics the position-dependent fields are recomputed (Meta-World's `mj_forward`);
- physics as the files (Euler, 2.5 ms, Newton) except: pyramidal friction cones where the files
  have elliptic ones (MJX's elliptic Newton solve is ~60x slower on the CPU), and 4 solver and
  4 line-search iterations run as fixed trips (files: 50 / 50); both measured (docs/metaworld.md "Model changes for MJX, and their measured effect"); box
  contacts within their margin and midway between the surfaces, as C MuJoCo reports them
  (`box_margins`, `envs.mjx_collision`); the window's and drawer's capsule bars as boxes
  (`capsule_stand_ins`: MJX loses a capsule's contact past its radius);
- observation [39]: hand position, gripper opening (finger distance / 0.1, clipped to [0, 1]),
  the task's object position and quaternion (padded to 14), the same 18 values from the previous
  step, and the goal, zeroed because it is hidden (`hidden_goal=False` shows it, as Meta-World's
  goal-observable envs do). Each step clips the observation to Meta-World's observation space
  (the hand to (-0.525, 0.348, -0.0525)..(0.525, 1.025, 0.7)); the reset observation is not
  clipped, and its previous frame is a copy of its current one;
- success as each task's `evaluate_state` computes it (below); the reward is success in {0, 1};
  never terminal, truncated after 500 steps (`max_path_length`);
- reset: Meta-World first drives the hand for 50 env steps to its start (`_reset_hand`) from
  `mj_resetData`, a state that does not depend on the episode; it is computed once, here, with C
  MuJoCo on the unmodified model and Meta-World's solver settings (`hand_reset_state`), and every
  episode starts from it. Then each task draws its random vector uniformly from its
  `_random_reset_space` (below) and places its object and goal.

Two quirks of Meta-World's reset are reproduced because they show in the observations:

- `SawyerXYZEnv.reset` runs `reset_model` twice (once itself, once through Gymnasium's
  `MujocoEnv.reset`), drawing two random vectors; the episode uses the second, and the first
  stays in the model (the moved body's position) while the hand is driven to its start;
- window-open, window-close and drawer-open read their first observation without a forward pass
  after the reset moved things, so it shows the positions MuJoCo computed at the start of the
  hand drive's last physics step, with the object body at the first draw's position
  (`stale_first_observation`). The other four tasks call `mj_forward` (through `set_state` or
  directly) and show the reset state itself.

Per task (rand = the random vector; targets as Meta-World's `_target_pos`):

| task | rand range | object (obs[4:11]) | reset | success |
|---|---|---|---|---|
| window_close | (0, 0.75, 0.2)..(0, 0.9, 0.2) | site handleCloseStart, quat 0 | window body at rand, slide 0.2, target rand | abs(handle x - target x) <= 0.05 |
| window_open | (-0.1, 0.7, 0.16)..(0.1, 0.9, 0.16) | site handleOpenStart, quat 0 | window body at rand, slide 0, target rand + (0.2, 0, 0) | abs(handle x - target x) <= 0.05 |
| drawer_close | (-0.1, 0.9, 0)..(0.1, 0.9, 0) | drawer_link pos + (0, -0.16, 0.05), quat 0 | drawer body at rand, slide -0.15, target rand + (0, -0.16, 0.09) | norm(obj - target) <= 0.065 |
| drawer_open | as drawer_close | drawer_link pos + (0, -0.16, 0), its xquat | drawer body at rand, target rand + (0, -0.36, 0.09) | norm(obj - target) <= 0.03 |
| reach | puck (-0.1, 0.6, 0.02)..(0.1, 0.7, 0.02), goal (-0.1, 0.8, 0.05)..(0.1, 0.9, 0.3) | puck body pos, geom quat (x, y, z, w) | puck at rand[:3] (redrawn while within 0.15 of the goal in xy), target rand[3:] | norm(tcp - target) <= 0.05 |
| button_press_topdown | (-0.1, 0.8, 0.115)..(0.1, 0.9, 0.115) | button body pos + (0, 0, 0.193), its xquat | box body at rand, target = site "hole" | abs(obj z - target z) <= 0.024 |
| door_open | (0, 0.85, 0.15)..(0.1, 0.95, 0.15) | handle geom, geom quat (x, y, z, w) | door body at rand, hinge 0, target rand + (-0.3, -0.45, 0) | abs(obj x - target x) <= 0.08 |

tcp = the midpoint of the sites rightEndEffector and leftEndEffector; "pos" of a body is its frame's
position (`xpos`: Gymnasium's `get_body_com` returns that, not the centre of mass). "geom quat (x, y, z, w)" is
`scipy.spatial.transform.Rotation.from_matrix(geom_xmat).as_quat()`, reproduced in `_scipy_quat`.

Meta-World moves the object's body in the *model* at reset; here its position lives in
`State.info["body_pos"]` and each step simulates the model with that body position (`model_for`),
so instances of a batch hold different layouts under one program.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from typing import Any, ClassVar

import jax
import jax.numpy as jp
import mujoco
import numpy as np
from mujoco import mjx

from envs import metaworld_model, mjx_body_tree, mjx_collision
from envs.base import MjxEnv, PhysicsConfig, State

HAND_RESET_STEPS = 50
"""Env steps of Meta-World's `_reset_hand`."""
FRAME_SKIP = 5
ACTION_SCALE = 0.01
MOCAP_LOW = (-0.5, 0.40, 0.05)
MOCAP_HIGH = (0.5, 1.0, 0.5)
"""The mocap box: Meta-World's hand_low/hand_high, the same for the seven tasks."""
HAND_OBS_LOW = (-0.525, 0.348, -0.0525)
HAND_OBS_HIGH = (0.525, 1.025, 0.7)
"""`SawyerXYZEnv._HAND_SPACE`: the observation space's bounds for the hand position."""
MOCAP_QUAT = (1.0, 0.0, 1.0, 0.0)
"""Meta-World writes this (unnormalised) quaternion to the mocap body at every step."""
CONES = {"pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL, "elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC}
FRAME_SIZE = 18
"""Hand (3), gripper (1), object position and quaternion padded to 14."""


@dataclasses.dataclass(frozen=True)
class MetaWorldConfig:
    """Settings of a Meta-World task; every field can be overridden through `envs.make`."""

    episode_length: int = 500
    """Steps after which an episode is truncated (Meta-World's `max_path_length`)."""
    hidden_goal: bool = True
    """Zero the goal in the observation (MT1 with hidden goals, the paper's setting)."""
    iterations: int | None = 4
    """Constraint solver iterations (files: 50); None keeps the model file's. docs/metaworld.md "Model changes for MJX, and their measured effect"
    gives the measured one-step deviation from C MuJoCo at each setting."""
    ls_iterations: int | None = 4
    """Line-search iterations (files: 50); None keeps the model file's."""
    solver_loop: str = "fixed"
    """"fixed": exactly `iterations` solver trips, no data-dependent loop (`envs.mjx_solver`);
    "while": MJX's own while loop."""
    math: str = "auto"
    """MJX's quaternion math: "compact" (`envs.mjx_math`: fewer operations to compile, the same
    physics to float32 rounding), "mjx" (MJX's own element-wise form), "auto" (compact on a CPU)."""
    cone: str = "pyramidal"
    """Friction cone: "pyramidal" or "elliptic" (Meta-World's files). MJX's Newton solve with
    elliptic cones took 1.25 s per forward pass of window-close on the CPU against 20 ms with
    pyramidal cones (docs/metaworld.md "Model changes for MJX, and their measured effect": the deviation and success it costs are measured)."""
    body_tree_barriers: bool = True
    """One fusion boundary per level of MJX's body-tree passes (`envs.mjx_body_tree`): the
    Sawyer's 13-level tree otherwise makes XLA recompute each level once per level below it."""
    stand_ins: bool = True
    """Replace the collision geoms MJX cannot collide by measured stand-ins
    (`envs.metaworld_model`); False fails in `mjx.put_model` for every task but the drawers."""
    capsule_stand_ins: bool = True
    """Replace the window's and drawer's capsule handle bars by boxes: MJX's capsule collider drops
    the contact once the hand sinks deeper than the capsule's radius, and the hand passes through
    (`envs.metaworld_model.CAPSULE_STAND_INS`; False keeps Meta-World's capsules)."""
    box_margins: bool = True
    """Box pairs report contacts within their margin, as C MuJoCo does (`envs.mjx_collision`; MJX's
    own box manifold only reports penetrating points, so the gripper's 1 mm margins had no effect
    and the hand sank through the pressed button). False keeps MJX's manifold."""
    prune_pairs: bool = True
    """Keep only the contact pairs that can touch in the task (`envs.metaworld_model`)."""
    gripper_hull_vertices: int | None = metaworld_model.GRIPPER_HULL_VERTICES
    """Cap on the vertices of the gripper mesh's collision hull (the file's has 883; None keeps
    it): MJX's box-mesh test runs over every face and edge of the hull for every pair
    (`envs.metaworld_model.GRIPPER_HULL_VERTICES`)."""

    def __post_init__(self) -> None:
        if self.episode_length < 1:
            raise ValueError(f"episode_length must be >= 1, got {self.episode_length}")
        if self.cone not in CONES:
            raise ValueError(f"unknown cone {self.cone!r}; valid: {', '.join(CONES)}")
        metaworld_model.check_gripper_hull_vertices(self.gripper_hull_vertices)
        self.physics  # noqa: B018 - validates the solver settings

    @property
    def physics(self) -> PhysicsConfig:
        return PhysicsConfig(
            solver="newton", iterations=self.iterations, ls_iterations=self.ls_iterations, solver_loop=self.solver_loop,
            math=self.math,
        )


@dataclasses.dataclass(frozen=True)
class HandReset:
    """The state Meta-World's `_reset_hand` leaves (C MuJoCo, float64), and the positions at the
    start of its last physics step (what a reset without a forward pass observes)."""

    qpos: np.ndarray
    qvel: np.ndarray
    qacc_warmstart: np.ndarray
    mocap_pos: np.ndarray
    mocap_quat: np.ndarray
    qpos_before_last_step: np.ndarray


def hand_reset_state(model: mujoco.MjModel, hand_init_pos: tuple[float, float, float]) -> HandReset:
    """Runs Meta-World's `_reset_hand` from `mj_resetData` in C MuJoCo: 50 times, the mocap body to
    `hand_init_pos` with quaternion (1, 0, 1, 0), fingers (-1, 1), 5 physics steps."""
    data = mujoco.MjData(model)
    mujoco.mj_resetData(model, data)
    mocap = model.body_mocapid[model.body("mocap").id]
    before_last = data.qpos.copy()
    for _ in range(HAND_RESET_STEPS):
        data.mocap_pos[mocap] = hand_init_pos
        data.mocap_quat[mocap] = MOCAP_QUAT
        data.ctrl[:] = (-1.0, 1.0)
        for _ in range(FRAME_SKIP):
            before_last = data.qpos.copy()
            mujoco.mj_step(model, data)
    return HandReset(
        qpos=data.qpos.copy(),
        qvel=data.qvel.copy(),
        qacc_warmstart=data.qacc_warmstart.copy(),
        mocap_pos=data.mocap_pos.copy(),
        mocap_quat=data.mocap_quat.copy(),
        qpos_before_last_step=before_last,
    )


def _scipy_quat(mat: jax.Array) -> jax.Array:
    """`scipy.spatial.transform.Rotation.from_matrix(mat).as_quat()`: (x, y, z, w), by the same
    case analysis (the largest of the diagonal and the trace picks the formula) and sign."""
    m = mat.reshape(3, 3)
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    decision = jp.stack([m[0, 0], m[1, 1], m[2, 2], trace])
    choice = jp.argmax(decision)
    candidates = [
        jp.stack([1 - trace + 2 * m[0, 0], m[1, 0] + m[0, 1], m[2, 0] + m[0, 2], m[2, 1] - m[1, 2]]),
        jp.stack([m[0, 1] + m[1, 0], 1 - trace + 2 * m[1, 1], m[2, 1] + m[1, 2], m[0, 2] - m[2, 0]]),
        jp.stack([m[0, 2] + m[2, 0], m[1, 2] + m[2, 1], 1 - trace + 2 * m[2, 2], m[1, 0] - m[0, 1]]),
        jp.stack([m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1], 1 + trace]),
    ]
    quat = jp.stack(candidates)[choice]
    return quat / jp.linalg.norm(quat)


class MetaWorldTask(MjxEnv):
    """The Sawyer arm with mocap control shared by the seven tasks; a subclass gives its model,
    random reset space, object observation, reset edits and success (module docstring)."""

    metaworld_name: ClassVar[str]
    """The Meta-World environment this task reproduces, e.g. "drawer-open-v3"."""
    hand_init_pos: ClassVar[tuple[float, float, float]]
    random_low: ClassVar[tuple[float, ...]]
    random_high: ClassVar[tuple[float, ...]]
    moved_body: ClassVar[str | None] = None
    """The body Meta-World places at the random position in the model at reset."""
    stale_first_observation: ClassVar[bool] = False
    reports_success: ClassVar[bool] = True
    """Reward = Meta-World's success in {0, 1}; an episode succeeded iff its return is > 0."""
    render_camera = "corner"

    @staticmethod
    def default_config() -> MetaWorldConfig:
        return MetaWorldConfig()

    def __init__(self, config: MetaWorldConfig | None = None):
        self.config = config or self.default_config()
        self.episode_length = self.config.episode_length
        model = metaworld_model.load_model(
            self.metaworld_name,
            stand_ins=self.config.stand_ins,
            capsule_stand_ins=self.config.capsule_stand_ins,
            prune_pairs=self.config.prune_pairs,
            gripper_hull_vertices=self.config.gripper_hull_vertices,
        )
        self.config.physics.apply(model)
        model.opt.cone = CONES[self.config.cone]
        if self.config.body_tree_barriers:
            mjx_body_tree.check_mjx_version()
        self._margin_limit = mjx_collision.largest_pair_margin(model) if self.config.box_margins else 0.0
        if self._margin_limit:
            mjx_collision.check_mjx_version()
        with warnings.catch_warnings():
            # MJX notes that the full hull of the gripper base mesh (`gripper_hull_vertices=None`)
            # has a face of > 20 vertices ("may lead to performance issues"); the capped hull has none.
            warnings.filterwarnings("ignore", message='Mesh "eGripperBase" has a coplanar face')
            super().__init__(model, FRAME_SKIP, self.config.solver_loop, self.config.math)
        original = metaworld_model.load_model(self.metaworld_name, stand_ins=False, prune_pairs=False, gripper_hull_vertices=None)
        self.hand_reset = hand_reset_state(original, self.hand_init_pos)
        self._hand = model.body("hand").id
        self._claws = (model.body("rightclaw").id, model.body("leftclaw").id)
        self._tcp_sites = (model.site("rightEndEffector").id, model.site("leftEndEffector").id)
        self._mocap = int(model.body_mocapid[model.body("mocap").id])
        self._moved = None if self.moved_body is None else model.body(self.moved_body).id
        goal = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, "goal")
        self._goal_site = goal if goal >= 0 and model.site_bodyid[goal] == 0 else None
        """The world's "goal" site, which Meta-World moves to the target for its pictures."""
        # `simulate`'s trace, kept by jax.jit (the episode's model is built inside it from body_pos)
        self._traced_simulate = jax.jit(self._simulate, inline=True)
        self._random_low = jp.asarray(self.random_low, jp.float32)
        self._random_high = jp.asarray(self.random_high, jp.float32)

    @property
    def action_size(self) -> int:
        return 4  # the mocap's xyz delta and the gripper (the model's two actuators get +-action[3])

    # -- per task -------------------------------------------------------------------------------
    def place(self, rand: jax.Array, qpos: jax.Array, qvel: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(qpos, qvel after the task's reset edits, target position) for the random vector `rand`."""
        raise NotImplementedError

    def object_pos_quat(self, data: mjx.Data) -> tuple[jax.Array, jax.Array]:
        """The task's `_get_pos_objects()` [3] and `_get_quat_objects()` [4]."""
        raise NotImplementedError

    def success(self, data: mjx.Data, obs: jax.Array, target: jax.Array) -> jax.Array:
        """The task's `evaluate_state(...)["success"]` as a bool, from the synced state and the
        clipped observation."""
        raise NotImplementedError

    def draw(self, rng: jax.Array) -> jax.Array:
        """The random vector, uniform on the task's `_random_reset_space`."""
        return jax.random.uniform(rng, self._random_low.shape, minval=self._random_low, maxval=self._random_high)

    def finish_reset(self, data: mjx.Data, target: jax.Array) -> jax.Array:
        """The target, for tasks that read it off the reset state (button); others keep theirs."""
        return target

    # -- shared -----------------------------------------------------------------------------------
    def model_for(self, body_pos: jax.Array) -> mjx.Model:
        """The device model with the moved body at `body_pos` (an episode's layout)."""
        if self._moved is None:
            return self._mjx_model
        return self._mjx_model.replace(body_pos=self._mjx_model.body_pos.at[self._moved].set(body_pos))

    def solver_context(self) -> contextlib.AbstractContextManager:
        stack = contextlib.ExitStack()
        stack.enter_context(super().solver_context())
        if self.config.body_tree_barriers:
            stack.enter_context(mjx_body_tree.level_barriers())
        stack.enter_context(mjx_collision.margin_manifolds(self._margin_limit))
        return stack

    def sync(self, model: mjx.Model, data: mjx.Data) -> mjx.Data:
        """Position-dependent fields at the current qpos (what `mj_forward` gives an observation)."""
        with self.solver_context():
            return mjx.kinematics(model, data)

    def tcp_center(self, data: mjx.Data) -> jax.Array:
        return 0.5 * (data.site_xpos[self._tcp_sites[0]] + data.site_xpos[self._tcp_sites[1]])

    def frame(self, data: mjx.Data) -> jax.Array:
        """`_get_curr_obs_combined_no_goal()` [18] of a synced state."""
        gap = jp.linalg.norm(data.xpos[self._claws[0]] - data.xpos[self._claws[1]])
        pos, quat = self.object_pos_quat(data)
        padding = jp.zeros(FRAME_SIZE - 4 - 7)
        return jp.concatenate([data.xpos[self._hand], jp.clip(gap / 0.1, 0.0, 1.0)[None], pos, quat, padding])

    def goal_observation(self, target: jax.Array) -> jax.Array:
        return jp.zeros(3) if self.config.hidden_goal else target

    def initial_data(self, model: mjx.Model, qpos: jax.Array, qvel: jax.Array) -> mjx.Data:
        hand = self.hand_reset
        data = mjx.make_data(model).replace(
            qpos=qpos,
            qvel=qvel,
            qacc_warmstart=jp.asarray(hand.qacc_warmstart, jp.float32),
            mocap_pos=jp.asarray(hand.mocap_pos, jp.float32),
            mocap_quat=jp.asarray(hand.mocap_quat, jp.float32),
            ctrl=jp.array([-1.0, 1.0]),
        )
        return self.sync(model, data)

    def reset(self, rng: jax.Array) -> State:
        first_key, key = jax.random.split(rng)
        return self.reset_from(self.draw(key), self.draw(first_key))

    def reset_from(self, rand: jax.Array, first_rand: jax.Array) -> State:
        """The episode Meta-World starts with random vector `rand`, after `first_rand` was drawn
        (and discarded) by the first of its two `reset_model` calls (module docstring)."""
        hand_qvel = jp.asarray(self.hand_reset.qvel, jp.float32)
        qpos, qvel, target = self.place(rand, jp.asarray(self.hand_reset.qpos, jp.float32), hand_qvel)
        body_pos = rand[:3] if self._moved is not None else jp.zeros(3)
        model = self.model_for(body_pos)
        data = self.initial_data(model, qpos, qvel)
        target = self.finish_reset(data, target)
        if self.stale_first_observation:
            # The first draw's body position, the positions before the hand drive's last step.
            shown = self.initial_data(
                self.model_for(first_rand[:3]),
                jp.asarray(self.hand_reset.qpos_before_last_step, jp.float32),
                hand_qvel,
            )
            frame = self.frame(shown)
        else:
            frame = self.frame(data)
        obs = jp.concatenate([frame, frame, self.goal_observation(target)])
        info = {"body_pos": body_pos, "target": target, "prev_frame": frame}
        zero = jp.zeros(())
        return State(pipeline_state=data, obs=obs, reward=zero, done=zero, metrics=self.metrics(data, zero, target), info=info)

    def render_fields(self, state: State) -> dict[str, jax.Array]:
        # The episode's layout lives in the model: the moved body, and the goal marker at the target.
        fields = {**super().render_fields(state), "model.body_pos": self.model_for(state.info["body_pos"]).body_pos}
        if self._goal_site is not None:
            fields["model.site_pos"] = self._mjx_model.site_pos.at[self._goal_site].set(state.info["target"])
        return fields

    def clip_observation(self, obs: jax.Array) -> jax.Array:
        """Meta-World's clip of every step's observation to its observation space."""
        hand_low, hand_high = jp.asarray(HAND_OBS_LOW), jp.asarray(HAND_OBS_HIGH)
        inf = jp.full(14, jp.inf)
        goal = jp.zeros(3) if self.config.hidden_goal else jp.full(3, jp.inf)
        high = jp.concatenate([hand_high, jp.ones(1), inf, hand_high, jp.ones(1), inf, goal])
        low = jp.concatenate([hand_low, -jp.ones(1), -inf, hand_low, -jp.ones(1), -inf, -goal])
        return jp.clip(obs, low, high)

    def apply_action(self, data: mjx.Data, action: jax.Array) -> mjx.Data:
        """`set_xyz_action` and the finger controls of Meta-World's `step`."""
        action = jp.clip(action, -1.0, 1.0)
        mocap = jp.clip(data.mocap_pos[self._mocap] + ACTION_SCALE * action[:3], jp.asarray(MOCAP_LOW), jp.asarray(MOCAP_HIGH))
        return data.replace(
            mocap_pos=data.mocap_pos.at[self._mocap].set(mocap),
            mocap_quat=data.mocap_quat.at[self._mocap].set(jp.asarray(MOCAP_QUAT)),
            ctrl=jp.stack([action[3], -action[3]]),
        )

    def simulate(self, body_pos: jax.Array, data: mjx.Data) -> mjx.Data:
        """5 physics steps of the episode's model (the moved body at `body_pos`), then the
        positions of the state reached (Meta-World's `mj_forward`).

        Traced once per shape, like `MjxEnv.physics_step`: the training and the evaluation
        programs share the trace, which is inlined into each."""
        return self._traced_simulate(body_pos, data)

    def _simulate(self, body_pos: jax.Array, data: mjx.Data) -> mjx.Data:
        model = self.model_for(body_pos)

        def substep(data: mjx.Data, _: Any) -> tuple[mjx.Data, None]:
            return mjx.step(model, data), None

        with self.solver_context():  # the scan traces its body here
            data, _ = jax.lax.scan(substep, data, None, length=FRAME_SKIP)
            return mjx.kinematics(model, data)

    def step(self, state: State, action: jax.Array) -> State:
        info = state.info
        data = self.simulate(info["body_pos"], self.apply_action(state.pipeline_state, action))
        frame = self.frame(data)
        obs = self.clip_observation(jp.concatenate([frame, info["prev_frame"], self.goal_observation(info["target"])]))
        success = self.success(data, obs, info["target"]).astype(jp.float32)
        return state.replace(
            pipeline_state=data,
            obs=obs,
            reward=success,
            done=jp.zeros(()),  # never terminal (Meta-World's semantics)
            metrics=self.metrics(data, success, info["target"]),
            info={**info, "prev_frame": frame},
        )

    def metrics(self, data: mjx.Data, success: jax.Array, target: jax.Array) -> dict[str, jax.Array]:
        """Success and where the hand is (logged as visits, for exploration plots)."""
        hand = data.xpos[self._hand]
        return {"success": success, "hand_x": hand[0], "hand_y": hand[1], "hand_z": hand[2]}


class WindowClose(MetaWorldTask):
    """Meta-World `window-close-v3`: push the window shut (the handle to the closed position)."""

    metaworld_name = "window-close-v3"
    hand_init_pos = (0.0, 0.4, 0.2)
    random_low, random_high = (0.0, 0.75, 0.2), (0.0, 0.9, 0.2)
    moved_body = "window"
    stale_first_observation = True
    handle_site = "handleCloseStart"
    slide_start = 0.2
    target_offset = (0.0, 0.0, 0.0)

    def __init__(self, config: MetaWorldConfig | None = None):
        super().__init__(config)
        self._handle = self._mj_model.site(self.handle_site).id
        self._slide = int(self._mj_model.joint("window_slide").qposadr[0])

    def place(self, rand, qpos, qvel):
        return qpos.at[self._slide].set(self.slide_start), qvel, rand + jp.asarray(self.target_offset)

    def object_pos_quat(self, data):
        return data.site_xpos[self._handle], jp.zeros(4)

    def success(self, data, obs, target):
        return jp.abs(data.site_xpos[self._handle][0] - target[0]) <= 0.05


class WindowOpen(WindowClose):
    """Meta-World `window-open-v3`: slide the window open by 0.2 m."""

    metaworld_name = "window-open-v3"
    random_low, random_high = (-0.1, 0.7, 0.16), (0.1, 0.9, 0.16)
    handle_site = "handleOpenStart"
    slide_start = 0.0
    target_offset = (0.2, 0.0, 0.0)


class DrawerOpen(MetaWorldTask):
    """Meta-World `drawer-open-v3`: pull the drawer out by its handle."""

    metaworld_name = "drawer-open-v3"
    hand_init_pos = (0.0, 0.6, 0.2)
    random_low, random_high = (-0.1, 0.9, 0.0), (0.1, 0.9, 0.0)
    moved_body = "drawer"
    stale_first_observation = True

    def __init__(self, config: MetaWorldConfig | None = None):
        super().__init__(config)
        self._link = self._mj_model.body("drawer_link").id
        self._slide = int(self._mj_model.joint("goal_slidey").qposadr[0])

    def place(self, rand, qpos, qvel):
        return qpos, qvel, rand + jp.array([0.0, -0.16 - 0.2, 0.09])

    def object_pos_quat(self, data):
        return data.xpos[self._link] + jp.array([0.0, -0.16, 0.0]), data.xquat[self._link]

    def success(self, data, obs, target):
        return jp.linalg.norm(obs[4:7] - target) <= 0.03


class DrawerClose(DrawerOpen):
    """Meta-World `drawer-close-v3`: push the drawer, pulled out 0.15 m, shut."""

    metaworld_name = "drawer-close-v3"
    stale_first_observation = False  # `_set_obj_xyz` calls `set_state` (a forward pass)

    def place(self, rand, qpos, qvel):
        return qpos.at[self._slide].set(-0.15), qvel, rand + jp.array([0.0, -0.16, 0.09])

    def object_pos_quat(self, data):
        return data.xpos[self._link] + jp.array([0.0, -0.16, 0.05]), jp.zeros(4)

    def success(self, data, obs, target):
        return jp.linalg.norm(obs[4:7] - target) <= 0.05 + 0.015  # TARGET_RADIUS + 0.015


class Reach(MetaWorldTask):
    """Meta-World `reach-v3`: bring the gripper within 0.05 m of the hidden goal."""

    metaworld_name = "reach-v3"
    hand_init_pos = (0.0, 0.6, 0.2)
    random_low = (-0.1, 0.6, 0.02, -0.1, 0.8, 0.05)
    random_high = (0.1, 0.7, 0.02, 0.1, 0.9, 0.3)
    reset_candidates: ClassVar[int] = 16
    """Random vectors drawn per reset; the first with the puck >= 0.15 m from the goal in xy is used."""

    def __init__(self, config: MetaWorldConfig | None = None):
        super().__init__(config)
        self._puck = self._mj_model.body("obj").id
        self._puck_geom = self._mj_model.geom("objGeom").id

    def draw(self, rng):
        # Meta-World redraws while the puck is within 0.15 m of the goal in xy (~15 % of draws).
        # A loop until success has a data-dependent trip count, so a fixed batch is drawn and the
        # first acceptable one taken: the same distribution unless all 16 fail (about 1e-13).
        low, high = self._random_low, self._random_high
        draws = jax.random.uniform(rng, (self.reset_candidates, low.shape[0]), minval=low, maxval=high)
        far = jp.linalg.norm(draws[:, :2] - draws[:, 3:5], axis=-1) >= 0.15
        return draws[jp.where(jp.any(far), jp.argmax(far), self.reset_candidates - 1)]

    def place(self, rand, qpos, qvel):
        return qpos.at[9:12].set(rand[:3]), qvel.at[9:15].set(0.0), rand[3:]  # `_set_obj_xyz`

    def object_pos_quat(self, data):
        return data.xpos[self._puck], _scipy_quat(data.geom_xmat[self._puck_geom])

    def success(self, data, obs, target):
        return jp.linalg.norm(self.tcp_center(data) - target) <= 0.05


class ButtonPressTopdown(MetaWorldTask):
    """Meta-World `button-press-topdown-v3`: press the button down from above."""

    metaworld_name = "button-press-topdown-v3"
    hand_init_pos = (0.0, 0.4, 0.2)
    random_low, random_high = (-0.1, 0.8, 0.115), (0.1, 0.9, 0.115)
    moved_body = "box"

    def __init__(self, config: MetaWorldConfig | None = None):
        super().__init__(config)
        self._button = self._mj_model.body("button").id
        self._hole = self._mj_model.site("hole").id

    def place(self, rand, qpos, qvel):
        return qpos, qvel, jp.zeros(3)

    def finish_reset(self, data, target):
        return data.site_xpos[self._hole]

    def object_pos_quat(self, data):
        return data.xpos[self._button] + jp.array([0.0, 0.0, 0.193]), data.xquat[self._button]

    def success(self, data, obs, target):
        return jp.abs(target[2] - obs[6]) <= 0.024


class DoorOpen(MetaWorldTask):
    """Meta-World `door-open-v3`: swing the door open by its handle."""

    metaworld_name = "door-open-v3"
    hand_init_pos = (0.0, 0.6, 0.2)
    random_low, random_high = (0.0, 0.85, 0.15), (0.1, 0.95, 0.15)
    moved_body = "door"

    def __init__(self, config: MetaWorldConfig | None = None):
        super().__init__(config)
        model = self._mj_model
        self._handle = model.geom("handle").id
        self._hinge = int(model.joint("doorjoint").qposadr[0])
        self._hinge_dof = int(model.joint("doorjoint").dofadr[0])

    def place(self, rand, qpos, qvel):
        target = rand + jp.array([-0.3, -0.45, 0.0])
        return qpos.at[self._hinge].set(0.0), qvel.at[self._hinge_dof].set(0.0), target  # `_set_obj_xyz`

    def object_pos_quat(self, data):
        return data.geom_xpos[self._handle], _scipy_quat(data.geom_xmat[self._handle])

    def success(self, data, obs, target):
        return jp.abs(obs[4] - target[0]) <= 0.08


TASKS: dict[str, type[MetaWorldTask]] = {
    "mw_window_close": WindowClose,
    "mw_window_open": WindowOpen,
    "mw_drawer_close": DrawerClose,
    "mw_drawer_open": DrawerOpen,
    "mw_reach": Reach,
    "mw_button_press_topdown": ButtonPressTopdown,
    "mw_door_open": DoorOpen,
}
"""Our env names -> task classes (the paper's Table 2 order)."""
