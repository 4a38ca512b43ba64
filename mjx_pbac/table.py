"""A paper table block in one command (`python train.py table --block dmc --algos ... --seeds 10`).

Every task x algorithm of a block runs at its profile's settings (the paper's budgets), with the
seeds as a vmapped axis and the tasks that share a robot (ant, ant_delayed, ant_very_delayed) as
members of one program, so the whole block is a handful of programs run one after another on one
device. The table directory:

  OUT/table.json         the plan: block, algorithms, seeds, one entry per program with its
                         tasks, run directory and status (rewritten as runs finish)
  OUT/runs/<algo>_<tasks>/   one ordinary run directory per program (`mjx_pbac.runner`)
  OUT/report/            `train.py report` over every run: results.md / results.tex (the
                         paper's final-reward and AULC tables), one reward-curve PNG per task

Running the same command again continues: finished runs are skipped, interrupted or crashed ones
resume from their newest checkpoint (bit for bit, as `--resume`), a run that stopped before its
first checkpoint is set aside (renamed, nothing deleted) and started again. A run that diverges
is recorded and the block goes on with the next; the report then notes it. A changed command
(other seeds, settings or algorithms for a run that exists) is refused rather than mixed in.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

from mjx_pbac.config import RunConfig, config_to_dict, merge_task_configs

BLOCKS: dict[str, tuple[str, ...]] = {
    "dmc": ("ball_in_cup_catch", "cartpole_swingup_sparse", "reacher_hard"),
    "dense": ("ant", "hopper", "humanoid"),
    "delayed": ("ant_delayed", "ant_very_delayed", "hopper_delayed", "hopper_very_delayed", "humanoid_delayed"),
}
"""The three blocks of the paper's Table 1, by the profile (= task) names of their rows."""
BLOCKS["mujoco"] = BLOCKS["dense"] + BLOCKS["delayed"]
BLOCKS["table1"] = BLOCKS["dmc"] + BLOCKS["mujoco"]

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
    """"new", "finished", "resumable" (a checkpoint to continue from) or "no-checkpoint"."""
    from mjx_pbac import checkpoint

    if not run_dir.exists() or not any(run_dir.iterdir()):
        return "new"
    summary = run_dir / "summary.json"
    if summary.is_file():
        try:
            if json.loads(summary.read_text()).get("status") == "finished":
                return "finished"
        except json.JSONDecodeError:
            pass
    return "resumable" if checkpoint.list_checkpoints(run_dir / "checkpoints") else "no-checkpoint"


def _same_run(run_dir: Path, config: RunConfig) -> str | None:
    """None when `run_dir` was started with `config` (its run directory aside), else what differs."""
    path = run_dir / "config.json"
    if not path.is_file():
        return "it has no config.json"
    stored = json.loads(path.read_text()).get("config", {})
    wanted = json.loads(json.dumps(config_to_dict(config)))
    for section in (stored, wanted):
        section.get("train", {}).pop("run_dir", None)
    if stored == wanted:
        return None
    differing = []
    for section in sorted(set(stored) | set(wanted)):
        a, b = stored.get(section), wanted.get(section)
        if isinstance(a, dict) and isinstance(b, dict):
            differing += [f"{section}.{k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        elif a != b:
            differing.append(section)
    return "it was started with other settings: " + ", ".join(differing)


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
    from mjx_pbac import runner
    from mjx_pbac.report import write_report

    out_dir = Path(out_dir)
    runs_dir = out_dir / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "block": block,
        "algorithms": sorted({p.algo for p in programs}),
        "runs": [
            {"name": p.name, "algorithm": p.algo, "tasks": list(p.tasks), "run_dir": str(runs_dir / p.name), "status": "planned"}
            for p in programs
        ],
    }

    def write():
        (out_dir / "table.json").write_text(json.dumps(record, indent=2) + "\n")

    # Refuse a changed command before anything runs, so no run of the block is mixed with another's.
    for program in programs:
        run_dir = runs_dir / program.name
        if _status(run_dir) in ("finished", "resumable"):
            difference = _same_run(run_dir, dataclasses.replace(program.config, train=dataclasses.replace(program.config.train, run_dir=str(run_dir))))
            if difference:
                raise runner.RunError(
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
        if status == "no-checkpoint":
            aside = run_dir.with_name(f"{run_dir.name}.incomplete-{time.strftime('%Y%m%d-%H%M%S')}")
            run_dir.rename(aside)
            log(f"[table] {run_dir} stopped before its first checkpoint; set aside as {aside.name}, starting again")
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
            summary = json.loads((run_dir / "summary.json").read_text())
            entry["status"] = summary["status"]
        except runner.TrainingDiverged as error:
            entry["status"] = "diverged"
            log(f"[table] {program.algo} on {tasks} diverged, going on with the next run: {error}")
        write()
        if entry["status"] == "interrupted":
            record["elapsed_s"] = time.perf_counter() - started
            write()
            log("[table] interrupted; run the same command again to continue")
            return record
    record["elapsed_s"] = time.perf_counter() - started
    run_dirs = [r["run_dir"] for r in record["runs"] if (Path(r["run_dir"]) / "eval.jsonl").is_file()]
    write()
    if report is None:
        written = write_report(run_dirs, out_dir / "report")
    else:
        written = report(run_dirs, out_dir)
    record["report"] = {key: str(value) for key, value in written.items() if key in ("markdown", "latex")}
    write()
    log(f"[table] report: {written['markdown']}")
    return record
