"""The one assembly of a run: its env (the tasks of one robot as one env), its members, the
algorithm over their configs, the jitted trainer, and the members' layout over the devices. The
runner, `train.py profile`, the probe, the memory estimate and the benchmarks all build here."""

from __future__ import annotations

from typing import Any, NamedTuple

import envs
from mjx_pbac import algos, devices
from mjx_pbac.algos import Algorithm
from mjx_pbac.config import Member, RunConfig, TrainConfig, expand_members, parse_overrides
from mjx_pbac.devices import Layout
from mjx_pbac.loop import Trainer, make_trainer, member_inputs


class Parts(NamedTuple):
    env: Any
    task_params: list[Any]
    """Each task's constants, in `train.task_names` order (`env.task_params()`, None for envs without them)."""
    algorithm: Algorithm
    trainer: Trainer


def make_env(train: TrainConfig) -> tuple[Any, list[Any]]:
    """The run's env (its tasks as one env of one robot, with the run's env overrides) and each
    task's constants; builds the model, compiles nothing. ValueError/TypeError/RuntimeError for
    a bad env name, task or override."""
    return envs.make_family(train.task_names, **parse_overrides(train.env_overrides))


def assemble(
    config: RunConfig, member_configs: list[Any], donate: bool = True, mesh: Any = None, fuse_warmup: bool | None = None,
    any_length: bool | None = None,
) -> Parts:
    """Env, algorithm over `member_configs` and jitted trainer of `config`; raises
    ValueError/TypeError for a bad env name, override or algorithm option. `mesh`, `donate` and
    `fuse_warmup` as `loop.make_trainer`'s."""
    train = config.train
    env, params = make_env(train)
    algorithm = algos.make(config.algo, member_configs, env.observation_size, env.action_size)
    trainer = make_trainer(train, env, algorithm, donate=donate, mesh=mesh, fuse_warmup=fuse_warmup, any_length=any_length)
    return Parts(env, list(params), algorithm, trainer)


class Built(NamedTuple):
    env: Any
    algorithm: Algorithm
    trainer: Trainer
    members: list[Member]
    task_params: dict[str, Any]
    """Task name -> its constants (`env.task_params()`, None for envs without them)."""
    layout: Layout
    """How the members lie over the devices (`mjx_pbac.devices`)."""

    def init_state(self):
        """The members' initial training state (leading axis: the layout's padded member count,
        laid out over its devices)."""
        members = self.layout.pad(self.members)
        pairs = [(m.seed, m.config) for m in members]
        tasks = [self.task_params[m.task] for m in members]
        return self.trainer.init(*self.layout.put(member_inputs(pairs, tasks)))


def build(config: RunConfig, donate: bool = True, fuse_warmup: bool | None = None, any_length: bool | None = None) -> Built:
    """Every member of `config` (`config.expand_members`), laid out over its devices, and the
    parts assembled for them (`assemble`); raises ValueError/TypeError for a bad env name,
    override, task, sweep or device count. `fuse_warmup` None: a warm-up of one chunk runs in
    the training program."""
    members = expand_members(config)
    layout = devices.layout(len(members), config.train.devices)
    parts = assemble(config, [m.config for m in members], donate=donate, mesh=layout.mesh, fuse_warmup=fuse_warmup, any_length=any_length)
    return Built(parts.env, parts.algorithm, parts.trainer, members, dict(zip(config.train.task_names, parts.task_params)), layout)
