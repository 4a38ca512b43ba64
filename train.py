"""mjx-pbac's one entry point.

Train:
  python train.py --profile NAME [--train.KEY VALUE] [--algo ALGO] [--ALGO.KEY VALUE]
                  [--seeds N] [--sweep NAME=v1,v2,... ...] [--tasks A,B,...]
      trains ALGO (one of the algorithms listed below; the profile's if not given) with the preset
      profiles/NAME.toml; any option overrides it (`python train.py --profile NAME --help` lists
      every option with the profile's values). --seeds N trains seeds seed..seed+N-1 as one
      vmapped program; --sweep crosses a grid of the algorithm's knobs (listed below) with the
      seeds. --tasks A,B trains more tasks of the same robot (e.g. ant_delayed,ant_very_delayed)
      as members of the same program, each with its own profile's per-task values.
      --profile-file PATH takes a TOML profile from anywhere instead of profiles/.
  python train.py --resume RUN_DIR [--train.total-steps N ...]
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
  bench-seeds N seeds as one vmapped program against N sequential runs, sharded over 1, 2,
              ... devices (time, speed-ups, device footprint), JSON report.
  report      the paper's tables (Markdown, LaTeX) and reward curves from finished runs, and
              exploration pictures from their visited states.
  profile     throughput of the training loop (compile time, env steps/s, gradient updates/s,
              peak memory) for a profile, written as a JSON report naming the device.
  bench-env   env throughput (MJX steps/s and compile time vs instance count, Gymnasium ratio),
              written as a JSON report naming the device.

Compiled programs are cached in ~/.cache/mjx-pbac/jax ($MJX_PBAC_JAX_CACHE moves it; empty turns
it off), so a second run with the same shapes starts in seconds.

This module and mjx_pbac/cli.py (each command's options as a dataclass that tyro parses) are the
only code that reads the command line; library code takes typed configs.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import sys
import tempfile
import textwrap
import traceback
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mjx_pbac import cli
from mjx_pbac.config import RunConfig


def _algos() -> tuple[str, ...]:
    """The algorithm names: the choices of RunConfig's `algo` field."""
    return typing.get_args(typing.get_type_hints(RunConfig)["algo"])


def _sweepable(algo: str) -> tuple[str, ...]:
    """The knobs of `algo` that --sweep (and a task's own profile) may vary per member."""
    from mjx_pbac import algos

    return algos.sweepable(algo)


def _usage() -> str:
    """The module's help, with the algorithms and their sweepable knobs as the config defines them."""
    width = max(map(len, _algos()))
    knobs = "\n".join(
        textwrap.fill(", ".join(_sweepable(algo)), 100, initial_indent=f"  {algo:{width}s}  ", subsequent_indent=" " * (width + 4))
        for algo in _algos()
    )
    return f"{__doc__}\nAlgorithms (--algo) and the knobs --sweep NAME=v1,v2,... can vary:\n{knobs}"


def parse_overrides(pairs: tuple[str, ...]) -> tuple[tuple[str, Any], ...]:
    """("integrator=euler", "iterations=2") -> (("integrator", "euler"), ("iterations", 2))."""
    from mjx_pbac.config import parse_overrides as parse

    try:
        return tuple(parse(pairs).items())
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None


def _load(name: str | None, path: str | None = None) -> RunConfig:
    """The RunConfig of profile `name` (or of the TOML file `path`)."""
    from mjx_pbac.config import load_profile, load_profile_file, profile_names

    if name is None and path is None:
        raise SystemExit(f"error: --profile NAME is required; available: {', '.join(profile_names())}")
    try:
        return load_profile(name) if path is None else load_profile_file(path)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None


# -- training -----------------------------------------------------------------------------


def _with_task_profiles(config: RunConfig, rest: list[str], prog: str) -> RunConfig:
    """`config` whose extra tasks (`--tasks`) take the sweepable knobs of their own profiles
    (with the same command-line options), e.g. ant_very_delayed's prior variance 5.0; prints
    what it set. Tasks without a profile keep the run's values."""
    import envs
    from mjx_pbac.config import merge_task_configs, parse_overrides as parse, profile_names

    tasks = [task for task in config.train.tasks if task in profile_names()]
    if not tasks:
        return config
    try:  # the tasks must share one robot before their profiles are compared
        envs.make_family(config.train.task_names, **parse(config.train.env_overrides))
    except (ValueError, TypeError, RuntimeError) as error:
        raise SystemExit(f"error: {error}") from None
    # What is trained (env, tasks and per-task values) stays this run's; the options apply alike.
    trained = {name: getattr(config.train, name) for name in ("env", "tasks", "task_overrides")}
    task_configs = {}
    for task in tasks:
        profile = _load(task)
        task_configs[task] = cli.configure(dataclasses.replace(profile, train=dataclasses.replace(profile.train, **trained)), rest, prog)
    try:
        merged = merge_task_configs(config, task_configs)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    added = merged.train.task_overrides[len(config.train.task_overrides):]
    if added:
        print("per-task settings from the tasks' profiles: " + " ".join(added), file=sys.stderr)
    return merged


def _use_platform(platform: str, option: str = "--train.platform") -> None:
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


def _check_env(config: RunConfig) -> None:
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


def train_command(argv: list[str]) -> None:
    from mjx_pbac import runner

    chosen, rest = cli.choose(cli.TrainChoice, argv)
    if chosen.list_profiles:
        _list_profiles()
        return
    if chosen.resume is not None:
        if chosen.profile is not None or chosen.profile_file is not None:
            raise SystemExit(
                "error: --resume RUN_DIR takes no profile: the run continues with the config "
                f"saved in {chosen.resume}/config.json"
            )
        changes = cli.resume_changes(rest, chosen.resume)
        _use_platform(changes.get("platform") or _saved_platform(chosen.resume))
        print(f"run finished: {runner.train(None, resume_dir=chosen.resume, changes=changes)}")
        return
    if chosen.profile is not None and chosen.profile_file is not None:
        raise SystemExit("error: give --profile NAME or --profile-file PATH, not both")
    if chosen.profile_file is not None:
        name, prog = "file-" + runner._safe_name(Path(chosen.profile_file).stem), f"train.py --profile-file {chosen.profile_file}"
    else:
        name, prog = chosen.profile, f"train.py --profile {chosen.profile}"
    config = cli.configure(_load(chosen.profile, chosen.profile_file), rest, prog)
    config = _with_task_profiles(config, rest, prog=f"train.py --profile {name}")
    _use_platform(config.train.platform)
    _check_env(config)
    print(f"run finished: {runner.train(config, profile=name)}")


def _saved_platform(run_dir: str) -> str:
    """The platform in a run's config.json ("auto" where it is unreadable or older than the
    option: the runner then says what is wrong with the run directory)."""
    from mjx_pbac import runner

    try:
        return runner.read_run_record(Path(run_dir))["config"]["train"].get("platform", "auto")
    except (runner.RunError, KeyError, TypeError, AttributeError):
        return "auto"


# -- profile, bench-seeds -------------------------------------------------------------------


def _measurement(kind: type, command: str, argv: list[str]):
    """(profile name, the command's options) of `train.py COMMAND --profile NAME ...`."""
    chosen, rest = cli.choose(cli.ProfileChoice, argv)
    base = _load(chosen.profile)
    args = cli.parse(kind, rest, f"train.py {command} --profile {chosen.profile}", default=kind(run=cli.TrainOptions.wrap(base)))
    args = dataclasses.replace(args, run=cli.TrainOptions.unwrap(args.run))
    _use_platform(args.run.train.platform)
    _check_env(args.run)
    return chosen.profile, args


def _check_memory(config: RunConfig) -> None:
    """Refuses, before anything compiles, a measurement whose run cannot fit the device."""
    from mjx_pbac import memory

    try:
        memory.check(config)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None


def bench_seeds_command(argv: list[str]) -> None:
    import jax

    from mjx_pbac.profiling import ProfileSettings, device_counts_up_to, measure_seed_scaling

    profile, args = _measurement(cli.BenchSeedsArgs, "bench-seeds", argv)
    if not args.seed_counts or min(args.seed_counts) < 1:
        raise SystemExit(f"error: seed counts must be >= 1, got {args.seed_counts}")
    available = jax.device_count()
    device_counts = args.device_counts or device_counts_up_to(available)
    if min(device_counts) < 1 or max(device_counts) > available:
        raise SystemExit(f"error: device counts must lie in [1, {available}] ({available} visible), got {device_counts}")
    _check_memory(dataclasses.replace(args.run, train=dataclasses.replace(args.run.train, num_seeds=max(args.seed_counts), devices=1)))
    try:
        settings = ProfileSettings(measure_steps=args.measure_steps, timed_chunks=args.timed_chunks)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    report = measure_seed_scaling(args.run, profile, args.seed_counts, settings, out=args.out, device_counts=device_counts)
    for row in report["rows"]:
        spread = f" on {row['devices_used']} device{'s' if row['devices_used'] != 1 else ''}"
        print(
            f"{row['seeds']:3d} seeds{spread}: {row['vmapped_seconds_per_chunk']:.3f} s/chunk vs "
            f"{row['sequential_seconds_per_chunk']:.3f} s sequential ({row['speedup_vs_sequential']:.2f}x), "
            f"{row['speedup_vs_one_device']:.2f}x one device, "
            f"compile {row['compile_s']:.1f} s, program {row['program_bytes'] or 0:,} bytes"
        )
    print(f"wrote {args.out} ({report['device']['device_kind']})")


def compile_line(report: dict) -> str:
    """The profile's compile seconds, one program after another, and their wall-clock."""
    each = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in report["compile_s"].items())
    wall = report.get("compile_wall_s")
    if not wall:
        return f"compile: {each}"
    at_once = wall.get("at_once", wall["threads"])
    how = "in turn" if at_once == 1 else f"{at_once} at a time"
    return f"compile: {each}; all {wall['all']:.1f} s of wall-clock compiled {how} (tracing {wall['lower']:.1f} s)"


def profile_command(argv: list[str]) -> None:
    from mjx_pbac.config import Schedule
    from mjx_pbac.profiling import ProfileSettings, measure, measurement_config

    profile, args = _measurement(cli.ProfileArgs, "profile", argv)
    _check_memory(args.run)
    try:
        settings = ProfileSettings(
            measure_steps=args.measure_steps, timed_chunks=args.timed_chunks, phases=args.phases, evaluate=args.evaluate,
            split_lengths=args.split_lengths, compile_threads=args.compile_threads,
        )
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    baseline = tuple(f"{key}={value}" for key, value in parse_overrides(args.baseline))
    if baseline:
        _check_env(dataclasses.replace(args.run, train=dataclasses.replace(args.run.train, env_overrides=args.run.train.env_overrides + baseline)))
    if settings.split_lengths:
        measured = Schedule.of(measurement_config(args.run, settings).train)
        bad = [n for n in settings.split_lengths if n not in measured.lengths()[:-1]]
        if bad:
            choices = ", ".join(map(str, measured.lengths()[:-1])) or "none: it has no divisor from 2 up"
            raise SystemExit(
                f"error: --split-lengths {' '.join(map(str, bad))} do not split the measured chunk of "
                f"{measured.iterations_per_chunk} vector steps (--measure-steps / num_envs); choose from {choices}"
            )
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
    print("  " + compile_line(report))
    evaluation = report.get("evaluation")
    if evaluation:
        batched = evaluation.get("batched")
        print(
            f"  evaluation: {evaluation['episodes']} episodes per member in {evaluation['seconds']:.2f} s"
            + (
                f"; {batched['points']} points in one program {batched['seconds']:.2f} s, {batched['seconds_per_point']:.2f} s "
                f"per point ({batched['speedup_per_point']:.2f}x)" if batched else ""
            )
        )
    for row in report.get("splits", []):
        print(
            f"  chunks of {row['length']} vector steps ({row['chunks_per_schedule_chunk']} per measured chunk, "
            f"{row['seconds_per_chunk']:.3f} s each): {row['throughput_vs_whole']:.3f}x the whole chunk's throughput, "
            f"{1e3 * row['added_seconds_per_extra_chunk']:+.2f} ms per extra chunk"
        )
    if baseline:
        print(line(f"  baseline ({' '.join(baseline)})", report["baseline"]))
        print(f"  speed-up per vector step over the baseline: {report['speedup_vs_baseline']['total']:.2f}x")
    print(f"wrote {args.out}")


# -- table, probe ---------------------------------------------------------------------------


def _sets_what_is_chosen(rest: list[str]) -> bool:
    """Whether the training options `rest` set what table and probe choose for each run: the
    profile, algorithm, env or tasks."""
    return any(
        arg.partition("=")[0] in ("--profile", "--resume", "--algo", "--tasks", "--train.env", "--train.tasks")
        for arg in rest
    )


def _one_process(command: str) -> None:
    """Refuses `command` in a multi-process launch: it plans its runs from what is on disk between
    runs, which only one process can do consistently (on a multi-GPU host, one process uses
    every GPU)."""
    import jax

    if jax.process_count() > 1:
        raise SystemExit(
            f"error: train.py {command} runs in one process (it uses every device of its host); on several hosts, "
            "run each of its runs with the training command (docs/seeds.md, section: Several devices and hosts)"
        )


def table_command(argv: list[str]) -> None:
    from mjx_pbac.table import BLOCKS, plan, run_table

    args, rest = cli.parse(cli.TableArgs, argv, "train.py table", known_only=True)
    if (args.block is None) == (args.tasks is None):
        raise SystemExit(f"error: give one of --block ({', '.join(BLOCKS)}) or --tasks T1,T2,...")
    if args.block is not None and args.block not in BLOCKS:
        raise SystemExit(f"error: unknown block {args.block!r}; valid: {', '.join(BLOCKS)}")
    task_names = BLOCKS[args.block] if args.block else tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    algo_names = tuple(a.strip() for a in args.algos.split(",") if a.strip())
    unknown = [a for a in algo_names if a not in _algos()]
    if unknown or not algo_names:
        raise SystemExit(f"error: unknown algorithm(s) {', '.join(unknown) or '(none given)'}; valid: {', '.join(_algos())}")
    if _sets_what_is_chosen(rest):
        raise SystemExit("error: table chooses the profile, algorithm and tasks of each run; use --block/--tasks and --algos")
    seeds = args.seeds if args.seeds is not None else (5 if args.block in ("metaworld", "table2") else 10)
    if seeds < 1:
        raise SystemExit(f"error: --seeds must be >= 1, got {seeds}")
    configs = {}
    for algo in algo_names:
        for task in task_names:
            config = cli.configure(_load(task), [*rest, "--seeds", str(seeds), "--algo", algo], prog=f"train.py table (profile {task})")
            if not configs:
                _use_platform(config.train.platform)
                _one_process("table")
            _check_env(config)
            configs[(algo, task)] = config
    programs = plan(configs, group_tasks=args.group_tasks)
    name = args.block or "+".join(task_names)
    print(f"table {name}: {len(task_names)} task(s) x {len(algo_names)} algorithm(s) in {len(programs)} program(s)", file=sys.stderr)
    try:
        run_table(programs, args.out or f"tables/{name}", name, log=lambda text: print(text, file=sys.stderr))
    except ValueError as error:  # the runner's own errors pass with their exit codes
        raise SystemExit(f"error: {error}") from None


def probe_command(argv: list[str]) -> None:
    import json

    from mjx_pbac import runner
    from mjx_pbac.config import parse_overrides as parse
    from mjx_pbac.probe import VARIANTS, known_answers, task_name, variant_args, write_probe_report
    from mjx_pbac.table import Program, run_table

    args, rest = cli.parse(cli.ProbeArgs, argv, "train.py probe", known_only=True)
    names = list(VARIANTS) if args.algos == "all" else [a.strip() for a in args.algos.split(",") if a.strip()]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown or not names:
        raise SystemExit(f"error: unknown probe variant(s) {', '.join(unknown) or '(none given)'}; valid: all, {', '.join(VARIANTS)}")
    try:
        lengths = sorted({int(x) for x in args.lengths.split(",") if x.strip()})
    except ValueError:
        raise SystemExit(f"error: --lengths takes comma-separated integers, e.g. 10,20,30,40; got {args.lengths!r}") from None
    if not lengths or min(lengths) < 2:
        raise SystemExit(f"error: --lengths must be integers >= 2, got {args.lengths!r}")
    if _sets_what_is_chosen(rest):
        raise SystemExit("error: probe chooses the algorithm, env and tasks of each run; use --algos and --lengths")
    tasks = [task_name(length) for length in lengths]
    length_args = ["--train.env", tasks[0], *(["--tasks", ",".join(tasks[1:])] if len(tasks) > 1 else [])]
    seed_args = ["--seeds", str(args.seeds)]
    profile_config = _load(args.profile)
    base = cli.configure(profile_config, [*rest, *seed_args], prog=f"train.py probe (profile {args.profile})")
    _use_platform(base.train.platform)
    _one_process("probe")
    if not base.train.env.startswith("deep_chain"):
        raise SystemExit(
            f"error: profile {args.profile!r} trains env {base.train.env!r}, not a deep chain; the probe needs a profile "
            "whose env is deep_chain (e.g. the default, deep_chain)"
        )
    out_dir = args.out or f"probes/{args.profile}"
    programs = []
    for name in names:
        variant = VARIANTS[name]
        options = [*rest, *seed_args, "--algo", variant.algo, *variant_args(name, base), *length_args]
        config = cli.configure(profile_config, options, prog=f"train.py probe (variant {name})")
        _check_env(config)
        programs.append(Program(variant.algo, tuple(tasks), config, label=name))
    env_overrides = dict(parse(base.train.env_overrides))
    try:
        known = {str(length): known_answers(task_name(length), env_overrides) for length in lengths}
    except ValueError as error:
        raise SystemExit(f"error: the deep chain's known answers need x0 = 0 and an integer length: {error}") from None
    plan = {
        "profile": args.profile,
        "lengths": lengths,
        "seeds": programs[0].config.train.num_seeds,
        "total_steps": programs[0].config.train.total_steps,
        "variants": {name: VARIANTS[name].description for name in names},
        "runs": {name: f"{out_dir}/runs/{name}" for name in names},
        "known": known,
        "device": runner.device_description()["device_kind"],
        "command": "python train.py probe " + " ".join(argv),
    }
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


# -- report, bench-env ----------------------------------------------------------------------


def _report_on_cpu() -> None:
    """Keeps the report command off any accelerator: it reads files and draws figures, and is
    often started beside a training run on the same GPU, whose memory it must not take (JAX would
    load the GPU backend, and claim 75 % of its memory, at the first array it makes). Sets JAX's
    platforms to the CPU alone, which holds while no backend is loaded yet, as in a fresh process:
    `jax.config.update` and not the JAX_PLATFORMS variable, which JAX reads once, when imported."""
    import jax
    from jax._src import xla_bridge

    loaded = getattr(xla_bridge, "backends_are_initialized", lambda: False)()
    if not loaded:  # loaded already (an in-process caller): too late to change, and nothing to change
        jax.config.update("jax_platforms", "cpu")


def report_command(argv: list[str]) -> None:
    from mjx_pbac.report import ExplorationPlot, parse_scores, write_report

    _report_on_cpu()
    args = cli.parse(cli.ReportArgs, argv, "train.py report")
    plots = []
    for entry in (entry for entries in args.explore for entry in entries):
        parts = entry.split(",")
        if len(parts) != 3:
            raise SystemExit(f"error: --explore {entry!r}: expected RUN_DIR,X_KEY,Y_KEY, e.g. runs/a,x_position,y_position")
        plots.append(ExplorationPlot(parts[0], parts[1], parts[2], phases=args.phases, member=args.member))
    if not args.run_dirs:
        raise SystemExit("error: give at least one run directory")
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
        scores = parse_scores(args.score)
        written = write_report(
            list(args.run_dirs), args.out, exploration=plots or None, x=args.x, scores=scores,
            score_fractions=args.score_fraction, by_run=args.by_run,
        )
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    for row in json.loads(Path(written["time_to_score"]).read_text()):
        if row["score"] is None:
            continue
        where = (
            f"reached at {row['env_steps']:,} env steps, "
            + (f"{row['wall_s'] / 60:.1f} min wall-clock" if row["wall_s"] is not None else "no wall-clock in the logs")
            if row["reached"] else f"not reached (best {row['best']:.4g} at {row['best_env_steps']:,} env steps)"
        )
        print(f"{row['task']} / {row['method']}: score {row['score']:.4g} ({row['score_source']}) {where}")
    print(f"wrote {written['markdown']}, {written['latex']}, {written['time_to_score']} and "
          f"{len(written['curves'])} curve figure(s) in {args.out}")


def bench_env_command(argv: list[str]) -> None:
    import envs
    from envs.benchmark import EnvBenchConfig, run_benchmark, write_report

    args = cli.parse(cli.BenchEnvArgs, argv, "train.py bench-env")
    _use_platform(args.platform, "--platform")
    try:
        config = EnvBenchConfig(**args.bench_config_fields(), overrides=parse_overrides(args.set))
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


# -- entry point ----------------------------------------------------------------------------

COMMANDS: dict[str, Callable[[list[str]], None]] = {
    "profile": profile_command,
    "bench-seeds": bench_seeds_command,
    "table": table_command,
    "probe": probe_command,
    "bench-env": bench_env_command,
    "report": report_command,
}
"""The command words; argv that starts with an option (--profile NAME, --resume RUN_DIR, ...) trains."""


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return
    from mjx_pbac import compilation_cache, devices

    command, rest = argv[0], argv[1:]
    try:  # before anything touches a device: one of several processes (hosts) joins the others
        if command != "report":  # a report reads files, alone: it joins no job (a SLURM batch step names several tasks)
            devices.initialize_distributed()
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    compilation_cache.enable()  # a second run of the same program skips its compile
    if command.startswith("--"):
        train_command(argv)
    elif command in COMMANDS:
        COMMANDS[command](rest)
    else:
        close = difflib.get_close_matches(command, list(COMMANDS), n=2)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise SystemExit(
            f"error: unknown command {command!r}{hint}; train with `--profile NAME`, or use one of: {', '.join(COMMANDS)}"
        )


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
