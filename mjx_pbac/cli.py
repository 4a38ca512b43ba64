"""What train.py's command line says: the options of each command as a dataclass that tyro
parses, the training shorthands (--seeds, --sweep, --tasks), and `parse`, tyro with its errors
as one line. train.py acts on what these return; library code takes the typed configs.

A command that trains reads its profile first (`choose`: --profile NAME and the options that
come before a profile), then parses the rest with the profile's values as the defaults that
`--help` shows and the options override (`configure`). table and probe read their own options
first (`parse(..., known_only=True)`) and apply the rest to each run's profile.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import sys
import typing
from typing import Annotated, Any, Literal

import tyro

from mjx_pbac.config import Platform, RunConfig, TrainConfig
from mjx_pbac.probe import DEFAULT_LENGTHS, VARIANTS
from mjx_pbac.table import PAPER_ALGOS

_BOX = re.compile(r"[\u2500-\u257f]+")

_EXAMPLES = {"--seeds": "10", "--sweep": "bootstrap_rate=0.01,0.05", "--tasks": "ant_delayed,ant_very_delayed"}
"""What the training shorthands take, for the message when one is given without a value."""


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
    """A grid over one of the algorithm's knobs (`train.py --help` lists them); repeat to cross more (replaces --train.sweep)."""
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


def configure(base: RunConfig, args: list[str], prog: str) -> RunConfig:
    """`base` with the training options in `args` (--train.KEY VALUE, --algo, --ALGO.KEY VALUE and
    the shorthands) applied; `base`'s values are the defaults `--help` shows."""
    return TrainOptions.unwrap(parse(RunConfig, args, prog, default=TrainOptions.wrap(base)))


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
    return parse(kind, argv, "train.py", known_only=True, add_help=False, config=())


def resume_changes(args: list[str], run_dir: str) -> dict[str, Any]:
    """`--train.total-steps 600000 ...` given with --resume -> {"total_steps": 600000}: only the
    settings a resumed run may change (runner.CHANGEABLE_ON_RESUME)."""
    from mjx_pbac.runner import CHANGEABLE_ON_RESUME

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
    changes, unknown = parse(resume, args, f"train.py --resume {run_dir}", known_only=True, description=description, config=config)
    if unknown:
        changeable = ", ".join("--train." + name.replace("_", "-") for name in CHANGEABLE_ON_RESUME)
        raise SystemExit(
            f"error: --resume RUN_DIR continues the run with the config saved in {run_dir}/config.json; "
            f"{unknown[0].partition('=')[0]} cannot change on resume (changeable: {changeable})"
        )
    return {name: value for name, value in _fields(changes.train, train).items() if value is not None}


# -- the commands' options --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ProfileArgs:
    """Throughput of the training loop for a profile: compile time, env steps/s and gradient
    updates/s in steady state, peak memory; JSON report naming the device."""

    run: Annotated[RunConfig, tyro.conf.arg(name="")]
    measure_steps: int = 0
    """Env steps per timed chunk; 0 picks 20 vector steps."""
    timed_chunks: int = 3
    """Chunks timed after an untimed one (the median is reported)."""
    baseline: tuple[str, ...] = ()
    """Env overrides KEY=VALUE of a baseline measured the same way in the same process, e.g.
    `--baseline solver_loop=while ls_iterations=8` (MJX's own solve, the earlier line search)."""
    phases: bool = True
    """Also time the env step and the gradient steps alone (two more programs to compile)."""
    evaluate: bool = True
    """Also compile and time evaluation."""
    split_lengths: tuple[int, ...] = ()
    """Also time the training chunk split into chunks of these many iterations (divisors of the
    measured chunk), as --train.chunk-seconds splits a run's: the throughput it costs."""
    compile_threads: int = 1
    """Programs compiled at once: 1 in turn (each compile timed alone), 0 as a run compiles them
    (at most half the machine's cores at once), N at most N at once."""
    out: str = "profile.json"
    """Where the JSON report goes."""


@dataclasses.dataclass(frozen=True)
class BenchSeedsArgs:
    """N seeds as one vmapped program against N sequential runs, sharded over 1, 2, ... D devices:
    time per chunk, speed-ups and device footprint for each N and D; JSON report naming the device."""

    run: Annotated[RunConfig, tyro.conf.arg(name="")]
    seed_counts: tuple[int, ...] = (1, 2, 4, 8, 10)
    """Numbers of seeds N to measure (1 is always measured: it gives the sequential time)."""
    device_counts: Annotated[tuple[int, ...], tyro.conf.arg(help_behavior_hint="(default: 1 2 4 ... every visible device)")] = ()
    """Numbers of devices D to shard each N over (1 is always measured)."""
    measure_steps: int = 0
    """Env steps per timed chunk (rounded up to whole vector steps); 0 picks 20 vector steps."""
    timed_chunks: int = 3
    """Chunks timed per N after an untimed one (the median is reported)."""
    out: str = "bench_seeds.json"
    """Where the JSON report goes."""


@dataclasses.dataclass(frozen=True)
class TableArgs:
    """Runs every task x algorithm of a paper table block at its profile's settings, the paper's
    budgets (profiles/TASK.toml), N seeds as one vmapped program per run and the tasks of one
    robot (e.g. ant, ant_delayed, ant_very_delayed) as members of one program, then writes the
    report (the paper's final-reward and AULC tables, curves) to OUT/report. Running the same
    command again continues: finished runs are skipped, interrupted ones resume.

    Any training option (--train.KEY VALUE, --ALGO.KEY VALUE, --sweep NAME=v1,v2,...) applies to
    every run, e.g. --train.total-steps 20000 for a short trial."""

    block: Annotated[str | None, tyro.conf.arg(metavar="BLOCK")] = None
    """dmc | dense | delayed | mujoco (dense + delayed) | table1 (all three blocks) | metaworld
    (= table2: the paper's Table 2, sparse Meta-World, 5 seeds in the paper: --seeds 5)."""
    tasks: Annotated[str | None, tyro.conf.arg(metavar="T1,T2,...")] = None
    """Instead of a block: any profiles, comma-separated (e.g. chain)."""
    algos: Annotated[str, tyro.conf.arg(metavar="A1,A2,...")] = ",".join(PAPER_ALGOS)
    """Comma-separated algorithms (--algo's choices); by default the paper's columns."""
    seeds: Annotated[int | None, tyro.conf.arg(help_behavior_hint="(default: 10; 5 for metaworld)")] = None
    """Seeds per run; by default the paper's: 10, and 5 for the Meta-World block."""
    out: Annotated[str | None, tyro.conf.arg(metavar="DIR", help_behavior_hint="(default: tables/BLOCK)")] = None
    """The table directory."""
    group_tasks: bool = True
    """False runs every task in a program of its own."""


@dataclasses.dataclass(frozen=True)
class ProbeArgs:
    """Trains every probe variant on the deep-sea chain (envs/deep_chain.py: a fixed random
    action sign per cell, so no constant action reaches the goal) at each length, the lengths x
    seeds as members of one program per variant, at the probe profile's settings, e.g.
    profiles/deep_chain.toml: one head per episode for the posterior-sampling methods, a stated
    initial temperature for soft actors. Writes OUT/probe.md and OUT/probe.json (per variant and
    length: seeds that reached the goal in training, first-visit step, final greedy return, seeds
    solved, ensemble disagreement; per variant the largest length solved in >= 8/10 seeds),
    OUT/probe_success.png and OUT/spread_position.png. Running the same command again continues:
    finished variants are skipped, interrupted ones resume; `train.py report OUT` rewrites the
    report.

    Any training option applies to every variant, e.g. --train.total-steps 5000 for a short trial."""

    algos: Annotated[str, tyro.conf.arg(metavar="V1,V2,...|all", help=f"Comma-separated variants, or all: {', '.join(VARIANTS)}.")] = "all"
    lengths: Annotated[str, tyro.conf.arg(metavar="L1,L2,...")] = ",".join(map(str, DEFAULT_LENGTHS))
    """Comma-separated integer chain lengths."""
    seeds: int = 10
    """Seeds per length."""
    out: Annotated[str | None, tyro.conf.arg(metavar="DIR", help_behavior_hint="(default: probes/PROFILE)")] = None
    """The probe directory."""
    profile: str = "deep_chain"
    """The probe profile."""


@dataclasses.dataclass(frozen=True)
class ReportArgs:
    """The paper's tables (final episode reward and AULC, IQM [lower, upper] over seeds, bold by a
    one-sided paired t-test) as Markdown and LaTeX, and reward-curve PNGs, from finished runs."""

    run_dirs: tyro.conf.Positional[tuple[str, ...]]
    """Run directories; their members are grouped by task (env) and method (label), seeds paired by seed."""
    out: str = "report"
    """Directory for results.md, results.tex and the figures."""
    explore: Annotated[tuple[tuple[str, ...], ...], tyro.conf.arg(metavar="RUN_DIR,X_KEY,Y_KEY"), tyro.conf.UseAppendAction] = ()
    """Exploration pictures RUN_DIR,X_KEY,Y_KEY (e.g. runs/x,x_position,y_position; Y_KEY may be env_steps)."""
    phases: int = 5
    """Training phases (panels) per exploration picture."""
    member: int | None = None
    """Draw only this member in the exploration pictures (default: all, coloured by member)."""
    x: tuple[Literal["steps", "wall", "train"], ...] = ("steps",)
    """The curves' x axes, one figure per task each: env steps, the run's wall-clock (compiles and
    evaluations included) or its training time, in minutes; e.g. `--x steps wall`."""
    score: tuple[str, ...] = ()
    """Scores of the time-to-score table: NUMBER for every task, or TASK=NUMBER (repeatable in one
    list); default: the paper's PBAC final value on each task (`mjx_pbac/paper.py`)."""
    score_fraction: tuple[float, ...] = (1.0,)
    """Fractions of the score to time, one table row each, e.g. `--score-fraction 0.9 1.0`."""
    by_run: bool = False
    """Name each method after its run directory too, RUN/LABEL (e.g. u8/pbac): runs of the same task
    and algorithm with other options are then compared side by side, not taken as seeds of one method."""


BENCH_PRESETS = {
    "quick": dict(env_names=("hopper",), num_envs=(1, 16), steps_per_call=10, repeats=2, gymnasium_steps=300),
    "cpu": dict(env_names=("ant", "hopper", "humanoid"), num_envs=(1, 64, 256), steps_per_call=10, repeats=2),
    "gpu": dict(
        env_names=("ant", "hopper", "humanoid"),
        num_envs=(1, 64, 256, 1024, 4096, 8192, 16384, 32768),
        steps_per_call=50,
        repeats=3,
        gymnasium_steps=2000,
    ),
}


@dataclasses.dataclass(frozen=True)
class BenchEnvArgs:
    """Measure env steps/s and compile time for a range of instance counts; write JSON."""

    preset: Literal["quick", "cpu", "gpu"] = "quick"
    """Starting point for the sizes below: quick (one env, seconds), cpu, or gpu (up to 32768)."""
    env: tuple[str, ...] = ()
    """Registered env names to time; empty keeps the preset's."""
    num_envs: tuple[int, ...] = ()
    """Instance counts; empty keeps the preset's."""
    steps_per_call: int | None = None
    """Env steps per jitted call; None keeps the preset's."""
    repeats: int | None = None
    """Timed calls per size (median reported); None keeps the preset's."""
    gymnasium_steps: int | None = None
    """Steps of Gymnasium's C MuJoCo env to time (0 skips it); None keeps the preset's."""
    set: tuple[str, ...] = ()
    """Env overrides KEY=VALUE for every env, e.g. --set integrator=euler iterations=2."""
    out: str = "bench_env.json"
    """Where the JSON report goes."""
    platform: Platform = "auto"
    """Where to measure, as the training command's --train.platform (gpu / tpu: an error, not a
    silent CPU measurement, when JAX has no such device)."""

    def bench_config_fields(self) -> dict[str, Any]:
        """The preset's EnvBenchConfig fields with the given sizes in place of its own."""
        given = {"env_names": self.env, "num_envs": self.num_envs, "steps_per_call": self.steps_per_call,
                 "repeats": self.repeats, "gymnasium_steps": self.gymnasium_steps}
        return {**BENCH_PRESETS[self.preset], **{name: value for name, value in given.items() if value not in ((), None)}}
