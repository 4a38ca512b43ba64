"""The shared training loop: env stepping, replay and gradient steps inside jitted chunks.

One iteration = one vector env step of N instances (uniform random actions during warm-up, the
algorithm's `act` after it), N transitions into the ring buffer, then `updates_per_step` gradient
steps on uniform minibatches. A chunk is up to `Schedule.iterations_per_chunk` iterations under
one loop whose trip count is the program's argument (one program per kind for every length);
nothing inside it returns to the host, all shapes are fixed, and the training state's buffers
are donated from one chunk to the next. The host (`mjx_pbac.runner`) logs, evaluates and
checkpoints between chunks.

Warm-up and training chunks (`Trainer.warmup_chunk`, `Trainer.train_chunk`) are chosen by the
host per chunk, and warm-up steps run no gradient step at all. On a GPU they are two programs
of the schedule's fixed trip count, and nothing in a chunk branches on data (every `lax.cond`,
and every loop whose trip count is data, is a device-to-host round trip per trip there); on a
CPU, where neither costs a round trip, they are one program whose trip count and learning flag
are arguments (`make_trainer`'s `any_length`), so a run compiles one chunk program. Matrix products are
traced at `TrainConfig.matmul_precision` (float32 by default: the authors' PyTorch and the
physics' accuracy; see docs/performance.md "The paper's sequential setting: latency").

Members: a run trains M independent members (seeds, crossed with the points of a hyperparameter
sweep and with the tasks of one robot) as a vmapped leading axis of the whole training state, in
one program. Each member has its own key (from its seed), so its initialisation, bootstrap masks,
exploration and env noise are its own; its config is one slice of the stacked member configs
(`mjx_pbac.algos.base.stack_configs`: the knobs traced, the rest fixed), kept in its agent state,
and its task's reward constants are in `TrainState.task`. Over several devices (and hosts) the
member axis is sharded (`mjx_pbac.devices`): each device runs this program on its own members.

Observation normalisation (`TrainConfig.normalize_observations`, beyond the paper; off in its
profiles): the running moments of the training envs' observations (`mjx_pbac.normalization`)
live in `TrainState.obs_moments`, are updated with the observations of every vector step
(warm-up included), and every network input is normalised with them: acting, both observations
of each minibatch (the buffer holds raw ones), the disagreement metrics and evaluation (which
never updates them).

The loop knows no algorithm: what an algorithm keeps between env steps to act (PBAC's posterior
sampling: each instance's active head and counter) is its `acting` state, advanced by
`Algorithm.acting.step` before each action, and what each gradient step needs from it (the head
of PBAC's Bellman targets) comes from `Algorithm.acting.update_context`.

Per chunk, besides the update metrics: the ensemble's disagreement at the end of the chunk
(`mjx_pbac.disagreement`, on one minibatch of stored states), and for envs whose metrics include
`goal` (1 at a step that ends in a goal zone, as the chains'), `goal_steps` (instance steps in
the goal during the chunk) and `goal_first_iteration` (the first iteration of the chunk where an
instance was in the goal, -1 if none), from which the host records the first visit. For envs
that report success (`reports_success`, Meta-World: reward = success at that step, so an episode
succeeded iff its return > 0), `success_sum` counts the episodes of the chunk that succeeded.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jp
import numpy as np
from brax.envs.base import Env, State
from flax import struct
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from envs.wrappers import wrap_for_training
from mjx_pbac import normalization, replay
from mjx_pbac.algos.base import AgentState, Algorithm, stack_configs
from mjx_pbac.config import TrainConfig
from mjx_pbac.devices import AXIS
from mjx_pbac.disagreement import disagreement_metrics
from mjx_pbac.schedule import Schedule


@struct.dataclass
class TrainState:
    """Everything a run carries from one chunk to the next (and into a checkpoint)."""

    agent: AgentState
    buffer: replay.ReplayBuffer
    env_state: State
    """The N training instances (auto-resetting, with their episode counters)."""
    acting: Any
    """The algorithm's acting state (`Algorithm.acting`; posterior sampling's active heads and
    counters, None for algorithms that need none)."""
    obs_moments: normalization.RunningMoments | None
    """Running moments of the training observations, which normalise every network input
    (`TrainConfig.normalize_observations`); None when the option is off."""
    task: Any
    """This member's task constants (`env.task_params()`, e.g. a locomotion reward's delay
    threshold and weights), so tasks that share a robot are members of one program; None for
    envs without them."""
    seed: jax.Array
    """This member's seed (int32); its keys derive from it."""
    key: jax.Array
    env_steps: jax.Array
    """Transitions collected so far (int32)."""
    updates: jax.Array
    """Gradient steps taken so far (int32)."""


class Chunk:
    """A chunk program with its arguments bound: `chunk(state) -> (state, metrics)`, and
    `chunk.lower(state)` as a jitted function's. `name` names the compiled program: on a CPU
    "chunk", the one program of every chunk, warm-up or training, of any length (`make_trainer`'s
    `any_length`), whose length and learning flag are arguments put on the device once, so a call
    transfers nothing; elsewhere "train" or "warmup" for the whole chunk's fixed trip count and
    "train/any" or "warmup/any" for a shorter one."""

    def __init__(self, program: Callable, length: int, name: str, arguments: tuple = ()):
        self.program, self.length, self.name, self.arguments = program, length, name, arguments

    def __call__(self, state: TrainState) -> tuple[TrainState, dict]:
        return self.program(state, *self.arguments)

    def lower(self, state: TrainState):
        return self.program.lower(state, *self.arguments)

    def calling(self, compiled: Callable) -> Callable[[TrainState], tuple[TrainState, dict]]:
        """`compiled` (this chunk's `lower(state).compile()`) called as the chunk is: `f(state)`."""
        return lambda state: compiled(state, *self.arguments)

    def _cache_size(self) -> int:
        return self.program._cache_size()


class Trainer(NamedTuple):
    """Jitted pieces of a run over M members; see the module docstring. Every state and result
    carries the member axis first."""

    init: Callable[..., TrainState]
    """init(seeds[M] int32, configs (the members' configs stacked: knobs [M]), task (leaves [M],
    or None)) -> state."""
    warmup_chunk: Callable[[TrainState], tuple[TrainState, dict]]
    """A chunk of warm-up: uniform random actions into the buffer, no gradient steps (with a
    fused warm-up, `make_trainer`'s `fuse_warmup`, this is `train_chunk` itself)."""
    train_chunk: Callable[[TrainState], tuple[TrainState, dict]]
    """A chunk of training: the algorithm acts, `updates_per_step` gradient steps per vector
    step. Metrics are [M] (or [M, iterations] for "visit/..." keys)."""
    evaluate: Callable[[TrainState], dict]
    """evaluate(state) -> {"returns": [M, E], "lengths": [M, E], "steps": [M]}, with keys from
    each member's seed and step count (evaluation never consumes training randomness); `steps`:
    the env steps it ran, until every episode had ended (at most the episode length). For an env that reports
    success, the host reads an episode's success as return > 0 (`runner`)."""
    update_chunk: Callable[[TrainState], tuple[TrainState, dict]]
    """Only the gradient steps of a training chunk (no env step): `train.py profile` times it
    to split a training step into its phases (a `Chunk`; `chunk_program("update", n)` for n
    iterations on an any-length trainer)."""
    schedule: Schedule
    init_snapshots: Callable[[TrainState], Any] | None = None
    """init_snapshots(state) -> room for `TrainConfig.eval_batch` policies of every member
    (`Policy` leaves [M, P, ...]), each slot a copy of the state's policy."""
    snapshot: Callable[[Any, TrainState, jax.Array], Any] | None = None
    """snapshot(snapshots, state, slot) -> snapshots with the state's policy in slot `slot` (a
    copy: the state's buffers go on to the next chunk; `snapshots` is donated)."""
    evaluate_snapshots: Callable[[Any], dict] | None = None
    """evaluate_snapshots(snapshots) -> {"returns": [M, P, E], "lengths": [M, P, E], "steps":
    [M, P]}: every slot evaluated as `evaluate` would have evaluated its state, in one program."""
    record: Callable[[Any], dict] | None = None
    """record(policy) -> `evaluate`'s episodes of a `Policy` (leaves [M, ...]) with what each
    step shows: {"returns": [M, E], "lengths": [M, E], "frames": the env's `render_fields`, leaves
    [M, T + 1, E, ...] from the reset on} (mjx_pbac/video.py; an MJX env only). Compiled when called."""
    chunk_program: Callable[[str, int], Chunk] | None = None
    """chunk_program("warmup" | "train" | "update", iterations) -> the chunk of that many iterations (1 up
    to the schedule's): the runner runs a chunk of the schedule as several shorter ones when it
    would outlast `TrainConfig.chunk_seconds`, and measures a program's pace on a short first
    one (`mjx_pbac.pacing`). Every length of a kind is one compiled program, so the state after
    any split is bit-identical to the whole chunk's; only the metrics' grain differs.
    `chunk_program(kind, schedule.iterations_per_chunk)` is `warmup_chunk` / `train_chunk`."""
    any_length: bool = False
    """Whether whole chunks run the any-length program too (`make_trainer`'s `any_length`)."""


VISIT_PREFIX = "visit/"


def with_matmul_precision(fn: Callable, precision: str) -> Callable:
    """`fn` traced under `jax.default_matmul_precision(precision)` ("default" leaves XLA's choice:
    TF32 for float32 matmuls on recent NVIDIA GPUs); see `TrainConfig.matmul_precision`."""
    if precision == "default":
        return fn

    def traced(*args):
        with jax.default_matmul_precision(precision):
            return fn(*args)

    return traced


def make_trainer(
    train: TrainConfig,
    env: Env,
    algorithm: Algorithm,
    donate: bool = True,
    mesh: Mesh | None = None,
    unroll_updates: bool | None = None,
    fuse_warmup: bool | None = None,
    any_length: bool | None = None,
) -> Trainer:
    """The jitted init / chunk / evaluate functions of a run of `algorithm` on `env`; with a
    `mesh` (`mjx_pbac.devices.layout`), each program runs under `jax.shard_map` over its member
    axis: every device the same vmapped program on its own members, nothing exchanged.

    `unroll_updates`: the gradient steps of a vector step unrolled (True) or under a loop
    (False); None unrolls them with one env per member only, where a step's latency is the cost
    (docs/performance.md "Compiles and evaluations"). The results are the same either way.

    `fuse_warmup`: the warm-up runs in the training program (its chunks' gradient steps computed
    and discarded; `warmup_chunk` is then `train_chunk`), sparing the warm-up program's compile;
    None fuses a warm-up of one chunk (every `_fast` recipe's), where the discarded arithmetic is
    one chunk's, and keeps a longer one (the paper's 10 chunks) in its own program. The state
    after the warm-up is the same either way.

    `any_length`: every chunk, warm-up or training, whole or shorter, runs one program whose
    loop takes its trip count and a learning flag as arguments, the warm-up's gradient steps
    skipped by a branch on that flag (True); or whole chunks run programs of the whole chunk's
    fixed trip count, warm-up and training apart (or fused as above), and only shorter ones an
    any-length program of their kind, compiled at its first use (False). On a GPU, a loop whose
    trip count XLA cannot see and a branch read their condition on the host at every trip, a
    few microseconds that matter only for a fast chunk, which runs whole; on a CPU the host runs
    the loop anyway. None: `train.chunk_loop`, whose auto is True on a CPU, False elsewhere."""
    schedule = Schedule.of(train)
    if any_length is None and train.chunk_loop != "auto":
        any_length = train.chunk_loop == "any_length"
    if any_length is None:
        platform = (jax.devices()[0] if mesh is None else mesh.devices.flat[0]).platform
        any_length = platform == "cpu"
    num_envs, updates = train.num_envs, train.updates_per_step
    unrolled = num_envs == 1 if unroll_updates is None else unroll_updates
    fused_warmup = schedule.warmup_chunks == 1 if fuse_warmup is None else fuse_warmup and schedule.warmup_chunks > 0
    warmup_env_steps = schedule.warmup_chunks * schedule.chunk_env_steps
    action_size = env.action_size
    reports_success = bool(getattr(env, "reports_success", False))

    def env_of(task: Any) -> Env:
        """This member's env: `env` with the member's task constants (traced)."""
        return env if task is None else env.with_task(task)

    def init(seed: jax.Array, config: Any, task: Any) -> TrainState:
        agent_key, env_key, acting_key, key = jax.random.split(jax.random.key(seed), 4)
        return TrainState(
            agent=algorithm.init(agent_key, config),
            buffer=replay.init(train.buffer_size, env.observation_size, action_size),
            env_state=wrap_for_training(env_of(task), num_envs).reset(env_key),
            acting=algorithm.acting.init(acting_key, config, num_envs),
            obs_moments=normalization.init(env.observation_size) if train.normalize_observations else None,
            task=task,
            seed=jp.asarray(seed, jp.int32),
            key=key,
            env_steps=jp.zeros((), jp.int32),
            updates=jp.zeros((), jp.int32),
        )

    def env_step(state: TrainState, learned: Any) -> tuple[TrainState, dict, dict]:
        """One vector step: the algorithm acts (`learned` True) or uniform random actions
        (warm-up; a traced `learned` selects between the two); the transitions go into the buffer."""
        key, acting_key, action_key = jax.random.split(state.key, 3)
        env_state = state.env_state
        acting = algorithm.acting.step(state.acting, env_state.info["steps"], acting_key)
        moments = state.obs_moments
        if moments is not None:
            moments = normalization.update(moments, env_state.obs)
        if learned is not False:
            action = algorithm.act(state.agent, acting, normalization.normalize(moments, env_state.obs), action_key)
        if learned is not True:
            uniform = jax.random.uniform(action_key, (num_envs, action_size), minval=-1.0, maxval=1.0)
            action = uniform if learned is False else jp.where(learned, action, uniform)
        next_state = wrap_for_training(env_of(state.task), num_envs).step(env_state, action)
        info = next_state.info
        transition = replay.Transition(
            obs=env_state.obs,
            action=action,
            reward=next_state.reward,
            next_obs=info["final_obs"],
            terminated=next_state.done,
            truncated=info["truncation"],
        )
        ended = info["steps"] == 0
        episodes = {
            "episodes": jp.sum(ended),
            "return_sum": jp.sum(jp.where(ended, info["completed_return"], 0.0)),
            "length_sum": jp.sum(jp.where(ended, info["completed_length"], 0)),
        }
        if reports_success:  # an episode succeeded iff it earned any reward (reward = success)
            episodes["success_sum"] = jp.sum(jp.logical_and(ended, info["completed_return"] > 0)).astype(jp.int32)
        if "goal" in next_state.metrics:
            episodes["goal_steps"] = jp.sum(next_state.metrics["goal"] > 0).astype(jp.int32)
        # Where instance 0 is after this step (its env's scalar metrics), for exploration plots.
        visit = {
            VISIT_PREFIX + name: value[0]
            for name, value in next_state.metrics.items()
            if value.shape == (num_envs,)
        }
        state = state.replace(
            buffer=replay.insert(state.buffer, transition),
            env_state=next_state,
            acting=acting,
            obs_moments=moments,
            key=key,
            env_steps=state.env_steps + num_envs,
        )
        return state, episodes, visit

    def gradient_steps(state: TrainState) -> tuple[TrainState, dict]:
        """`updates_per_step` gradient steps. Their minibatches are drawn in one gather; with one
        env per member (the paper's latency-bound setting) the steps are unrolled, one straight
        run of kernels per vector step, no loop; with many, they run under a loop of
        `updates_per_step` trips, whose body compiles once (`unroll_updates`)."""
        key, sample_key, context_key, update_key = jax.random.split(state.key, 4)
        batches = replay.sample(state.buffer, sample_key, updates * train.batch_size)
        batches = normalized_batch(state.obs_moments, batches)
        batches = jax.tree.map(lambda x: x.reshape(updates, train.batch_size, *x.shape[1:]), batches)
        contexts = None
        if algorithm.acting.update_context is not None:
            contexts = algorithm.acting.update_context(state.acting, context_key, updates)

        def one_step(agent, inputs):
            batch, step_key, context = inputs
            return algorithm.update(agent, batch, step_key, context)

        agent, metrics = jax.lax.scan(
            one_step, state.agent, (batches, jax.random.split(update_key, updates), contexts), unroll=updates if unrolled else 1
        )
        state = state.replace(agent=agent, key=key, updates=state.updates + updates)
        return state, jax.tree.map(jp.mean, metrics)

    whole = schedule.iterations_per_chunk

    def run_iterations(state: TrainState, length: jax.Array | int, iteration: Callable) -> tuple[TrainState, dict]:
        """`length` (1..whole: traced, or the whole chunk's as a fixed trip count) calls of
        `iteration` (state -> (state, episodes, update metrics, visit)) under one loop, whose body
        is the same computation for every length, so the whole chunk run in pieces leaves the
        same state. The chunk's
        metrics accumulate in the loop: the episodes' sums, the update metrics' means over the
        iterations, the first iteration in the goal, and the visits in rows of `whole` (the first
        `length` written)."""
        # One trace of the iteration for both uses: its shapes here and the loop's body below
        # (`jax.jit`'s trace cache; the nested program is inlined when compiled).
        iteration = jax.jit(iteration, inline=True)
        _, episodes, update_metrics, visit = jax.eval_shape(iteration, state)
        zeros = lambda tree: jax.tree.map(lambda s: jp.zeros(s.shape, s.dtype), tree)  # noqa: E731
        visits = jax.tree.map(lambda s: jp.zeros((whole, *s.shape), s.dtype), visit)
        first = jp.full((), -1, jp.int32)

        def body(i, carry):
            state, sums, update_sums, visits, first = carry
            state, episodes, update_metrics, visit = iteration(state)
            if "goal_steps" in episodes:
                first = jp.where((first < 0) & (episodes["goal_steps"] > 0), i, first)
            sums = jax.tree.map(jp.add, sums, episodes)
            update_sums = jax.tree.map(jp.add, update_sums, update_metrics)
            visits = jax.tree.map(lambda rows, value: rows.at[i].set(value), visits, visit)
            return state, sums, update_sums, visits, first

        carry = (state, zeros(episodes), zeros(update_metrics), visits, first)
        state, sums, update_sums, visits, first = jax.lax.fori_loop(0, length, body, carry)
        metrics = dict(sums)
        if "goal_steps" in sums:
            metrics["goal_first_iteration"] = first
        metrics.update({name: total / jp.asarray(length, total.dtype) for name, total in update_sums.items()})
        metrics.update(visits)  # [whole] each, the first `length` written
        return state, metrics

    def warmup_chunk(state: TrainState, length: jax.Array | int) -> tuple[TrainState, dict]:
        def iteration(state):
            state, episodes, visit = env_step(state, learned=False)
            return state, episodes, {}, visit

        return run_iterations(state, length, iteration)

    def train_chunk(state: TrainState, length: jax.Array | int, learn: jax.Array | bool = True) -> tuple[TrainState, dict]:
        """`length` training iterations; with a traced `learn` (the any-length program, which
        runs warm-up chunks too), False makes them warm-up iterations: uniform actions, and the
        gradient steps skipped by a branch on that one flag, the same for every member."""

        def skipped(state):
            _, metrics = jax.eval_shape(gradient_steps, state)
            return state, jax.tree.map(lambda s: jp.zeros(s.shape, s.dtype), metrics)

        def iteration(state):
            # With a fused warm-up, the warm-up's iterations take uniform actions and keep their
            # gradient steps' results out of the state (selects, not branches): the same state
            # as the warm-up program's, with the gradient steps' arithmetic spent for nothing.
            learned = state.env_steps >= warmup_env_steps if fused_warmup and learn is True else learn
            state, episodes, visit = env_step(state, learned=learned)
            update_metrics = {}
            if updates > 0 and learn is not True:
                state, update_metrics = jax.lax.cond(learn, gradient_steps, skipped, state)
            elif updates > 0:
                trained, update_metrics = gradient_steps(state)
                if fused_warmup:
                    kept = (state.agent, state.key, state.updates)
                    agent, key, counted = jax.tree.map(
                        lambda new, old: jp.where(learned, new, old), (trained.agent, trained.key, trained.updates), kept
                    )
                    trained = trained.replace(agent=agent, key=key, updates=counted)
                state = trained
            return state, episodes, update_metrics, visit

        state, metrics = run_iterations(state, length, iteration)
        # Disagreement at the chunk's end, on stored states; its keys fold off the member's key
        # without advancing it, so training draws the same numbers with or without it.
        sample_key, pair_key = jax.random.split(jax.random.fold_in(state.key, 0x5D))
        obs = normalization.normalize(state.obs_moments, replay.sample(state.buffer, sample_key, train.batch_size).obs)
        metrics.update(disagreement_metrics(algorithm, state.agent, obs, pair_key))
        return state, metrics

    def update_chunk(state: TrainState, length: jax.Array | None = None) -> tuple[TrainState, dict]:
        """A training chunk's gradient steps alone: `whole` iterations under a scan, or with
        `length` (any-length trainers) that many under a loop whose trip count is an argument."""
        def iteration(state, _=None):
            return gradient_steps(state) if updates > 0 else (state, {})

        if length is None:
            state, update_metrics = jax.lax.scan(iteration, state, None, length=whole)
            return state, {name: jp.mean(value) for name, value in update_metrics.items()}
        _, shapes = jax.eval_shape(iteration, state)
        sums = jax.tree.map(lambda s: jp.zeros(s.shape, s.dtype), shapes)

        def body(_, carry):
            state, sums = carry
            state, metrics = iteration(state)
            return state, jax.tree.map(jp.add, sums, metrics)

        state, sums = jax.lax.fori_loop(0, length, body, (state, sums))
        return state, {name: value / length for name, value in sums.items()}

    def evaluate(state: TrainState) -> dict:
        return evaluate_policy(policy_of(state))

    def evaluate_policy(policy: Policy, record: bool = False) -> dict:
        member_env = env_of(policy.task)
        key = jax.random.fold_in(jax.random.fold_in(jax.random.key(policy.seed), 1), policy.env_steps)
        states = jax.vmap(member_env.reset)(jax.random.split(key, train.eval_episodes))

        def fields(env_state):
            return jax.vmap(member_env.render_fields)(env_state) if record else None

        def step(carry, _):
            env_state, returns, lengths, alive = carry
            action = algorithm.eval_act(policy.agent, normalization.normalize(policy.obs_moments, env_state.obs))
            env_state = jax.vmap(member_env.step)(env_state, action)
            returns = returns + jp.where(alive, env_state.reward, 0.0)
            lengths = lengths + alive.astype(jp.int32)
            alive = jp.logical_and(alive, env_state.done == 0)
            return (env_state, returns, lengths, alive), fields(env_state)

        zeros = jp.zeros((train.eval_episodes,))
        carry = (states, zeros, zeros.astype(jp.int32), jp.ones((train.eval_episodes,), bool))
        if not record:
            # Stepping stops once every episode has ended (an untrained hopper falls within tens of
            # steps); the steps after an episode's end add nothing to its return, so stopping
            # early changes no value. Under vmap the loop runs until every batched one is done.
            def going(loop):
                steps, (_, _, _, alive) = loop
                return jp.logical_and(steps < env.episode_length, jp.any(alive))

            def advance(loop):
                steps, carry = loop
                return steps + 1, step(carry, None)[0]

            steps, (_, returns, lengths, _) = jax.lax.while_loop(going, advance, (jp.int32(0), carry))
            return {"returns": returns, "lengths": lengths, "steps": steps}
        (_, returns, lengths, _), stepped = jax.lax.scan(step, carry, None, length=env.episode_length)
        first = fields(states)  # [E, ...], then [T, E, ...] after each step: [T + 1, E, ...]
        frames = jax.tree.map(lambda a, b: jp.concatenate([a[None], b]), first, stepped)
        return {"returns": returns, "lengths": lengths, "frames": frames}

    def init_snapshots(state: TrainState) -> Policy:
        return jax.tree.map(lambda leaf: jp.broadcast_to(leaf, (train.eval_batch, *leaf.shape)), policy_of(state))

    def snapshot(snapshots: Policy, state: TrainState, slot: jax.Array) -> Policy:
        return jax.tree.map(lambda room, leaf: room.at[slot].set(leaf), snapshots, policy_of(state))

    def evaluate_snapshots(snapshots: Policy) -> dict:
        return jax.vmap(evaluate_policy)(snapshots)

    def record_policy(policy: Policy) -> dict:
        return evaluate_policy(policy, record=True)

    def jitted(fn: Callable, in_axes: tuple, donated: bool) -> Callable:
        fn = over_members(fn, in_axes=in_axes)
        if mesh is not None:
            specs = tuple(PartitionSpec(AXIS) if axis == 0 else PartitionSpec() for axis in in_axes)
            # check_vma off: the member programs hold scans whose carries start from constants
            # (replicated) and become per-member; nothing is exchanged, so there is nothing to check.
            fn = jax.shard_map(fn, mesh=mesh, in_specs=specs, out_specs=PartitionSpec(AXIS), check_vma=False)
        fn = with_matmul_precision(fn, train.matmul_precision)
        return jax.jit(fn, donate_argnums=(0,) if donated and donate else ())

    def on_devices(value: np.ndarray) -> jax.Array:
        """`value` put where the programs run, replicated over the mesh (each process its own
        devices' copies), so that passing it transfers nothing."""
        if mesh is None:
            return jax.device_put(value)
        return jax.make_array_from_callback(value.shape, NamedSharding(mesh, PartitionSpec()), lambda index: value[index])

    programs: dict[str, Callable] = {}
    chunks: dict[tuple[str, int], Chunk] = {}

    def chunk_program(kind: str, length: int) -> Chunk:
        if kind not in ("warmup", "train", "update"):
            raise ValueError(f"chunk kind must be warmup, train or update, got {kind!r}")
        if not 1 <= length <= whole:
            raise ValueError(f"a chunk holds 1..{whole} iterations, got {length}")
        if (kind, length) in chunks:
            return chunks[kind, length]
        if kind == "update":  # the gradient steps alone (`train.py profile`'s phases)
            if not (any_length or length == whole):
                raise ValueError(f"an update chunk of {length} iterations needs an any-length trainer; this one runs {whole}")
            arguments = (on_devices(np.int32(length)),) if any_length else ()
            if "update" not in programs:
                programs["update"] = jitted(update_chunk, (0, None) if any_length else (0,), donated=True)
            chunks[kind, length] = Chunk(programs["update"], length, "update", arguments)
            return chunks[kind, length]
        if any_length:  # one program: warm-up is the training chunk with its learning switched off
            name, arguments = "chunk", (on_devices(np.int32(length)), on_devices(np.bool_(kind == "train")))
            if name not in programs:
                programs[name] = jitted(train_chunk, (0, None, None), donated=True)
        else:
            fixed = length == whole
            kind = "train" if fused_warmup else kind
            name = kind if fixed else f"{kind}/any"
            arguments = () if fixed else (on_devices(np.int32(length)),)
            if name not in programs:
                body = warmup_chunk if kind == "warmup" else train_chunk
                programs[name] = (
                    jitted(functools.partial(body, length=whole), (0,), donated=True) if fixed else jitted(body, (0, None), donated=True)
                )
        chunks[kind, length] = Chunk(programs[name], length, name, arguments)
        return chunks[kind, length]

    return Trainer(
        init=jitted(init, (0, 0, 0), donated=False),
        warmup_chunk=chunk_program("warmup", whole),
        train_chunk=chunk_program("train", whole),
        evaluate=jitted(evaluate, (0,), donated=False),
        update_chunk=chunk_program("update", whole),
        init_snapshots=jitted(init_snapshots, (0,), donated=False),
        snapshot=jitted(snapshot, (0, 0, None), donated=True),
        evaluate_snapshots=jitted(evaluate_snapshots, (0,), donated=False),
        record=jitted(record_policy, (0,), donated=False),
        schedule=schedule,
        chunk_program=chunk_program,
        any_length=any_length,
    )


@struct.dataclass
class Policy:
    """What an evaluation reads of a member's training state: the agent, the observation
    moments, the task constants, the seed and the step count (its evaluation keys)."""

    agent: AgentState
    obs_moments: Any
    task: Any
    seed: jax.Array
    env_steps: jax.Array


def policy_of(state: TrainState) -> Policy:
    return Policy(agent=state.agent, obs_moments=state.obs_moments, task=state.task, seed=state.seed, env_steps=state.env_steps)


def normalized_batch(moments: normalization.RunningMoments | None, batch: replay.Transition) -> replay.Transition:
    """`batch` with both of its observations normalised by `moments` (itself without them)."""
    if moments is None:
        return batch
    return batch.replace(obs=normalization.normalize(moments, batch.obs), next_obs=normalization.normalize(moments, batch.next_obs))


def over_members(fn: Callable, in_axes: tuple) -> Callable:
    """`jax.vmap(fn, in_axes)` over the member axis; for a single member (decided when traced,
    from the static shape), `fn` on it directly with the axis added back to its outputs. Same
    results, but the one-member program has no batch dimension of size 1 in its matrix products,
    which XLA's CPU backend runs markedly slower (the paper's one-seed setting: 16.7 -> 22
    gradient updates/s on a 2-core CPU)."""
    batched = jax.vmap(fn, in_axes=in_axes)

    def call(*args):
        mapped = [arg for arg, axis in zip(args, in_axes) if axis == 0]
        if jax.tree.leaves(mapped[0])[0].shape[0] != 1:
            return batched(*args)
        single = [jax.tree.map(lambda x: x[0], arg) if axis == 0 else arg for arg, axis in zip(args, in_axes)]
        return jax.tree.map(lambda x: x[None], fn(*single))

    return call


def member_inputs(members: list[tuple[int, Any]], tasks: list[Any] | None = None) -> tuple[jax.Array, Any, Any]:
    """(seeds[M], the members' configs stacked (knobs [M]), task constants stacked on [M] or None)
    for `Trainer.init`, from (seed, algorithm config) pairs and each member's task constants."""
    seeds = jp.asarray([seed for seed, _ in members], jp.int32)
    configs = stack_configs([config for _, config in members])
    if tasks is None or tasks[0] is None:
        return seeds, configs, None
    return seeds, configs, jax.tree.map(lambda *leaves: jp.stack([jp.asarray(v) for v in leaves]), *tasks)


def non_finite_metrics(metrics: dict[str, Any]) -> dict[str, list[int]]:
    """{metric name: members where it is NaN or infinite} for host metrics with a member axis."""
    bad = {}
    for name, value in metrics.items():
        value = np.asarray(value).reshape(np.shape(value)[0], -1)
        members = np.flatnonzero(~np.all(np.isfinite(value), axis=1))
        if members.size:
            bad[name] = members.tolist()
    return bad
