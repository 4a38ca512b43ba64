"""`train.py table`: every task x algorithm of a paper table block, planned into programs and
run (mjx_pbac/table.py), resumable, ending with the report."""

from __future__ import annotations

import dataclasses
import sys
from typing import Annotated

import tyro

from mjx_pbac import cli
from mjx_pbac.commands import _common
from mjx_pbac.table import PAPER_ALGOS

SUMMARY = (
    "every task x algorithm of a paper table block (dmc, dense, delayed, mujoco, table1) at the paper's "
    "budgets, seeds and same-robot tasks as members of one program, resumable, ending with the report."
)


@dataclasses.dataclass(frozen=True)
class Args:
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


def main(argv: list[str]) -> None:
    """Plans the block (or tasks) `argv` names into programs and runs them, then the report."""
    from mjx_pbac.table import BLOCKS, plan, run_table

    args, rest = cli.parse(Args, argv, f"{cli.program()} table", known_only=True)
    if (args.block is None) == (args.tasks is None):
        raise SystemExit(f"error: give one of --block ({', '.join(BLOCKS)}) or --tasks T1,T2,...")
    if args.block is not None and args.block not in BLOCKS:
        raise SystemExit(f"error: unknown block {args.block!r}; valid: {', '.join(BLOCKS)}")
    task_names = BLOCKS[args.block] if args.block else tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    algo_names = tuple(a.strip() for a in args.algos.split(",") if a.strip())
    known = _common.algo_names()
    unknown = [a for a in algo_names if a not in known]
    if unknown or not algo_names:
        raise SystemExit(f"error: unknown algorithm(s) {', '.join(unknown) or '(none given)'}; valid: {', '.join(known)}")
    if _common.sets_what_is_chosen(rest):
        raise SystemExit("error: table chooses the profile, algorithm and tasks of each run; use --block/--tasks and --algos")
    seeds = args.seeds if args.seeds is not None else (5 if args.block in ("metaworld", "table2") else 10)
    if seeds < 1:
        raise SystemExit(f"error: --seeds must be >= 1, got {seeds}")
    configs = {}
    for task in task_names:  # task by task: a finished task is a whole row of the table
        for algo in algo_names:
            options, prog = [*rest, "--seeds", str(seeds), "--algo", algo], f"{cli.program()} table (profile {task})"
            config = cli.configure(_common.load(task), options, prog)
            if not configs:
                _common.use_platform(config.train.platform)
                _common.one_process("table")
            config = _common.with_task_profiles(config, options, prog, profile=task)
            _common.check_env(config)
            configs[(algo, task)] = config
    programs = plan(configs, group_tasks=args.group_tasks)
    name = args.block or "+".join(task_names)
    print(f"table {name}: {len(task_names)} task(s) x {len(algo_names)} algorithm(s) in {len(programs)} program(s)", file=sys.stderr)
    try:
        run_table(programs, args.out or f"tables/{name}", name, log=lambda text: print(text, file=sys.stderr))
    except ValueError as error:  # the runner's own errors pass with their exit codes
        raise SystemExit(f"error: {error}") from None
