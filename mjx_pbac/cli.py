"""The command line's shared parsing: `parse` (tyro, with its errors as one line), the training
options with their shorthands (--seeds, --devices, --sweep, --tasks), the profile choice, and what
a resumed run may change. Each command's own options are a dataclass in its module of
mjx_pbac/commands/, which acts on what these return; library code takes the typed configs.

A command that trains reads its profile first (`choose`: --profile NAME and the options that
come before a profile), then parses the rest with the profile's values as the defaults that
`--help` shows and the options override (`configure`). table and probe read their own options
first (`parse(..., known_only=True)`) and apply the rest to each run's profile.

`program()` is how the process was started, `python train.py` or `mjx-pbac` (the installed
command): usages, helps and the commands that messages suggest name it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import sys
import typing
from pathlib import Path
from typing import Annotated, Any

import tyro

from mjx_pbac.config import RunConfig, TrainConfig

_BOX = re.compile(r"[\u2500-\u257f]+")

_EXAMPLES = {"--seeds": "10", "--sweep": "bootstrap_rate=0.01,0.05", "--tasks": "ant_delayed,ant_very_delayed"}
"""What the training shorthands take, for the message when one is given without a value."""


def program() -> str:
    """The command line's program as it was started: `mjx-pbac` for the installed command
    ([project.scripts], whose script is the process's sys.argv[0]), else `python train.py` (also
    what a caller of `commands.run` in its own process gets)."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return "mjx-pbac" if re.sub(r"(-script\.pyw?|\.exe)$", "", name) == "mjx-pbac" else "python train.py"


def asks_help(args: list[str]) -> bool:
    """Whether `args` asks for a help (-h, --help), which tyro prints before any other check."""
    return any(arg in ("-h", "--help") for arg in args)


def profile_hint(prog: str) -> str:
    """The line a help without a profile adds: its defaults are the built-in ones."""
    return f"The defaults shown are the built-in ones; `{prog} --profile NAME --help` shows a profile's values."


def parse(kind: type, args: list[str], prog: str, known_only: bool = False, **kwargs):
    """`tyro.cli(kind, args=args, prog=prog, **kwargs)`, booleans taking a value (--pbac.use-propagation
    False, as in profiles and sweeps), whose parse errors (a bad value, an unknown option), which
    tyro draws as a box of several lines, come out as one line: SystemExit("error: ...").

    `known_only` parses the options `kind` declares and returns (parsed, the other arguments)
    for a later parse. An option of such a parse, or a training shorthand, given without its
    value is refused as "--FLAG needs a value"."""
    kwargs.setdefault("config", (tyro.conf.FlagConversionOff,))
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return tyro.cli(kind, args=args, prog=prog, return_unknown_args=known_only, **kwargs)
    except SystemExit as exit_:
        text = captured.getvalue()
        if exit_.code in (0, None):
            sys.stderr.write(text)
            raise
        lines = [_BOX.sub(" ", line).strip() for line in text.splitlines()]
        lines = [line for line in lines if line and not line.startswith("For full helptext")]
        title = lines[0] if lines else "bad command line"
        detail = " ".join(" ".join(lines[1:]).split())
        missing = re.search(r"Missing value for argument '(--[^'/]+)", detail)  # '--seeds/--train.num-seeds'
        if missing and known_only:
            raise SystemExit(f"error: {missing[1]} needs a value") from None
        if missing and missing[1] in _EXAMPLES:
            raise SystemExit(f"error: {missing[1]} needs a value, e.g. {missing[1]} {_EXAMPLES[missing[1]]}") from None
        raise SystemExit(f"error: {title.lower()}: {detail} (see {prog} --help)") from None


def _fields(instance: Any, cls: type) -> dict[str, Any]:
    return {f.name: getattr(instance, f.name) for f in dataclasses.fields(cls)}


# tyro parses a field as the subclass its default is an instance of: a RunConfig whose train
# section is a TrainOptions takes the shorthands as options of that section, and their values are
# checked where TrainConfig checks its own (a malformed --sweep reads as a malformed --train.sweep).
@dataclasses.dataclass(frozen=True)
class TrainOptions(TrainConfig):
    """What to train on, for how long, and what a run writes.
    --seeds, --devices, --sweep and --tasks are shorthands."""

    num_seeds: Annotated[int, tyro.conf.arg(aliases=("--seeds",))] = 1
    devices: Annotated[int, tyro.conf.arg(aliases=("--devices",))] = 0
    sweeps: Annotated[
        tuple[str, ...], tyro.conf.arg(name="sweep", prefix_name=False, metavar="NAME=v1,v2,..."), tyro.conf.UseAppendAction
    ] = ()
    """A grid over one of the algorithm's knobs (`--help` without a command lists them); repeat to cross more (replaces --train.sweep)."""
    task_list: Annotated[str | None, tyro.conf.arg(name="tasks", prefix_name=False, metavar="A,B,...", help_behavior_hint="")] = None
    """Shorthand for --train.tasks A B: more tasks of the same robot, comma-separated."""

    def __post_init__(self) -> None:
        if self.sweeps:
            object.__setattr__(self, "sweep", self.sweeps)
        if self.task_list is not None:
            object.__setattr__(self, "tasks", tuple(task.strip() for task in self.task_list.split(",") if task.strip()))
        super().__post_init__()

    @classmethod
    def wrap(cls, config: RunConfig) -> RunConfig:
        return dataclasses.replace(config, train=cls(**_fields(config.train, TrainConfig)))

    @staticmethod
    def unwrap(config: RunConfig) -> RunConfig:
        return dataclasses.replace(config, train=TrainConfig(**_fields(config.train, TrainConfig)))


def configure(base: RunConfig, args: list[str], prog: str, **kwargs) -> RunConfig:
    """`base` with the training options in `args` (--train.KEY VALUE, --algo, --ALGO.KEY VALUE and
    the shorthands) applied; `base`'s values are the defaults `--help` shows. `kwargs` go to
    `parse` (e.g. the help's description)."""
    return TrainOptions.unwrap(parse(RunConfig, args, prog, default=TrainOptions.wrap(base), **kwargs))


@dataclasses.dataclass(frozen=True)
class ProfileChoice:
    profile: str | None = None
    """profiles/NAME.toml, whose values are the defaults of the other options."""


@dataclasses.dataclass(frozen=True)
class TrainChoice(ProfileChoice):
    profile_file: str | None = None
    """A TOML profile anywhere, instead of --profile."""
    resume: str | None = None
    """A run directory to continue with its saved config."""
    list_profiles: bool = False


def choose(kind: type, argv: list[str]):
    """(the `kind` options, the other arguments): what a command reads before the profile's options."""
    return parse(kind, argv, program(), known_only=True, add_help=False, config=())


def resume_changes(args: list[str], run_dir: str) -> dict[str, Any]:
    """`--train.total-steps 600000 ...` given with --resume -> {"total_steps": 600000}: only the
    settings a resumed run may change (rundir.CHANGEABLE_ON_RESUME)."""
    from mjx_pbac.rundir import CHANGEABLE_ON_RESUME

    hints = typing.get_type_hints(TrainConfig)
    aliases = {"devices": ("--devices",)}  # the training shorthands that stay changeable
    train = dataclasses.make_dataclass(
        "train",
        [
            (name, Annotated[hints[name] | None, tyro.conf.arg(aliases=aliases.get(name, ()), help_behavior_hint="(default: the run's)")], None)
            for name in CHANGEABLE_ON_RESUME
        ],
    )
    resume = dataclasses.make_dataclass("Resume", [("train", train, dataclasses.field(default_factory=train))])
    description = f"Continues the run in {run_dir} with the config saved in its config.json; only these may change."
    config = (tyro.conf.FlagConversionOff, tyro.conf.DisallowNone)  # None stands for "unchanged" only
    changes, unknown = parse(resume, args, f"{program()} --resume {run_dir}", known_only=True, description=description, config=config)
    if unknown:
        changeable = ", ".join("--train." + name.replace("_", "-") for name in CHANGEABLE_ON_RESUME)
        raise SystemExit(
            f"error: --resume RUN_DIR continues the run with the config saved in {run_dir}/config.json; "
            f"{unknown[0].partition('=')[0]} cannot change on resume (changeable: {changeable})"
        )
    return {name: value for name, value in _fields(changes.train, train).items() if value is not None}
