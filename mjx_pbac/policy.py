"""A trained policy back from its run directory.

`load_policy(run_dir)` gives one member's policy as a jitted `act(obs, key=None) -> action`, with
the env it acts in, the run's config and the member (seed, label, task). `restore(run_dir)` gives
every member's policy at once, on the device, with the trainer whose evaluation program runs it:
`train.py evaluate` evaluates them all in one program.

Nothing here writes to the run directory: checkpoints are read (a damaged one is reported, never
renamed), the run's own logs are not touched, and a run still training may be read.

    from mjx_pbac import load_policy
    policy = load_policy("runs/quickstart")           # member 0, newest checkpoint
    action = policy.act(obs)                          # as evaluation acts: deterministic
    action = policy.act(obs, jax.random.key(0))       # as training acts: exploration
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jp
import numpy as np

from mjx_pbac import checkpoint as checkpoints, devices, normalization, rundir
from mjx_pbac.build import Parts, assemble
from mjx_pbac.config import Member, RunConfig, expand_members
from mjx_pbac.loop import Policy, member_inputs, over_members, with_matmul_precision
from mjx_pbac.rundir import RunError


@dataclasses.dataclass(frozen=True)
class Restored:
    """Every member's policy of a run at one checkpoint, on the device."""

    config: RunConfig
    """The run's config (with the env overrides and episode count asked for, `restore`'s)."""
    profile: str
    members: list[Member]
    parts: Parts
    """The env (the tasks of one robot as one env), the algorithm and the trainer, assembled for
    the members as the run assembled them."""
    policy: Policy
    """The members' policies (leaves [M, ...]): agent, observation moments, task constants (of
    the env as built now, so an env override reaches them), seed and env steps."""
    checkpoint: Path
    env_steps: int

    def member_env(self, index: int) -> Any:
        """Member `index`'s env: the run's env with that member's task constants."""
        task = jax.tree.map(lambda leaf: leaf[index], self.policy.task)
        return self.parts.env if task is None else self.parts.env.with_task(task)


@dataclasses.dataclass(frozen=True)
class LoadedPolicy:
    """One member's trained policy (`load_policy`)."""

    act: Callable[..., jax.Array]
    """act(obs, key=None) -> action in [-1, 1]: `obs` one observation [o] or a batch [B, o]
    (unnormalised: the run's observation normalisation is applied inside). Without a key, the
    evaluation rule (PBAC: the K-head actor's rule of the paper, `algos.pbac`); with one, the
    training rule (exploration; PBAC: one head drawn per observation, as a new episode does)."""
    env: Any
    """The env the member trained in (its task's constants in place), Brax-style reset/step."""
    env_name: str
    """The member's task: an `envs` registry name."""
    config: RunConfig
    member: Member
    """index, seed, label and task of the member (and its algorithm config)."""
    checkpoint: Path
    env_steps: int
    """The env steps the checkpoint was taken at."""


def checkpoint_path(run_dir: Path, which: int | str | Path | None = None) -> Path:
    """The checkpoint file `which` of `run_dir`: None the newest, an int the one taken at that
    many env steps, else a file name in RUN_DIR/checkpoints or a path. A RunError names the
    checkpoints there are."""
    directory = Path(run_dir) / rundir.CHECKPOINTS
    found = checkpoints.list_checkpoints(directory)
    there = ", ".join(p.name for p in found) or "none"
    if which is None:
        if not found:
            raise RunError(f"{run_dir} has no checkpoint (no {directory}/step_<env steps>.npz): nothing to load")
        return found[-1]
    if isinstance(which, int) or (isinstance(which, str) and which.isdigit()):
        path = directory / f"step_{int(which):09d}.npz"
    else:
        path = Path(which) if Path(which).parent != Path(".") else directory / str(which)
    if not path.is_file():
        raise RunError(f"no checkpoint {path}; the checkpoints of {run_dir}: {there}")
    return path


def check_member(members: list[Member], index: int, run_dir: str | Path, name: str = "member") -> None:
    """A RunError (one line, every member listed) unless `index` names one of `members`."""
    count = len(members)
    if not 0 <= index < count:
        labels = ", ".join(f"{m.index} ({m.label}, seed {m.seed}, {m.task})" for m in members)
        raise RunError(f"{name} {index} is out of range: {run_dir} has {count} member(s), 0..{count - 1}: {labels}")


def restore(
    run_dir: str | Path,
    which: int | str | Path | None = None,
    episodes: int | None = None,
    env_overrides: tuple[str, ...] = (),
    member: tuple[int, str] | None = None,
) -> Restored:
    """Every member's policy of `run_dir` at checkpoint `which` (`checkpoint_path`), with the
    trainer assembled for `episodes` evaluation episodes (None: the run's) in the env with
    `env_overrides` ("key=value") added to the run's. `member` (index, the option's name): a
    member the caller needs, checked from the config before anything is built or read. A
    RunError says what is wrong: no run directory, an invalid config, a member out of range, no
    or a damaged checkpoint, one of another configuration."""
    run_dir = Path(run_dir)
    config, profile = rundir.load_run_config(run_dir)
    if member is not None:
        check_member(expand_members(config), member[0], run_dir, member[1])
    train = config.train
    train = dataclasses.replace(
        train,
        eval_episodes=train.eval_episodes if episodes is None else episodes,
        env_overrides=train.env_overrides + tuple(env_overrides),
        eval_batch=1,
        devices=1,
    )
    config = dataclasses.replace(config, train=train)
    members = expand_members(config)
    try:
        parts = assemble(config, [m.config for m in members], donate=False)
    except (ValueError, TypeError) as error:
        raise RunError(str(error)) from None
    params = dict(zip(train.task_names, parts.task_params))
    inputs = member_inputs([(m.seed, m.config) for m in members], [params[m.task] for m in members])
    layout = devices.layout(len(members), 1)
    template = layout.host_template(jax.eval_shape(parts.trainer.init, *inputs))
    path = checkpoint_path(run_dir, which)

    @functools.cache
    def initial() -> list:  # a checkpoint older than a knob of the state: the config's values
        return jax.tree.leaves(layout.gather(parts.trainer.init(*inputs)))

    try:
        state, metadata = checkpoints.restore(path, template, fill=lambda i: initial()[i])
    except checkpoints.CheckpointError as error:
        older = [p.name for p in checkpoints.list_checkpoints(path.parent) if p != path]
        hint = f"; other checkpoints: {', '.join(older)}" if older else ""
        raise RunError(f"{error}{hint}") from None
    policy = Policy(
        agent=jax.device_put(state.agent),
        obs_moments=jax.device_put(state.obs_moments),
        task=inputs[2],  # the task constants of the env as built now (its overrides included), not the checkpoint's
        seed=jp.asarray(state.seed),
        env_steps=jp.asarray(state.env_steps),
    )
    return Restored(config, profile, members, parts, policy, path, int(metadata["env_steps"]))


def evaluate(restored: Restored) -> dict[str, np.ndarray]:
    """{"returns": [M, E], "lengths": [M, E], "steps": [M]} of every member's policy: the run's own evaluation
    program (its episodes keyed by each member's seed and the checkpoint's env steps, so the
    checkpoint's own evaluation comes out as the run logged it)."""
    trainer = restored.parts.trainer
    kept = jax.tree.map(lambda leaf: leaf[:, None], restored.policy)  # one kept policy per member
    result = trainer.evaluate_snapshots(kept)
    return {name: np.asarray(value)[:, 0] for name, value in result.items()}


def load_policy(run_dir: str | Path, member: int | None = None, checkpoint: int | str | Path | None = None) -> LoadedPolicy:
    """Member `member` (None: 0) of `run_dir` at `checkpoint` (None: the newest; env steps, a file
    name or a path): its jitted `act` and what it acts in. Raises RunError (one line) for no run
    directory, a config this version cannot read (an unknown algorithm), no or a damaged
    checkpoint, or a member out of range."""
    index = 0 if member is None else member
    restored = restore(run_dir, checkpoint, member=(index, "member"))
    algorithm = restored.parts.algorithm
    train = restored.config.train
    agent, moments = restored.policy.agent, restored.policy.obs_moments

    # Every member acts, as in the run's evaluation program (`loop.over_members`: the same kernels,
    # so the same actions to the bit), and member `index`'s actions are kept.
    def deterministic(agent, moments, obs):
        return algorithm.eval_act(agent, normalization.normalize(moments, obs))

    def exploring(agent, moments, obs, key):
        config = agent.config
        acting_key, head_key, action_key = jax.random.split(key, 3)
        acting = algorithm.acting.init(acting_key, config, obs.shape[0])
        acting = algorithm.acting.step(acting, jp.zeros((obs.shape[0],), jp.int32), head_key)
        return algorithm.act(agent, acting, normalization.normalize(moments, obs), action_key)

    greedy = jax.jit(with_matmul_precision(over_members(deterministic, (0, 0, None)), train.matmul_precision))
    sampled = jax.jit(with_matmul_precision(over_members(exploring, (0, 0, None, None)), train.matmul_precision))

    def act(obs: Any, key: jax.Array | None = None) -> jax.Array:
        obs = jp.asarray(obs, jp.float32)
        single = obs.ndim == 1
        batch = obs[None] if single else obs
        actions = greedy(agent, moments, batch) if key is None else sampled(agent, moments, batch, key)
        actions = actions[index]
        return actions[0] if single else actions

    chosen = restored.members[index]
    return LoadedPolicy(act, restored.member_env(index), chosen.task, restored.config, chosen, restored.checkpoint, restored.env_steps)
