"""A paper table block in one command (`python train.py table --block dmc --algos ... --seeds 10`).

Every task x algorithm of a block runs at its profile's settings (the paper's budgets), with the
seeds as a vmapped axis and the tasks that share a robot (ant, ant_delayed, ant_very_delayed) as
members of one program, so the whole block is a handful of programs run one after another on one
device, task by task (every algorithm of a task before the next task, so that each finished task
is a whole row of the table). The table directory:

  OUT/table.json         the plan: block, algorithms, seeds, one entry per program with its
                         tasks, run directory and status (rewritten as runs finish)
  OUT/runs/<algo>_<tasks>/   one ordinary run directory per program (`mjx_pbac.runner`)
  OUT/report/            `train.py report` over every run: results.md / results.tex (the
                         paper's final-reward and AULC tables, its values beside), the time to
                         90 % and 100 % of the paper's PBAC final, reward curves per task
                         against env steps and against wall-clock

Running the same command again continues: finished runs are skipped, interrupted, failed or
killed ones resume from their newest usable checkpoint (bit for bit, as `--resume`; one that
stopped before its first checkpoint starts again from step 0, its logs set aside), a directory
without a readable config.json is set aside (renamed, nothing deleted) and started again. A run
that diverges is recorded and the block goes on with the next; the report then notes it. An
interrupted or failed run stops the block (exit code as `train.py`'s) after recording its status.
A changed command (other seeds, settings or algorithms for a run that exists) is refused rather
than mixed in. The table directory is locked while a command works on it.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from mjx_pbac import rundir
from mjx_pbac.config import RunConfig, config_from_dict, config_to_dict, merge_task_configs

BLOCKS: dict[str, tuple[str, ...]] = {
    "dmc": ("ball_in_cup_catch", "cartpole_swingup_sparse", "reacher_hard"),
    "dense": ("ant", "hopper", "humanoid"),
    "delayed": ("ant_delayed", "ant_very_delayed", "hopper_delayed", "hopper_very_delayed", "humanoid_delayed"),
}
"""The blocks of the paper's Tables 1 and 2, by the profile (= task) names of their rows."""
BLOCKS["mujoco"] = BLOCKS["dense"] + BLOCKS["delayed"]
BLOCKS["table1"] = BLOCKS["dmc"] + BLOCKS["mujoco"]
BLOCKS["metaworld"] = (
    "mw_window_close", "mw_window_open", "mw_drawer_close", "mw_drawer_open", "mw_reach",
    "mw_button_press_topdown", "mw_door_open",
)
"""The rows of the paper's Table 2 (sparse Meta-World; the paper trains 5 seeds: `--seeds 5`);
its report is the success-rate table (`mjx_pbac.report`)."""
BLOCKS["table2"] = BLOCKS["metaworld"]

PAPER_ALGOS = ("ben", "bootdqn_p", "drnd", "pbac")
"""The columns of the paper's Table 1."""


class Program(NamedTuple):
    """One run of the block: an algorithm on one or more tasks of one robot."""

    algo: str
    tasks: tuple[str, ...]
    config: RunConfig
    label: str = ""
    """The run's name when set (the probe's variants), else algo_task1+task2."""

    @property
    def name(self) -> str:
        return self.label or f"{self.algo}_{'+'.join(self.tasks)}"


def plan(task_configs: dict[tuple[str, str], RunConfig], group_tasks: bool = True) -> list[Program]:
    """Programs for {(algo, task): that task's run config}: per algorithm, the tasks whose configs
    can be members of one program (same robot and physics, same sizes and budgets; see
    `config.merge_task_configs`) are grouped, in the order given; with `group_tasks` False every
    task is a program of its own."""
    import envs
    from mjx_pbac.config import parse_overrides

    programs: list[Program] = []
    for (algo, task), config in task_configs.items():
        for index, program in enumerate(programs):
            if not group_tasks or program.algo != algo:
                continue
            names = (*program.tasks, task)
            candidate = dataclasses.replace(
                program.config, train=dataclasses.replace(program.config.train, tasks=names[1:], task_overrides=())
            )
            try:
                envs.make_family(names, **parse_overrides(candidate.train.env_overrides))
                merged = merge_task_configs(candidate, {t: task_configs[(algo, t)] for t in names[1:]})
            except ValueError:
                continue
            programs[index] = Program(algo, names, merged)
            break
        else:
            programs.append(Program(algo, (task,), config))
    return programs


def _status(run_dir: Path) -> str:
    """"new", "finished", "resumable" (`--resume` continues it, from step 0 when it has no
    checkpoint) or "no-config" (not a run directory that can be resumed)."""
    if not run_dir.exists() or not any(p.name != rundir.LOCK for p in run_dir.iterdir()):
        return "new"
    try:
        rundir.read_run_record(run_dir)
    except rundir.RunError:
        return "no-config"
    return "finished" if rundir.read_status(run_dir) == "finished" else "resumable"


def _same_run(run_dir: Path, config: RunConfig) -> str | None:
    """None when `run_dir` was started with `config` (its run directory aside), else what differs."""
    if not (run_dir / rundir.CONFIG).is_file():
        return "it has no config.json"
    stored = rundir.read_run_record(run_dir)["config"]
    try:  # through the config, so that options added since the run started read as their defaults
        stored = json.loads(json.dumps(config_to_dict(config_from_dict(stored))))
    except (ValueError, TypeError):
        pass  # an invalid config.json differs, as it is
    wanted = json.loads(json.dumps(config_to_dict(config)))
    for section in (stored, wanted):
        for name in ("run_dir", "platform"):  # where it runs does not change what it trains
            section.get("train", {}).pop(name, None)
    if stored == wanted:
        return None
    return "it was started with other settings: " + ", ".join(rundir.config_differences(stored, wanted))


def run_table(
    programs: list[Program],
    out_dir: str | Path,
    block: str,
    log: Callable[[str], None] = print,
    report: Callable[[list[str], Path], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Runs (or continues) every program into `out_dir` and writes the report (`report(run_dirs,
    out_dir)`, default: `train.py report` into OUT/report); returns the plan record written to
    table.json. See the module docstring."""
    out_dir = Path(out_dir)
    runs_dir = out_dir / "runs"
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise rundir.RunError(f"cannot create the output directory {runs_dir}: {error.strerror}") from None
    with rundir.RunLock(out_dir):
        return _run_table(programs, out_dir, runs_dir, block, log, report)


def _run_table(programs, out_dir: Path, runs_dir: Path, block: str, log, report) -> dict[str, Any]:
    from mjx_pbac import runner
    from mjx_pbac.report import write_report

    record: dict[str, Any] = {
        "block": block,
        "algorithms": sorted({p.algo for p in programs}),
        "runs": [
            {"name": p.name, "algorithm": p.algo, "tasks": list(p.tasks), "run_dir": str(runs_dir / p.name), "status": "planned"}
            for p in programs
        ],
    }

    def write():
        rundir.write_json(out_dir / "table.json", record)

    # Refuse a changed command before anything runs, so no run of the block is mixed with another's.
    for program in programs:
        run_dir = runs_dir / program.name
        if _status(run_dir) in ("finished", "resumable"):
            difference = _same_run(run_dir, dataclasses.replace(program.config, train=dataclasses.replace(program.config.train, run_dir=str(run_dir))))
            if difference:
                raise rundir.RunError(
                    f"{run_dir} exists but {difference}; use another --out, or move that run away"
                )
    write()
    started = time.perf_counter()
    for entry, program in zip(record["runs"], programs):
        run_dir = runs_dir / program.name
        status = _status(run_dir)
        tasks = ", ".join(program.tasks)
        if status == "finished":
            log(f"[table] {program.algo} on {tasks}: finished earlier, skipped ({run_dir})")
            entry["status"] = "finished"
            continue
        if status == "no-config":
            aside = run_dir.with_name(f"{run_dir.name}.incomplete-{time.strftime('%Y%m%d-%H%M%S')}")
            run_dir.rename(aside)
            log(f"[table] {run_dir} has no readable config.json; set aside as {aside.name}, starting again")
            status = "new"
        try:
            if status == "resumable":
                log(f"[table] {program.algo} on {tasks}: resuming {run_dir}")
                runner.train(None, resume_dir=run_dir)
            else:
                log(f"[table] {program.algo} on {tasks}: {len(program.tasks)} task(s) x "
                    f"{program.config.train.num_seeds} seed(s) in one program -> {run_dir}")
                config = dataclasses.replace(program.config, train=dataclasses.replace(program.config.train, run_dir=str(run_dir)))
                runner.train(config, profile=f"table-{block}")
            entry["status"] = "finished"
        except runner.TrainingDiverged as error:
            entry["status"] = "diverged"
            log(f"[table] {program.algo} on {tasks} diverged, going on with the next run: {error}")
        except (runner.RunInterrupted, runner.RunFailed) as error:
            entry["status"] = "interrupted" if isinstance(error, runner.RunInterrupted) else "failed"
            record["elapsed_s"] = time.perf_counter() - started
            write()
            log(f"[table] {program.algo} on {tasks} {entry['status']}; run the same command again to continue")
            raise
        write()
    record["elapsed_s"] = time.perf_counter() - started
    run_dirs = [r["run_dir"] for r in record["runs"] if (Path(r["run_dir"]) / rundir.EVAL).is_file()]
    write()
    if report is None:
        written = write_report(run_dirs, out_dir / "report", x=("steps", "wall"), score_fractions=(0.9, 1.0))
    else:
        written = report(run_dirs, out_dir)
    record["report"] = {key: str(value) for key, value in written.items() if key in ("markdown", "latex")}
    write()
    log(f"[table] report: {written['markdown']}")
    return record
