"""mjx-pbac's one entry point.

Train:
  python train.py --profile NAME [--train.KEY VALUE] [--algo ALGO] [--ALGO.KEY VALUE]
                  [--seeds N] [--sweep NAME=v1,v2,... ...]
      trains ALGO (pbac by default; baselines sac, bootdqn_p, drnd, ben) with the preset
      profiles/NAME.toml; any option overrides it (`python train.py --profile NAME --help` lists
      every option with the profile's values). --seeds N trains seeds seed..seed+N-1 as one
      vmapped program; --sweep crosses a grid of the algorithm's numeric knobs (for PBAC:
      bootstrap_rate, posterior_sampling_rate, prior_variance, tau, the learning rates,
      use_diversity/use_coherence/use_propagation) with the seeds. --tasks A,B trains more tasks
      of the same robot (e.g. ant_delayed,ant_very_delayed) as members of the same program,
      each with its own profile's per-task values.
  python train.py --resume RUN_DIR
      continues an interrupted run from its newest checkpoint, with its saved config.
  python train.py --list-profiles
      the available profiles.

Other commands (`python train.py COMMAND --help`):
  table       every task x algorithm of a paper table block (dmc, dense, delayed, mujoco, table1)
              at the paper's budgets, seeds and same-robot tasks as members of one program,
              resumable, ending with the report.
  probe       every algorithm on the deep-sea chain at several lengths (seeds and lengths as
              members of one program per algorithm), resumable: seeds that reached the goal,
              first visits, final greedy return, largest length solved, ensemble disagreement.
  bench-seeds N seeds as one vmapped program against N sequential runs (time, speed-up,
              device footprint), JSON report.
  report      the paper's tables (Markdown, LaTeX) and reward curves from finished runs, and
              exploration pictures from their visited states.
  profile     throughput of the training loop (compile time, env steps/s, gradient updates/s,
              peak memory) for a profile, written as a JSON report naming the device.
  bench-env   env throughput (MJX steps/s and compile time vs instance count, Gymnasium ratio),
              written as a JSON report naming the device.

Compiled programs are cached in ~/.cache/mjx-pbac/jax ($MJX_PBAC_JAX_CACHE moves it; empty turns
it off), so a second run with the same shapes starts in seconds.

This is the only module that parses the command line; library code takes typed configs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import sys
import tempfile
import traceback
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import tyro

from mjx_pbac.config import RunConfig


def parse_overrides(pairs: tuple[str, ...]) -> tuple[tuple[str, Any], ...]:
    """("integrator=euler", "iterations=2") -> (("integrator", "euler"), ("iterations", 2))."""
    from mjx_pbac.config import parse_overrides as parse

    try:
        return tuple(parse(pairs).items())
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None


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


def bench_env(args: BenchEnvArgs) -> None:
    import envs
    from envs.benchmark import EnvBenchConfig, run_benchmark, write_report

    fields = dict(BENCH_PRESETS[args.preset])
    for name, value in [
        ("env_names", args.env),
        ("num_envs", args.num_envs),
        ("steps_per_call", args.steps_per_call),
        ("repeats", args.repeats),
        ("gymnasium_steps", args.gymnasium_steps),
    ]:
        if value not in ((), None):
            fields[name] = value
    try:
        config = EnvBenchConfig(**fields, overrides=parse_overrides(args.set))
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    for name in config.env_names:  # fail fast, before any compile, on a bad name or override
        try:
            envs.make(name, **dict(config.overrides))  # builds the model; compiles nothing
        except (ValueError, TypeError) as error:
            raise SystemExit(f"error: {error}") from None
    report = run_benchmark(config, out=args.out)
    write_report(report, args.out)
    print(f"wrote {args.out} ({report['device']['device_kind']})")


# -- training -----------------------------------------------------------------------------


def _pop_option(argv: list[str], flag: str) -> tuple[str | None, list[str]]:
    """(value of `flag VALUE` or `flag=VALUE`, the other arguments)."""
    rest, value = [], None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == flag:
            if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                raise SystemExit(f"error: {flag} needs a value")
            value = argv[i + 1]
            i += 2
            continue
        if arg.startswith(flag + "="):
            value = arg[len(flag) + 1 :]
        else:
            rest.append(arg)
        i += 1
    return value, rest


def _expand_aliases(argv: list[str]) -> list[str]:
    """`--seeds N` -> `--train.num-seeds N`; every `--sweep NAME=v1,v2` -> one `--train.sweep ...`;
    `--tasks A,B` -> `--train.tasks A B`."""
    out, sweeps, i = [], [], 0
    while i < len(argv):
        arg = argv[i]
        aliases = ("--seeds", "--sweep", "--tasks")
        flag, eq, inline = arg.partition("=") if arg.startswith(tuple(a + "=" for a in aliases)) else (arg, "", "")
        if flag in aliases:
            if eq:
                value = inline
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                value = argv[i + 1]
                i += 1
            else:
                example = {"--seeds": "10", "--sweep": "bootstrap_rate=0.01,0.05", "--tasks": "ant_delayed,ant_very_delayed"}
                raise SystemExit(f"error: {flag} needs a value, e.g. {flag} {example[flag]}")
            if flag == "--seeds":
                out += ["--train.num-seeds", value]
            elif flag == "--tasks":
                out += ["--train.tasks", *[task.strip() for task in value.split(",") if task.strip()]]
            else:
                sweeps.append(value)
        else:
            out.append(arg)
        i += 1
    return out + (["--train.sweep", *sweeps] if sweeps else [])


_BOX = re.compile(r"[\u2500-\u257f]+")


def _parse(kind: type, **kwargs):
    """`tyro.cli(kind, **kwargs)` whose parse errors (a bad value, an unknown option), which tyro
    draws as a box of several lines, come out as one line: SystemExit("error: ...")."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return tyro.cli(kind, **kwargs)
    except SystemExit as exit_:
        text = captured.getvalue()
        if exit_.code in (0, None):
            sys.stderr.write(text)
            raise
        lines = [_BOX.sub(" ", line).strip() for line in text.splitlines()]
        lines = [line for line in lines if line and not line.startswith("For full helptext")]
        title = lines[0] if lines else "bad command line"
        detail = " ".join(lines[1:])
        help_hint = f" (see {kwargs.get('prog', 'train.py')} --help)"
        raise SystemExit(f"error: {title.lower()}: {' '.join(detail.split())}{help_hint}") from None


def _profile_config(name: str | None, rest: list[str], prog: str, wrapper: type | None = None, path: str | None = None):
    """The RunConfig of profile `name` (or of the TOML file `path`) with command-line overrides
    (tyro) applied."""
    from mjx_pbac.config import load_profile, load_profile_file, profile_names

    rest = _expand_aliases(rest)
    if name is None and path is None:
        raise SystemExit(f"error: --profile NAME is required; available: {', '.join(profile_names())}")
    try:
        base = load_profile(name) if path is None else load_profile_file(path)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    # Booleans take a value (--pbac.use-propagation False), as they do in profiles and sweeps.
    settings = (tyro.conf.FlagConversionOff,)
    if wrapper is None:
        return _parse(type(base), default=base, args=rest, prog=prog, config=settings)
    return _parse(wrapper, default=wrapper(run=base), args=rest, prog=prog, config=settings)


def _drop_options(argv: list[str], flags: tuple[str, ...]) -> list[str]:
    """`argv` without the given options and their values (`--flag v1 v2` or `--flag=v`)."""
    out, i = [], 0
    while i < len(argv):
        arg = argv[i]
        if arg in flags:
            i += 1
            while i < len(argv) and not argv[i].startswith("--"):
                i += 1
            continue
        if not arg.startswith(tuple(flag + "=" for flag in flags)):
            out.append(arg)
        i += 1
    return out


def _with_task_profiles(config, rest: list[str], prog: str, wrapper: type | None = None):
    """`config` whose extra tasks (`--tasks`) take the sweepable knobs of their own profiles
    (with the same command-line options), e.g. ant_very_delayed's prior variance 5.0; prints
    what it set. Tasks without a profile keep the run's values."""
    import envs
    from mjx_pbac.config import merge_task_configs, parse_overrides as parse, profile_names

    run = config.run if wrapper is not None else config
    tasks = [task for task in run.train.tasks if task in profile_names()]
    if not tasks:
        return config
    try:  # the tasks must share one robot before their profiles are compared
        envs.make_family(run.train.task_names, **parse(run.train.env_overrides))
    except (ValueError, TypeError, RuntimeError) as error:
        raise SystemExit(f"error: {error}") from None
    task_configs = {}
    shared = _drop_options(rest, ("--tasks", "--train.tasks", "--train.task-overrides", "--train.env"))
    for task in tasks:
        other = _profile_config(task, shared, prog=prog, wrapper=wrapper)
        task_configs[task] = other.run if wrapper is not None else other
    try:
        merged = merge_task_configs(run, task_configs)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    added = merged.train.task_overrides[len(run.train.task_overrides):]
    if added:
        print("per-task settings from the tasks' profiles: " + " ".join(added), file=sys.stderr)
    return dataclasses.replace(config, run=merged) if wrapper is not None else merged


def _check_env(config) -> None:
    """Fails fast, before any compile, on a bad env name, env override, task or sweep value."""
    import envs
    from mjx_pbac.config import expand_members, parse_overrides as parse

    try:
        envs.make_family(config.train.task_names, **parse(config.train.env_overrides))
        # The sweep and task values are checked on one seed's members: a million seeds are the
        # memory estimate's to refuse (runner.train), not a list to build here.
        expand_members(dataclasses.replace(config, train=dataclasses.replace(config.train, num_seeds=1)))
    except (ValueError, TypeError, RuntimeError) as error:
        raise SystemExit(f"error: {error}") from None


def _resume_changes(rest: list[str], run_dir: str) -> dict[str, Any]:
    """`--train.total-steps 600000 ...` given with --resume -> {"total_steps": 600000}: only the
    settings a resumed run may change (runner.CHANGEABLE_ON_RESUME)."""
    from mjx_pbac.config import TrainConfig
    from mjx_pbac.runner import CHANGEABLE_ON_RESUME

    allowed = {"--train." + name.replace("_", "-"): name for name in CHANGEABLE_ON_RESUME}
    hints = typing.get_type_hints(TrainConfig)
    changes, i = {}, 0
    while i < len(rest):
        flag, eq, value = rest[i].partition("=")
        if flag not in allowed:
            raise SystemExit(
                f"error: --resume RUN_DIR continues the run with the config saved in {run_dir}/config.json; "
                f"{flag} cannot change on resume (changeable: {', '.join(allowed)})"
            )
        if not eq:
            if i + 1 >= len(rest) or rest[i + 1].startswith("--"):
                raise SystemExit(f"error: {flag} needs a value")
            value = rest[i + 1]
            i += 1
        i += 1
        name = allowed[flag]
        if hints[name] is bool:
            if value not in ("True", "False"):
                raise SystemExit(f"error: {flag} takes True or False, got {value!r}")
            changes[name] = value == "True"
        else:
            try:
                changes[name] = int(value.replace("_", ""))
            except ValueError:
                raise SystemExit(f"error: {flag} takes an integer, got {value!r}") from None
    return changes


def _list_profiles() -> None:
    from mjx_pbac.config import list_profiles

    broken = 0
    for name, description, error in list_profiles():
        if error is None:
            print(f"{name:22s} {description}")
        else:
            broken += 1
            print(f"{name:22s} BROKEN: {error}")
    if broken:
        print(f"{broken} profile(s) cannot be used until fixed", file=sys.stderr)


def _check_memory(config) -> None:
    """Refuses, before anything compiles, a measurement whose run cannot fit the device."""
    from mjx_pbac import memory

    try:
        memory.check(config)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None


def train_command(argv: list[str]) -> None:
    from mjx_pbac import runner

    if "--list-profiles" in argv:
        _list_profiles()
        return
    resume, rest = _pop_option(argv, "--resume")
    profile, rest = _pop_option(rest, "--profile")
    profile_file, rest = _pop_option(rest, "--profile-file")
    if resume is not None:
        if profile is not None or profile_file is not None:
            raise SystemExit(
                "error: --resume RUN_DIR takes no profile: the run continues with the config "
                f"saved in {resume}/config.json"
            )
        changes = _resume_changes(rest, resume)
        run_dir = runner.train(None, resume_dir=resume, changes=changes)
        print(f"run finished: {run_dir}")
        return
    if profile is not None and profile_file is not None:
        raise SystemExit("error: give --profile NAME or --profile-file PATH, not both")
    if profile_file is not None:
        name = "file-" + runner._safe_name(Path(profile_file).stem)
        config = _profile_config(None, rest, prog=f"train.py --profile-file {profile_file}", path=profile_file)
    else:
        name = profile
        config = _profile_config(profile, rest, prog=f"train.py --profile {profile}")
    config = _with_task_profiles(config, rest, prog=f"train.py --profile {name}")
    _check_env(config)
    run_dir = runner.train(config, profile=name)
    print(f"run finished: {run_dir}")


# -- profile ----------------------------------------------------------------------------------


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
    out: str = "profile.json"
    """Where the JSON report goes."""


@dataclasses.dataclass(frozen=True)
class BenchSeedsArgs:
    """N seeds as one vmapped program against N sequential runs: time per chunk, speed-up and
    device footprint for each N; JSON report naming the device."""

    run: Annotated[RunConfig, tyro.conf.arg(name="")]
    seed_counts: tuple[int, ...] = (1, 2, 4, 8, 10)
    """Numbers of seeds N to measure (1 is always measured: it gives the sequential time)."""
    measure_steps: int = 0
    """Env steps per timed chunk (rounded up to whole vector steps); 0 picks 20 vector steps."""
    timed_chunks: int = 3
    """Chunks timed per N after an untimed one (the median is reported)."""
    out: str = "bench_seeds.json"
    """Where the JSON report goes."""


def bench_seeds_command(argv: list[str]) -> None:
    from mjx_pbac.profiling import ProfileSettings, measure_seed_scaling

    profile, rest = _pop_option(argv, "--profile")
    args = _profile_config(profile, rest, prog=f"train.py bench-seeds --profile {profile}", wrapper=BenchSeedsArgs)
    _check_env(args.run)
    if not args.seed_counts or min(args.seed_counts) < 1:
        raise SystemExit(f"error: seed counts must be >= 1, got {args.seed_counts}")
    _check_memory(dataclasses.replace(args.run, train=dataclasses.replace(args.run.train, num_seeds=max(args.seed_counts))))
    try:
        settings = ProfileSettings(measure_steps=args.measure_steps, timed_chunks=args.timed_chunks)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    report = measure_seed_scaling(args.run, profile, args.seed_counts, settings, out=args.out)
    for row in report["rows"]:
        print(
            f"{row['seeds']:3d} seeds: {row['vmapped_seconds_per_chunk']:.3f} s/chunk vmapped vs "
            f"{row['sequential_seconds_per_chunk']:.3f} s sequential ({row['speedup_vs_sequential']:.2f}x), "
            f"compile {row['compile_s']:.1f} s, program {row['program_bytes'] or 0:,} bytes"
        )
    print(f"wrote {args.out} ({report['device']['device_kind']})")


def profile_command(argv: list[str]) -> None:
    from mjx_pbac.profiling import ProfileSettings, measure

    profile, rest = _pop_option(argv, "--profile")
    args = _profile_config(profile, rest, prog=f"train.py profile --profile {profile}", wrapper=ProfileArgs)
    _check_env(args.run)
    _check_memory(args.run)
    try:
        settings = ProfileSettings(
            measure_steps=args.measure_steps, timed_chunks=args.timed_chunks, phases=args.phases, evaluate=args.evaluate
        )
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    baseline = tuple(f"{key}={value}" for key, value in parse_overrides(args.baseline))
    if baseline:
        _check_env(dataclasses.replace(args.run, train=dataclasses.replace(args.run.train, env_overrides=args.run.train.env_overrides + baseline)))
    report = measure(args.run, profile, settings, out=args.out, baseline_env_overrides=baseline)

    def line(name, part):
        steady, phases = part["steady_state"], part["phases_ms_per_vector_step"]
        stats = part["programs"]["train_chunk"]
        split = (
            f" = env {phases['env_step']:.2f} + gradient steps {phases['gradient_steps']:.2f} + rest {phases['rest']:.2f}"
            if "env_step" in phases else ""
        )
        return (
            f"{name}: {steady['env_steps_per_s']:,.1f} env steps/s, {steady['updates_per_s']:,.1f} gradient updates/s; "
            f"per vector step {phases['total']:.2f} ms{split}; {stats['executed_ops_per_vector_step']:,.0f} ops "
            f"per vector step, {stats['data_dependent_loops']} data-dependent loops, {stats['conditionals']} branches; "
            f"compile {part['compile_s']['train']:.1f} s"
        )

    print(f"{profile} on {report['device']['device_kind']}")
    print(line("  measured", report))
    if baseline:
        print(line(f"  baseline ({' '.join(baseline)})", report["baseline"]))
        print(f"  speed-up per vector step over the baseline: {report['speedup_vs_baseline']['total']:.2f}x")
    print(f"wrote {args.out}")


TABLE_HELP = """usage: train.py table (--block BLOCK | --tasks T1,T2,...) [--algos A1,A2,...] [--seeds N]
                      [--out DIR] [--group-tasks True|False] [--train.KEY VALUE] [--ALGO.KEY VALUE] ...

Runs every task x algorithm of a paper table block at its profile's settings (profiles/TASK.toml:
the paper's budgets), N seeds as one vmapped program per run and the tasks of one robot (e.g. ant,
ant_delayed, ant_very_delayed) as members of one program, then writes the report (the paper's
final-reward and AULC tables, curves) to DIR/report. Running the same command again continues:
finished runs are skipped, interrupted ones resume.

  --block        dmc | dense | delayed | mujoco (dense + delayed) | table1 (all three blocks)
  --tasks        instead of a block: any profiles, comma-separated (e.g. chain)
  --algos        comma-separated (default ben,bootdqn_p,drnd,pbac: the paper's columns; also sac)
  --seeds        seeds per run (default 10, the paper's)
  --out          the table directory (default tables/<block>)
  --group-tasks  False runs every task in a program of its own
  any training option (--train.KEY VALUE, --pbac.KEY VALUE, ...) applies to every run, e.g.
  --train.total-steps 20000 for a short trial.
"""


def table_command(argv: list[str]) -> None:
    from mjx_pbac.table import BLOCKS, PAPER_ALGOS, plan, run_table

    if "-h" in argv or "--help" in argv:
        print(TABLE_HELP)
        return
    block, rest = _pop_option(argv, "--block")
    tasks, rest = _pop_option(rest, "--tasks")
    algos, rest = _pop_option(rest, "--algos")
    seeds, rest = _pop_option(rest, "--seeds")
    out, rest = _pop_option(rest, "--out")
    group, rest = _pop_option(rest, "--group-tasks")
    if (block is None) == (tasks is None):
        raise SystemExit(f"error: give one of --block ({', '.join(BLOCKS)}) or --tasks T1,T2,...")
    if block is not None and block not in BLOCKS:
        raise SystemExit(f"error: unknown block {block!r}; valid: {', '.join(BLOCKS)}")
    task_names = BLOCKS[block] if block else tuple(t.strip() for t in tasks.split(",") if t.strip())
    algo_names = tuple(a.strip() for a in (algos or ",".join(PAPER_ALGOS)).split(",") if a.strip())
    valid_algos = typing.get_args(typing.get_type_hints(RunConfig)["algo"])
    unknown = [a for a in algo_names if a not in valid_algos]
    if unknown or not algo_names:
        raise SystemExit(f"error: unknown algorithm(s) {', '.join(unknown) or '(none given)'}; valid: {', '.join(valid_algos)}")
    if group not in (None, "True", "False"):
        raise SystemExit(f"error: --group-tasks takes True or False, got {group!r}")
    if any(arg in ("--algo", "--profile", "--resume") or arg.startswith(("--algo=", "--profile=", "--train.env", "--train.tasks", "--tasks")) for arg in rest):
        raise SystemExit("error: table chooses the profile, algorithm and tasks of each run; use --block/--tasks and --algos")
    seed_args = ["--seeds", seeds or "10"]
    configs = {}
    for algo in algo_names:
        for task in task_names:
            config = _profile_config(task, [*rest, *seed_args, "--algo", algo], prog=f"train.py table (profile {task})")
            _check_env(config)
            configs[(algo, task)] = config
    programs = plan(configs, group_tasks=group != "False")
    name = block or "+".join(task_names)
    print(f"table {name}: {len(task_names)} task(s) x {len(algo_names)} algorithm(s) in {len(programs)} program(s)", file=sys.stderr)
    try:
        run_table(programs, out or f"tables/{name}", name, log=lambda text: print(text, file=sys.stderr))
    except ValueError as error:  # the runner's own errors pass with their exit codes
        raise SystemExit(f"error: {error}") from None


PROBE_HELP = """usage: train.py probe [--algos V1,V2,...|all] [--lengths 10,20,30] [--seeds N] [--out DIR]
                      [--profile deep_chain] [--train.KEY VALUE] [--ALGO.KEY VALUE] ...

Trains every probe variant on the deep-sea chain (envs/deep_chain.py: a fixed random action sign
per cell, so no constant action reaches the goal) at each length, the lengths x seeds as members
of one program per variant, at the probe profile's settings (profiles/deep_chain.toml: one head
per episode for the posterior-sampling methods, a stated initial temperature for soft actors).
Writes DIR/probe.md and DIR/probe.json (per variant and length: seeds that reached the goal in
training, first-visit step, final greedy return, seeds solved, ensemble disagreement; per variant
the largest length solved in >= 8/10 seeds), DIR/probe_success.png and DIR/spread_position.png.
Running the same command again continues: finished variants are skipped, interrupted ones
resume; `train.py report DIR` rewrites the report.

  --algos    comma-separated variants, or all (default): {variants}
  --lengths  comma-separated integer chain lengths (default 10,20,30)
  --seeds    seeds per length (default 10)
  --out      the probe directory (default probes/<profile>)
  --profile  the probe profile (default deep_chain)
  any training option applies to every variant, e.g. --train.total-steps 5000 for a short trial.
"""


def probe_command(argv: list[str]) -> None:
    import json

    from mjx_pbac import runner
    from mjx_pbac.config import parse_overrides as parse
    from mjx_pbac.probe import DEFAULT_LENGTHS, VARIANTS, known_answers, task_name, variant_args, write_probe_report
    from mjx_pbac.table import Program, run_table

    if "-h" in argv or "--help" in argv:
        print(PROBE_HELP.format(variants=", ".join(VARIANTS)))
        return
    algos, rest = _pop_option(argv, "--algos")
    lengths_arg, rest = _pop_option(rest, "--lengths")
    seeds, rest = _pop_option(rest, "--seeds")
    out, rest = _pop_option(rest, "--out")
    profile, rest = _pop_option(rest, "--profile")
    profile = profile or "deep_chain"
    names = list(VARIANTS) if algos in (None, "all") else [a.strip() for a in algos.split(",") if a.strip()]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown or not names:
        raise SystemExit(f"error: unknown probe variant(s) {', '.join(unknown) or '(none given)'}; valid: all, {', '.join(VARIANTS)}")
    try:
        lengths = sorted({int(x) for x in (lengths_arg or ",".join(map(str, DEFAULT_LENGTHS))).split(",") if x.strip()})
    except ValueError:
        raise SystemExit(f"error: --lengths takes comma-separated integers, e.g. 10,20,30,40; got {lengths_arg!r}") from None
    if not lengths or min(lengths) < 2:
        raise SystemExit(f"error: --lengths must be integers >= 2, got {lengths_arg!r}")
    if any(arg in ("--algo", "--resume", "--tasks") or arg.startswith(("--algo=", "--train.env", "--train.tasks", "--tasks=")) for arg in rest):
        raise SystemExit("error: probe chooses the algorithm, env and tasks of each run; use --algos and --lengths")
    tasks = [task_name(length) for length in lengths]
    length_args = ["--train.env", tasks[0], *(["--tasks", ",".join(tasks[1:])] if len(tasks) > 1 else [])]
    base = _profile_config(profile, [*rest, "--seeds", seeds or "10"], prog=f"train.py probe (profile {profile})")
    if not base.train.env.startswith("deep_chain"):
        raise SystemExit(
            f"error: profile {profile!r} trains env {base.train.env!r}, not a deep chain; the probe needs a profile "
            "whose env is deep_chain (e.g. the default, deep_chain)"
        )
    out_dir = out or f"probes/{profile}"
    programs = []
    for name in names:
        variant = VARIANTS[name]
        args = [*rest, "--seeds", seeds or "10", "--algo", variant.algo, *variant_args(name, base), *length_args]
        config = _profile_config(profile, args, prog=f"train.py probe (variant {name})")
        _check_env(config)
        programs.append(Program(variant.algo, tuple(tasks), config, label=name))
    env_overrides = dict(parse(base.train.env_overrides))
    try:
        known = {str(length): known_answers(task_name(length), env_overrides) for length in lengths}
    except ValueError as error:
        raise SystemExit(f"error: the deep chain's known answers need x0 = 0 and an integer length: {error}") from None
    plan = {
        "profile": profile,
        "lengths": lengths,
        "seeds": programs[0].config.train.num_seeds,
        "total_steps": programs[0].config.train.total_steps,
        "variants": {name: VARIANTS[name].description for name in names},
        "runs": {name: f"{out_dir}/runs/{name}" for name in names},
        "known": known,
        "device": runner.device_description()["device_kind"],
        "command": "python train.py probe " + " ".join(argv),
    }
    from pathlib import Path

    try:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SystemExit(f"error: cannot create the probe directory {out_dir}: {error.strerror}") from None
    plan_path = Path(out_dir) / "probe_plan.json"
    if plan_path.is_file():
        earlier = json.loads(plan_path.read_text())
        plan["runs"] = {**earlier.get("runs", {}), **plan["runs"]}
        plan["variants"] = {**earlier.get("variants", {}), **plan["variants"]}
        if earlier.get("lengths") != lengths or earlier.get("seeds") != plan["seeds"]:
            raise SystemExit(
                f"error: {out_dir} holds a probe with lengths {earlier.get('lengths')} and {earlier.get('seeds')} seeds; "
                "use another --out for other lengths or seeds"
            )
    plan_path.write_text(json.dumps(plan, indent=2) + "\n")
    print(f"probe: {len(names)} variant(s) x {len(lengths)} length(s) x {plan['seeds']} seed(s), one program per variant -> {out_dir}", file=sys.stderr)

    def report(run_dirs, directory):
        written = write_probe_report(directory)
        print(Path(written["markdown"]).read_text())
        return written

    try:
        run_table(programs, out_dir, "probe", log=lambda text: print(text, file=sys.stderr), report=report)
    except ValueError as error:  # the runner's own errors pass with their exit codes
        raise SystemExit(f"error: {error}") from None


@dataclasses.dataclass(frozen=True)
class ReportArgs:
    """The paper's tables (final episode reward and AULC, IQM [lower, upper] over seeds, bold by a
    one-sided paired t-test) as Markdown and LaTeX, and reward-curve PNGs, from finished runs."""

    run_dirs: tyro.conf.Positional[tuple[str, ...]]
    """Run directories; their members are grouped by task (env) and method (label), seeds paired by seed."""
    out: str = "report"
    """Directory for results.md, results.tex and the figures."""
    explore: tuple[str, ...] = ()
    """Exploration pictures RUN_DIR,X_KEY,Y_KEY (e.g. runs/x,x_position,y_position; Y_KEY may be env_steps)."""
    phases: int = 5
    """Training phases (panels) per exploration picture."""
    member: int | None = None
    """Draw only this member in the exploration pictures (default: all, coloured by member)."""


def report(args: ReportArgs) -> None:
    from mjx_pbac.report import ExplorationPlot, write_report

    plots = []
    for entry in args.explore:
        parts = entry.split(",")
        if len(parts) != 3:
            raise SystemExit(f"error: --explore {entry!r}: expected RUN_DIR,X_KEY,Y_KEY, e.g. runs/a,x_position,y_position")
        plots.append(ExplorationPlot(parts[0], parts[1], parts[2], phases=args.phases, member=args.member))
    if not args.run_dirs:
        raise SystemExit("error: give at least one run directory")
    from pathlib import Path

    probes = [d for d in args.run_dirs if (Path(d) / "probe_plan.json").is_file()]
    if probes:  # a probe directory: its own report, written back into it
        from mjx_pbac.probe import write_probe_report

        if len(probes) != len(args.run_dirs):
            raise SystemExit("error: give either probe directories or run directories, not both")
        for directory in probes:
            written = write_probe_report(directory)
            print(Path(written["markdown"]).read_text())
            print(f"wrote {written['markdown']}, {written['json']} and the figures in {directory}")
        return
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise SystemExit(f"error: --out {args.out} is an existing file; give a directory for the report")
    try:
        written = write_report(list(args.run_dirs), args.out, exploration=plots or None)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    print(f"wrote {written['markdown']}, {written['latex']} and {len(written['curves'])} curve figure(s) in {args.out}")


COMMANDS = {"bench-env": (BenchEnvArgs, bench_env), "report": (ReportArgs, report)}


def _merge_repeated(argv: list[str], flag: str) -> list[str]:
    """`--explore A --explore B C` -> `--explore A B C`: every occurrence's values under one flag
    (the parser would otherwise keep only the last occurrence)."""
    out, values, i = [], [], 0
    while i < len(argv):
        if argv[i] == flag:
            i += 1
            while i < len(argv) and not argv[i].startswith("--"):
                values.append(argv[i])
                i += 1
            continue
        out.append(argv[i])
        i += 1
    return out + ([flag, *values] if values else [])


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return
    from mjx_pbac import compilation_cache

    compilation_cache.enable()  # a second run of the same program skips its compile
    command, rest = argv[0], argv[1:]
    if command == "profile":
        profile_command(rest)
        return
    if command == "bench-seeds":
        bench_seeds_command(rest)
        return
    if command == "table":
        table_command(rest)
        return
    if command == "probe":
        probe_command(rest)
        return
    if command.startswith("--"):
        train_command(argv)
        return
    if command not in COMMANDS:
        import difflib

        close = difflib.get_close_matches(command, ["profile", "bench-seeds", "table", "probe", *COMMANDS], n=2)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise SystemExit(
            f"error: unknown command {command!r}{hint}; train with `--profile NAME`, or use one of: "
            f"profile, bench-seeds, table, probe, {', '.join(COMMANDS)}"
        )
    if command == "report":
        rest = _merge_repeated(rest, "--explore")
    args_type, run = COMMANDS[command]
    run(_parse(args_type, args=rest, prog=f"train.py {command}"))


def _one_line(message: str) -> str:
    """A message of several lines (e.g. a list of problems) as one: the lines joined by '; '."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return "; ".join(lines).replace(":;", ":")


def run(argv: list[str]) -> int:
    """`main(argv)` with every error as one line on stderr and the exit code that says how it
    ended (mjx_pbac.lifecycle: 0 finished, 1 failed, 2 bad input, 3 diverged, 4 run directory
    in use, 75 interrupted with a checkpoint, 128 + signal stopped at once). An unexpected error's
    traceback goes to a file the message names; MJX_PBAC_TRACEBACK=1 shows it instead."""
    from mjx_pbac.lifecycle import ExitCode

    try:
        main(argv)
        return ExitCode.FINISHED
    except SystemExit as exit_:
        if isinstance(exit_.code, str):
            print(_one_line(exit_.code), file=sys.stderr)
            return ExitCode.USAGE
        return exit_.code or 0
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        code = getattr(error, "exit_code", None)
        if code is not None:  # the runner's and the lock's errors: their message is the whole story
            print(_one_line(f"{getattr(error, 'label', 'error')}: {error}"), file=sys.stderr)
            return int(code)
        if os.environ.get("MJX_PBAC_TRACEBACK"):
            raise
        if isinstance(error, OSError):
            where = f" {error.filename}" if error.filename else ""
            print(f"error: {error.strerror or error}:{where}", file=sys.stderr)
            return ExitCode.FAILED
        log = Path(tempfile.gettempdir()) / f"mjx-pbac-error-{os.getpid()}.log"
        try:
            log.write_text(traceback.format_exc())
            where = f"; traceback in {log}"
        except OSError:
            where = ""
        print(f"error: {type(error).__name__}: {error}{where}", file=sys.stderr)
        return ExitCode.FAILED


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
