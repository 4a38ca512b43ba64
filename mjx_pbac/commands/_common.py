"""What several commands share: a profile read by name, the device they compute on, and the
checks that refuse bad input before anything compiles. Each turns the library's ValueError into
the one-line `SystemExit("error: ...")` that `commands.run` prints with exit code 2."""

from __future__ import annotations

import dataclasses
import inspect
import sys
import typing
from typing import Any

from mjx_pbac import cli
from mjx_pbac.config import RunConfig


def algo_names() -> tuple[str, ...]:
    """The algorithm names: the choices of RunConfig's `algo` field."""
    return typing.get_args(typing.get_type_hints(RunConfig)["algo"])


def parse_overrides(pairs: tuple[str, ...]) -> tuple[tuple[str, Any], ...]:
    """("integrator=euler", "iterations=2") -> (("integrator", "euler"), ("iterations", 2))."""
    from mjx_pbac.config import parse_overrides as parse

    try:
        return tuple(parse(pairs).items())
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None


def overrides_tail(overrides: tuple[str, ...]) -> str:
    """"_<overrides>" for a file name of what a command wrote with env overrides ("" without)."""
    from mjx_pbac.rundir import safe_name

    return "_" + safe_name("_".join(overrides)) if overrides else ""


def load(name: str | None, path: str | None = None) -> RunConfig:
    """The RunConfig of profile `name` (or of the TOML file `path`)."""
    from mjx_pbac.config import load_profile, load_profile_file, profile_names

    if name is None and path is None:
        raise SystemExit(f"error: --profile NAME is required; available: {', '.join(profile_names())}")
    try:
        return load_profile(name) if path is None else load_profile_file(path)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None


def task_profile(task: str, profile: str | None, env: str) -> str | None:
    """The profile an extra task (`--tasks`) of a run of `profile` on `env` takes its per-task
    values from: `profile` with the task in place of its env where that profile exists (a run of
    ant_delayed_fast: ant_fast; of ant_delayed: ant), else the profile named as the task; None
    when there is neither."""
    from mjx_pbac.config import profile_names

    names = profile_names()
    if profile is not None and profile.startswith(env) and f"{task}{profile[len(env):]}" in names:
        return f"{task}{profile[len(env):]}"
    return task if task in names else None


def with_task_profiles(config: RunConfig, rest: list[str], prog: str, profile: str | None = None) -> RunConfig:
    """`config` (a run of `profile`) whose extra tasks (`--tasks`, or the profile's `tasks`) take
    the sweepable knobs of their own profiles (`task_profile`, with the same command-line options),
    e.g. ant_very_delayed's prior variance 5.0; prints what it set. Tasks without a profile keep
    the run's values; a task profile that differs in what the members of one program share (sizes,
    budgets) is refused."""
    from mjx_pbac import build
    from mjx_pbac.config import merge_task_configs

    tasks = {task: task_profile(task, profile, config.train.env) for task in config.train.tasks}
    tasks = {task: name for task, name in tasks.items() if name is not None}
    if not tasks:
        return config
    try:  # the tasks must share one robot before their profiles are compared
        build.make_env(config.train)
    except (ValueError, TypeError, RuntimeError) as error:
        raise SystemExit(f"error: {error}") from None
    # What is trained (env, tasks and per-task values) stays this run's; the options apply alike.
    trained = {name: getattr(config.train, name) for name in ("env", "tasks", "task_overrides")}
    task_configs = {}
    for task, name in tasks.items():
        other = load(name)
        task_configs[task] = cli.configure(dataclasses.replace(other, train=dataclasses.replace(other.train, **trained)), rest, prog)
    try:
        merged = merge_task_configs(config, task_configs)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    added = merged.train.task_overrides[len(config.train.task_overrides):]
    if added:
        print("per-task settings from the tasks' profiles: " + " ".join(added), file=sys.stderr)
    return merged


def use_platform(platform: str, option: str = "--train.platform") -> None:
    """Puts the process on the platform asked for (`--train.platform`) before anything touches a
    device, and prints the device it computes on as the command's first line (a one-line error
    when that platform is not there, never a silent run on the CPU)."""
    from mjx_pbac import devices

    try:
        line, warning = devices.use_platform(platform, option)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    print(line, flush=True)
    if warning:
        print(warning, file=sys.stderr, flush=True)


def check_env(config: RunConfig) -> None:
    """Fails fast, before any compile, on a bad env name, env override, task or sweep value."""
    from mjx_pbac import build
    from mjx_pbac.config import expand_members

    try:
        build.make_env(config.train)
        # The sweep and task values are checked on one seed's members: a million seeds are the
        # memory estimate's to refuse (runner.train), not a list to build here.
        expand_members(dataclasses.replace(config, train=dataclasses.replace(config.train, num_seeds=1)))
    except (ValueError, TypeError, RuntimeError) as error:
        raise SystemExit(f"error: {error}") from None


def check_memory(config: RunConfig) -> None:
    """Refuses, before anything compiles, a measurement whose run cannot fit the device."""
    from mjx_pbac import memory

    try:
        memory.check(config)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None


def measurement(kind: type, command: str, argv: list[str]) -> tuple[str, Any]:
    """(profile name, the command's options) of `train.py COMMAND --profile NAME ...`: the options
    `kind` declares, its `run` field the profile's config with the training options applied.
    `COMMAND --help` without a profile shows the options with the built-in defaults."""
    chosen, rest = cli.choose(cli.ProfileChoice, argv)
    prog = f"{cli.program()} {command}"
    if chosen.profile is None and cli.asks_help(rest):  # the help exits in the parse below
        base, help_text = RunConfig(), {"description": f"{inspect.getdoc(kind)}\n\n{cli.profile_hint(prog)}"}
    else:
        base, help_text, prog = load(chosen.profile), {}, f"{prog} --profile {chosen.profile}"
    args = cli.parse(kind, rest, prog, default=kind(run=cli.TrainOptions.wrap(base)), **help_text)
    args = dataclasses.replace(args, run=cli.TrainOptions.unwrap(args.run))
    use_platform(args.run.train.platform)
    check_env(args.run)
    return chosen.profile, args


def sets_what_is_chosen(rest: list[str]) -> bool:
    """Whether the training options `rest` set what table and probe choose for each run: the
    profile, algorithm, env or tasks."""
    return any(
        arg.partition("=")[0] in ("--profile", "--resume", "--algo", "--tasks", "--train.env", "--train.tasks")
        for arg in rest
    )


def one_process(command: str) -> None:
    """Refuses `command` in a multi-process launch: it plans its runs from what is on disk between
    runs, which only one process can do consistently (on a multi-GPU host, one process uses
    every GPU)."""
    import jax

    if jax.process_count() > 1:
        raise SystemExit(
            f"error: {cli.program()} {command} runs in one process (it uses every device of its host); on several hosts, "
            "run each of its runs with the training command (docs/seeds.md, section: Several devices and hosts)"
        )
