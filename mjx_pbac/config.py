"""Typed, frozen configuration of a training run, and the named presets in `profiles/`.

A run is a `RunConfig`: what to train on and how long (`TrainConfig`), which algorithm (`algo`),
and one section of hyperparameters per registered algorithm (its `Config`, defined in its own
module of `mjx_pbac.algos`; only the selected one is used). Every field has a docstring, which
`train.py --help` shows. A profile (`profiles/NAME.toml`) is a partial `RunConfig` written as
TOML tables `[train]` and one per algorithm (`[pbac]`, `[sac]`, ...); `load_profile` checks every
key and value against these dataclasses, `load_profile_file` does the same for a TOML file
anywhere (profile names are plain names, never paths), and `list_profiles` lists them with the
reason a broken one does not load.

Every value is checked where its dataclass is built (`mjx_pbac.schema`), so a value from the
command line, a profile, a config.json or a sweep is refused alike, with a one-line ValueError.

Members: `expand_members` crosses the sweep grid (over the algorithm's knobs, see
`mjx_pbac.algos`) and the tasks with the seeds. Derived sizes (iterations per chunk, where
evaluation falls) live in `schedule.Schedule`, computed from the config and never written back into it.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import math
import re
import sys
import tomllib
import typing
from pathlib import Path
from typing import Any, Literal

from mjx_pbac import algos
from mjx_pbac.schema import INT32_MAX, check_numbers, coerce, not_finite, require


def _profiles_dir() -> Path:
    """profiles/ beside the package (a checkout, or an editable install), else the copy a wheel
    installs under the environment's share/mjx-pbac/profiles (pyproject's data-files)."""
    beside = Path(__file__).resolve().parent.parent / "profiles"
    installed = Path(sys.prefix) / "share" / "mjx-pbac" / "profiles"
    return beside if beside.is_dir() or not installed.is_dir() else installed


PROFILES_DIR = _profiles_dir()


Platform = Literal["auto", "cpu", "gpu", "tpu"]
"""Where a command computes (`TrainConfig.platform`, bench-env's --platform; `mjx_pbac.devices.use_platform`)."""


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """What to train on, for how long, and what a run writes (paper Tables 5 and 7 for the budgets;
    docs/design.md "Many environments per seed")."""

    env: str = "ant_delayed"
    """Registered environment name (see `envs.registered_names()`)."""
    tasks: tuple[str, ...] = ()
    """More registered envs trained next to `env` as members of the same program (`--tasks`):
    tasks of one robot that differ only in reward constants, e.g. env ant with tasks
    ant_delayed ant_very_delayed. Each task gets its own members (sweep points x seeds)."""
    task_overrides: tuple[str, ...] = ()
    """TASK:NAME=VALUE sets a sweepable knob of the algorithm for the members of one task, e.g.
    ant_very_delayed:prior_variance=5.0 (the paper's per-task values; the training command's `--tasks` fills
    them in from the tasks' profiles and prints them)."""
    env_overrides: tuple[str, ...] = ()
    """Env config overrides KEY=VALUE, e.g. delay_threshold=1.0 (checked against the env's config)."""
    seed: int = 0
    """Seed of the (first) member: initialisation, masks, exploration and env noise. The seeds
    seed..seed+num_seeds-1 must lie in [0, 2**31 - 1] (they are int32 on the device)."""
    num_seeds: int = 1
    """Independent seeds seed, seed+1, ... trained together as a vmapped axis (`--seeds N`)."""
    sweep: tuple[str, ...] = ()
    """Hyperparameter grids NAME=v1,v2,... over the algorithm's numeric knobs (`--sweep`),
    crossed with each other and with the seeds, all in one program; e.g. bootstrap_rate=0.01,0.1."""
    total_steps: int = 300_000
    """Env steps to train for, counted over all instances (warm-up included)."""
    num_envs: int = 1
    """Env instances stepped together; each vector step adds num_envs transitions."""
    batch_size: int = 256
    """Transitions per gradient step."""
    updates_per_step: int = 5
    """Gradient steps per vector env step (the paper: 5 with one env)."""
    buffer_size: int = 100_000
    """Replay capacity in transitions (a FIFO ring on the device)."""
    warmup_steps: int = 10_000
    """Env steps with uniform random actions and no updates before training."""
    normalize_observations: bool = False
    """Beyond the paper (off in its profiles): normalise every network input with the running mean
    and variance of the training envs' observations, kept on the device, updated every vector
    step, frozen for evaluation, saved in checkpoints (`mjx_pbac.normalization`; docs/design.md
    "Recipe options beyond the paper"). Every algorithm supports it."""
    chunk_steps: int = 1_000
    """Env steps per jitted chunk, at most: warm-up, evaluations and checkpoints fall on its
    boundaries. Rounded up to a whole number of vector steps; the step counts below are rounded
    up to whole chunks (the run prints any such rounding and records it in config.json). A chunk
    that would outlast `chunk_seconds` runs as several shorter ones (`mjx_pbac.pacing`)."""
    chunk_seconds: float = 10.0
    """Target wall time of one jitted chunk, in seconds; 0 runs every chunk whole. Metrics, the
    progress bar and stop signals act once per chunk, so each program's first chunk is a probe of
    one vector step that measures its pace, and every chunk after it runs as many vector steps as
    are expected to end within the target, at least one (`mjx_pbac.pacing`; on a GPU the first
    chunk is whole, and only a chunk expected to outlast the target is split). No length costs a
    compile; the training state is bit-identical however a chunk is split, and the metrics' rows
    follow the split. Changeable on resume."""
    chunk_loop: Literal["auto", "any_length", "fixed_trip"] = "auto"
    """The form of the chunk programs (`loop.make_trainer`'s `any_length`): any_length runs every
    chunk, warm-up or training, whole or split, by one program whose trip count and learning flag
    are arguments; fixed_trip runs whole chunks by programs of the chunk's fixed trip count (no
    data-dependent loop) and only split chunks by an any-length program, compiled at its first
    use; auto is any_length on a CPU and fixed_trip elsewhere. The two forms compute the same
    steps but XLA compiles each its own way, so their float32 results differ in the last bits
    and two runs drift apart as any two RL runs whose rounding differs; fixed_trip on a CPU runs
    the programs a GPU runs, to check them there. Changeable on resume."""
    stop_grace_seconds: float = 20.0
    """Seconds a run may take to stop after the first SIGTERM / SIGINT (a cluster's KillWait:
    SLURM's and Kubernetes' default is 30 s). A run whose current chunk (and the checkpoint after
    it) is expected to end within it stops after that chunk, with a checkpoint (exit 75);
    otherwise it stops at once (exit 128 + signal), keeping the newest checkpoint on disk. A
    program's first chunk is not yet timed: a signal during it stops at once; so does every first
    signal with a grace of 0. Changeable on resume."""
    eval_interval: int = 20_000
    """Env steps between evaluations (also at step 0 and at the end)."""
    eval_episodes: int = 10
    """Evaluation episodes, run in parallel with the mean-over-heads deterministic policy."""
    eval_batch: int = 1
    """Evaluation points evaluated together: the policy of each point is kept on the device and
    every `eval_batch` of them run as one program (also, with what is pending, before a
    checkpoint, at a stop and at the end), each row with the clocks of the moment its policy
    existed. An evaluation is a chain of episode-length small steps: on a GPU, P of them batched
    cost about what one costs; on a CPU about P times one. The same returns as evaluating each
    at once (1), which costs no device memory (docs/performance.md "Compiles and evaluations").
    Changeable on resume."""
    checkpoint_interval: int = 20_000
    """Env steps between checkpoints (one is also written at the end and on interrupt)."""
    visit_interval: int = 500
    """Env steps between recorded visited states (the first env instance's metrics, e.g. its
    x and y) in visits.jsonl, for exploration plots; 0 records none."""
    keep_checkpoints: int = 2
    """Most recent checkpoints kept on disk."""
    run_dir: str = ""
    """Directory of this run's outputs; empty makes runs/<profile>-<env>-s<seed>-<time>."""
    tensorboard: bool = True
    """Write TensorBoard scalars (tensorboardX) under RUN_DIR/tb."""
    progress: bool = True
    """Show a progress bar on stderr."""
    matmul_precision: Literal["float32", "tensorfloat32", "bfloat16", "default"] = "float32"
    """Precision of float32 matrix products in every program of the run (networks and physics):
    float32 is full precision, as the authors' PyTorch (whose default is full float32) and the
    physics' fidelity need; "default" lets XLA choose (TF32 on recent NVIDIA GPUs, float32 on a
    CPU); tensorfloat32 and bfloat16 trade accuracy for speed on large batches (docs/performance.md "The paper's sequential setting: latency")."""
    platform: Platform = "auto"
    """Where the run computes: auto takes the backend JAX loads (a GPU or TPU if its build is
    installed and finds one, else the CPU, with a warning when an accelerator build is installed
    but found nothing); gpu / tpu refuse to start, in one line, when JAX has no such device (never
    a silent run on the CPU); cpu uses the CPU even where an accelerator exists. Changeable on
    resume (`mjx_pbac.devices.use_platform`)."""
    devices: int = 0
    """Devices the members are sharded over (`mjx_pbac.devices`): 0 uses every visible device
    (every device of every process in a multi-process run), N the first N. Members that do not
    divide are padded with copies of the last (not logged); a run never uses more devices than it
    has members. Changeable on resume: checkpoints hold the members, not their layout."""

    def __post_init__(self) -> None:
        require(
            0 <= self.seed <= INT32_MAX,
            f"seed must lie in [0, 2**31 - 1] = [0, {INT32_MAX}] (seeds are int32 on the device), got {self.seed}",
        )
        check_numbers(self)
        positive = (
            "num_seeds", "total_steps", "num_envs", "batch_size", "buffer_size", "chunk_steps", "eval_interval", "eval_episodes",
            "eval_batch", "checkpoint_interval", "keep_checkpoints",
        )
        for name in positive:
            require(getattr(self, name) >= 1, f"{name} must be >= 1, got {getattr(self, name)}")
        require(self.updates_per_step >= 0, f"updates_per_step must be >= 0, got {self.updates_per_step}")
        require(self.warmup_steps >= 0, f"warmup_steps must be >= 0, got {self.warmup_steps}")
        require(self.visit_interval >= 0, f"visit_interval must be >= 0, got {self.visit_interval}")
        require(self.chunk_seconds >= 0, f"chunk_seconds must be >= 0 (0 runs every chunk whole), got {self.chunk_seconds}")
        require(self.stop_grace_seconds >= 0, f"stop_grace_seconds must be >= 0, got {self.stop_grace_seconds}")
        require(self.devices >= 0, f"devices must be >= 0 (0 uses every visible device), got {self.devices}")
        loops = ("auto", "any_length", "fixed_trip")
        require(self.chunk_loop in loops, f"chunk_loop must be one of {', '.join(loops)}, got {self.chunk_loop!r}")
        require(
            self.seed + self.num_seeds - 1 <= INT32_MAX,
            f"the seeds seed..seed+num_seeds-1 = {self.seed}..{self.seed + self.num_seeds - 1} must lie in "
            f"[0, 2**31 - 1] = [0, {INT32_MAX}] (seeds are int32 on the device); lower seed or num_seeds",
        )
        require(
            self.warmup_steps < self.total_steps,
            f"warmup_steps ({self.warmup_steps}) must be < total_steps ({self.total_steps})",
        )
        require(
            self.buffer_size >= self.num_envs,
            f"buffer_size ({self.buffer_size}) must hold at least one vector step ({self.num_envs})",
        )
        require(
            self.buffer_size + self.num_envs <= INT32_MAX,
            f"buffer_size + num_envs ({self.buffer_size} + {self.num_envs}) must be <= 2**31 - 1 = {INT32_MAX}: "
            "the replay's int32 position and size reach it while a vector step is inserted",
        )
        parse_overrides(self.env_overrides)
        parse_sweep(self.sweep)
        require(len(set(self.task_names)) == len(self.task_names), f"a task is named twice in env + tasks: {self.task_names}")
        parse_task_overrides(self.task_overrides, self.task_names)

    @property
    def task_names(self) -> tuple[str, ...]:
        """`env` followed by `tasks`: every task trained in this run."""
        return (self.env, *self.tasks)


def _algorithm_config(self: Any) -> Any:
    """The hyperparameter section of the selected algorithm."""
    return getattr(self, self.algo)


RunConfig = dataclasses.make_dataclass(
    "RunConfig",
    [
        ("train", TrainConfig, dataclasses.field(default_factory=TrainConfig)),
        ("algo", Literal[algos.NAMES], dataclasses.field(default="pbac")),
        *((name, algos.module(name).Config, dataclasses.field(default_factory=algos.module(name).Config)) for name in algos.NAMES),
    ],
    frozen=True,
    namespace={"algorithm_config": property(_algorithm_config), "__module__": __name__},
)
RunConfig.__doc__ = f"""One training run: `train` (env, budget, outputs), the algorithm to train (`algo`: one of
{', '.join(algos.NAMES)}) and one section of hyperparameters per algorithm (only the selected one
is used)."""


def parse_overrides(pairs: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """("delay_threshold=1.0", "integrator=euler") -> {"delay_threshold": 1.0, "integrator": "euler"}.

    Values are Python literals; a bare word is a string.
    """
    parsed = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"malformed override {pair!r}: expected KEY=VALUE, e.g. delay_threshold=1.0")
        try:
            value = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            value = raw.strip()
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(not_finite(f"override {key.strip()}={raw.strip()}", value))
        parsed[key.strip()] = value
    return parsed


# -- members: seeds x sweep points ----------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Member:
    """One independently trained member of a run: a seed at one sweep point."""

    index: int
    seed: int
    label: str
    """The configuration's name: "pbac", or e.g. "pbac bootstrap_rate=0.01" in a sweep."""
    overrides: dict[str, Any]
    """{"pbac.bootstrap_rate": 0.01, ...}: what this sweep point (and its task) changes."""
    config: Any
    """This member's algorithm config (the selected section with the task's overrides and the
    sweep point applied)."""
    task: str = ""
    """The env this member trains on (`TrainConfig.env` or one of `TrainConfig.tasks`)."""


def parse_sweep(entries: tuple[str, ...] | list[str], algo: str | None = None) -> list[tuple[str, list[Any]]]:
    """("bootstrap_rate=0.01,0.05",) -> [("bootstrap_rate", [0.01, 0.05])]; with `algo`, names
    are checked against what that algorithm can sweep (a leading "ALGO." is accepted).

    A value listed twice (the same literal, e.g. 0.1 and 0.10) or one that is not finite (1e999
    reads as inf) is refused; `expand_members` also refuses values that are equal once coerced to
    the field's type (1 and 1.0 for a float knob)."""
    grid = []
    for entry in entries:
        name, sep, raw = entry.partition("=")
        name = name.strip()
        if algo is not None:
            name = name.removeprefix(f"{algo}.")
        if not sep or not name or not raw.strip():
            raise ValueError(f"malformed sweep {entry!r}: expected NAME=v1,v2,..., e.g. bootstrap_rate=0.01,0.05")
        if algo is not None and name not in algos.sweepable(algo):
            close = difflib.get_close_matches(name, algos.sweepable(algo), n=2)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ValueError(f"cannot sweep {name!r} of {algo}{hint}; sweepable: {', '.join(algos.sweepable(algo))}")
        if any(name == other for other, _ in grid):
            raise ValueError(f"{name} is swept twice")
        values = []
        for item in raw.split(","):
            item = item.strip()
            try:
                values.append(ast.literal_eval(item))
            except (ValueError, SyntaxError):
                if not item.isidentifier():  # a bare word is a choice, e.g. sign=penalty,bonus
                    raise ValueError(f"sweep {name}: {item!r} is not a number, True/False or a choice name") from None
                values.append(item)
            value = values[-1]
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(not_finite(f"sweep {name}: {item}", value))
            if any(type(other) is type(value) and other == value for other in values[:-1]):
                raise ValueError(f"sweep {name} lists {value} twice")
        grid.append((name, values))
    return grid


def parse_task_overrides(entries: tuple[str, ...] | list[str], tasks: tuple[str, ...], algo: str | None = None) -> dict[str, dict[str, Any]]:
    """("ant_very_delayed:prior_variance=5.0",) -> {"ant_very_delayed": {"prior_variance": 5.0}};
    the task must be one of `tasks`, and with `algo` the name must be one of its sweepable knobs."""
    parsed: dict[str, dict[str, Any]] = {}
    for entry in entries:
        task, sep, assignment = entry.partition(":")
        if not sep or "=" not in assignment:
            raise ValueError(f"malformed task override {entry!r}: expected TASK:NAME=VALUE, e.g. ant_very_delayed:prior_variance=5.0")
        if task not in tasks:
            raise ValueError(f"task override {entry!r} names {task!r}, which is not trained in this run; tasks: {', '.join(tasks)}")
        ((name, values),) = parse_sweep([assignment], algo)
        if len(values) != 1:
            raise ValueError(f"task override {entry!r} must give one value, not a list")
        parsed.setdefault(task, {})[name] = values[0]
    return parsed


def expand_members(config: RunConfig) -> list[Member]:
    """The run's members: for each task (`env`, then `tasks`), every sweep point (grid order) of
    the selected algorithm's section with the task's overrides, crossed with seeds
    seed..seed+num_seeds-1."""
    import itertools

    algo = config.algo
    base = config.algorithm_config
    train = config.train
    grid = parse_sweep(train.sweep, algo)
    per_task = parse_task_overrides(train.task_overrides, train.task_names, algo)
    names = [name for name, _ in grid]
    hints = typing.get_type_hints(type(base))
    members = []
    coerced_grid = []
    for name, values in grid:
        coerced = [coerce(f"sweep {name}", value, hints[name]) for value in values]
        for i, value in enumerate(coerced):
            if value in coerced[:i]:
                first = values[coerced.index(value)]
                same = "" if repr(first) == repr(values[i]) else f" (as {first} and {values[i]})"
                raise ValueError(f"sweep {name} lists {value} twice{same}")
        coerced_grid.append(coerced)
    for task in train.task_names:
        task_values = {name: coerce(f"task override {task}:{name}", value, hints[name]) for name, value in per_task.get(task, {}).items()}
        for point in itertools.product(*coerced_grid):
            overrides = dict(zip(names, point))
            member_config = dataclasses.replace(base, **{**task_values, **overrides})  # validates the values
            label = " ".join([algo] + [f"{name}={value}" for name, value in overrides.items()])
            for offset in range(train.num_seeds):
                members.append(
                    Member(
                        index=len(members),
                        seed=train.seed + offset,
                        label=label,
                        overrides={f"{algo}.{name}": value for name, value in {**task_values, **overrides}.items()},
                        config=member_config,
                        task=task,
                    )
                )
    return members


def merge_task_configs(base: RunConfig, task_configs: dict[str, RunConfig]) -> RunConfig:
    """`base` (which trains `base.train.task_names`) with `task_overrides` that give each task
    the sweepable knobs of its own config in `task_configs` (e.g. its profile with the same
    command-line options), so one program trains every task with its own settings.

    Anything else that differs between `base` and a task's config (train settings other than the
    env, or a field of the algorithm's section that changes shapes or code, such as K or the
    widths) cannot differ between members of one program: a ValueError names it.
    """
    algo = base.algo
    sweepable = algos.sweepable(algo)
    ignored = {"env", "tasks", "task_overrides"}
    overrides = list(base.train.task_overrides)
    given = {entry.partition("=")[0] for entry in overrides}
    for task, other in task_configs.items():
        if task not in base.train.task_names:
            raise ValueError(f"{task!r} is not a task of this run; tasks: {', '.join(base.train.task_names)}")
        if other.algo != algo:
            raise ValueError(f"task {task}: its config trains {other.algo}, this run {algo}")
        train_diff = [
            f"train.{f.name} ({getattr(other.train, f.name)!r} vs {getattr(base.train, f.name)!r})"
            for f in dataclasses.fields(TrainConfig)
            if f.name not in ignored and getattr(other.train, f.name) != getattr(base.train, f.name)
        ]
        mine, theirs = base.algorithm_config, other.algorithm_config
        fixed_diff = [
            f"{algo}.{f.name} ({getattr(theirs, f.name)!r} vs {getattr(mine, f.name)!r})"
            for f in dataclasses.fields(mine)
            if f.name not in sweepable and getattr(theirs, f.name) != getattr(mine, f.name)
        ]
        if train_diff or fixed_diff:
            raise ValueError(
                f"task {task} cannot be a member of this program: its config differs in "
                f"{', '.join(train_diff + fixed_diff)}, which all members of one program share; "
                "train it in a run of its own"
            )
        for name in sweepable:
            value = getattr(theirs, name)
            key = f"{task}:{name}"
            if value != getattr(mine, name) and key not in given:
                overrides.append(f"{key}={value}")
    return dataclasses.replace(base, train=dataclasses.replace(base.train, task_overrides=tuple(overrides)))


# -- profiles -------------------------------------------------------------------------------


_PROFILE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


def _is_profile_name(name: str) -> bool:
    """A plain name of a file in profiles/: letters, digits, _ . -, no leading '.', no '..'."""
    return bool(_PROFILE_NAME.fullmatch(name)) and ".." not in name


def profile_names() -> list[str]:
    """The names `load_profile` accepts: the plain-named files profiles/NAME.toml."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.toml") if _is_profile_name(p.stem) and p.is_file())


def profile_path(name: str) -> Path:
    """profiles/NAME.toml; a ValueError for a name that is not a plain profile name (a path, '..',
    an empty name) or names no profile."""
    if not isinstance(name, str) or not _is_profile_name(name):
        raise ValueError(
            f"{name!r} is not a profile name: profile names are plain names from profiles/ (e.g. chain); "
            "to load a TOML file elsewhere use --profile-file PATH"
        )
    path = PROFILES_DIR / f"{name}.toml"
    try:
        found = path.is_file()
    except OSError:  # e.g. a name too long for the file system
        found = False
    if not found:
        names = profile_names()
        close = difflib.get_close_matches(name.removesuffix(".toml"), names, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ValueError(f"unknown profile {name!r}{hint}; available: {', '.join(names)}")
    return path


def _read_profile_table(path: Path) -> dict[str, Any]:
    """The TOML table of a profile file; a one-line ValueError naming `path` if it is missing, a
    directory, unreadable, not UTF-8 or not valid TOML."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ValueError(f"profile file {path} does not exist") from None
    except IsADirectoryError:
        raise ValueError(f"profile file {path} is a directory, not a TOML file") from None
    except OSError as error:
        raise ValueError(f"profile file {path} cannot be read: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"profile {path} is not UTF-8 text: {error.reason} at byte {error.start}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"profile {path} is not valid TOML: {error}") from None


def _profile_config(path: Path, table: dict[str, Any]) -> RunConfig:
    try:
        return config_from_dict(table, ignore=("description",))
    except (ValueError, TypeError) as error:
        raise ValueError(f"profile {path}: {error}") from None


def profile_description(name: str) -> str:
    """The profile's `description`; "" if the file cannot be read or parsed (`list_profiles`
    says why). An unknown or non-plain name is still a ValueError."""
    path = profile_path(name)
    try:
        return str(_read_profile_table(path).get("description", ""))
    except ValueError:
        return ""


def load_profile_file(path: str | Path) -> RunConfig:
    """The `RunConfig` of a profile written as a TOML file anywhere (`--profile-file PATH`):
    defaults with its tables applied, checked as `load_profile` checks a named profile. A
    one-line ValueError names the path and what is wrong: missing, a directory, unreadable,
    malformed TOML, or an unknown key or bad value."""
    path = Path(path)
    return _profile_config(path, _read_profile_table(path))


def load_profile(name: str) -> RunConfig:
    """The `RunConfig` of `profiles/NAME.toml`: defaults with the profile's tables applied."""
    return load_profile_file(profile_path(name))


def list_profiles() -> list[tuple[str, str, str | None]]:
    """(name, description, error) for every profiles/*.toml, sorted by name: error is None for a
    profile that loads, else the one-line reason it does not (a malformed or invalid file, or a
    file name that is not a plain profile name); this never raises for a broken profile."""
    listed = []
    for path in sorted(PROFILES_DIR.glob("*.toml")):
        name, description, error = path.stem, "", None
        try:
            profile_path(name)
            table = _read_profile_table(path)
            description = str(table.get("description", ""))
            _profile_config(path, table)
        except ValueError as failure:
            error = str(failure)
        listed.append((name, description, error))
    return listed


def config_from_dict(table: dict[str, Any], ignore: tuple[str, ...] = ()) -> RunConfig:
    """A `RunConfig` from nested dicts {"train": {...}, "algo": "pbac", "pbac": {...}, ...}, every
    key and type checked."""
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = set(table) - fields - set(ignore)
    if unknown:
        raise ValueError(f"unknown section(s) {sorted(unknown)}; valid: {sorted(fields)}")
    defaults = RunConfig()
    hints = typing.get_type_hints(RunConfig)
    built = {}
    for name in fields:
        base = getattr(defaults, name)
        if dataclasses.is_dataclass(base):
            section = table.get(name, {})
            if not isinstance(section, dict):
                raise ValueError(f"{name} must be a table of options ([{name}]), got {section!r}")
            built[name] = _replace_checked(base, section, name)
        elif name in table:
            built[name] = coerce(name, table[name], hints[name])
    return RunConfig(**built)


def _replace_checked(base: Any, values: dict[str, Any], section: str) -> Any:
    hints = typing.get_type_hints(type(base))
    fields = {f.name for f in dataclasses.fields(base)}
    checked = {}
    for key, value in values.items():
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ValueError(f"unknown option {section}.{key}{hint}; valid: {', '.join(sorted(fields))}")
        checked[key] = coerce(f"{section}.{key}", value, hints[key])
    return dataclasses.replace(base, **checked)


def config_to_dict(config: RunConfig) -> dict[str, Any]:
    """JSON-ready nested dict (tuples become lists); `config_from_dict` reads it back."""
    return dataclasses.asdict(config)
