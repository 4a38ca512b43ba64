"""`train.py evaluate RUN_DIR`: a run's checkpoint evaluated again, every member at once in the
run's own evaluation program (mjx_pbac/policy.py), on more episodes or another variant of its
env; a table printed and a JSON report written, the run's own logs untouched."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from pathlib import Path
from typing import Any

import tyro

from mjx_pbac import cli
from mjx_pbac.commands import _common
from mjx_pbac.config import Platform

SUMMARY = (
    "a run's checkpoint evaluated again (more episodes, another env variant), every member in one "
    "program; a table and a JSON report, the run's logs untouched."
)


@dataclasses.dataclass(frozen=True)
class Args:
    """Evaluate a run's checkpoint: every member's deterministic policy (the run's evaluation
    rule) on N episodes in one program; prints a table and writes a JSON report."""

    run_dir: tyro.conf.Positional[str]
    """The run directory (its config.json and checkpoints/)."""
    episodes: int | None = None
    """Episodes per member; default: the run's own evaluation count. With the run's count and its
    env, the checkpoint's evaluation comes out as the run logged it in eval.jsonl."""
    member: int | None = None
    """Report only this member (all are evaluated together either way)."""
    checkpoint: str | None = None
    """The checkpoint: env steps (e.g. 20000), a file name in RUN_DIR/checkpoints or a path; default
    the newest."""
    set: tuple[str, ...] = ()
    """Env overrides KEY=VALUE added to the run's, e.g. --set episode_length=2000, or a locomotion
    task's delay threshold (`python -c "import envs; print(envs.describe('hopper_delayed'))"`)."""
    out: str | None = None
    """Where the JSON report goes; default RUN_DIR/evaluations/step_<env steps>_<episodes>ep[_<overrides>].json."""
    platform: Platform = "auto"
    """Where to evaluate, as the training command's --train.platform."""


def main(argv: list[str]) -> None:
    """Evaluates the checkpoint `argv` names, prints the table and writes the report."""
    from mjx_pbac import policy, rundir
    from mjx_pbac.records import success_rates

    args = cli.parse(Args, argv, f"{cli.program()} evaluate")
    if args.episodes is not None and args.episodes < 1:
        raise SystemExit(f"error: --episodes must be >= 1, got {args.episodes}")
    overrides = tuple(f"{key}={value}" for key, value in _common.parse_overrides(args.set))
    _common.use_platform(args.platform, "--platform")
    try:
        member = None if args.member is None else (args.member, "--member")
        restored = policy.restore(args.run_dir, args.checkpoint, args.episodes, overrides, member)
        result = policy.evaluate(restored)
    except rundir.RunError as error:
        raise SystemExit(f"error: {error}") from None
    returns, lengths = result["returns"], result["lengths"]
    reports_success = bool(getattr(restored.parts.env, "reports_success", False))
    success = success_rates(returns) if reports_success else None
    rows = []
    for m in restored.members:
        if args.member is not None and m.index != args.member:
            continue
        row: dict[str, Any] = {
            "member": m.index, "seed": m.seed, "label": m.label, "task": m.task,
            "return_mean": float(returns[m.index].mean()), "return_std": float(returns[m.index].std()),
            "length_mean": float(lengths[m.index].mean()),
            "returns": returns[m.index].tolist(), "lengths": lengths[m.index].tolist(),
        }
        if success is not None:
            row["success_rate"] = float(success[m.index])
        rows.append(row)
    report = {
        "run_dir": str(args.run_dir),
        "checkpoint": restored.checkpoint.name,
        "env_steps": restored.env_steps,
        "episodes": restored.config.train.eval_episodes,
        "env_overrides": list(overrides),
        "created": datetime.now().isoformat(timespec="seconds"),
        "members": rows,
    }
    out = Path(args.out) if args.out else _default_out(Path(args.run_dir), restored.env_steps, report["episodes"], overrides)
    out.parent.mkdir(parents=True, exist_ok=True)
    rundir.write_json(out, report)
    print(_table(report, success is not None))
    print(f"wrote {out}")


def _default_out(run_dir: Path, env_steps: int, episodes: int, overrides: tuple[str, ...]) -> Path:
    from mjx_pbac import rundir

    return run_dir / rundir.EVALUATIONS / f"step_{env_steps:09d}_{episodes}ep{_common.overrides_tail(overrides)}.json"


def _table(report: dict, with_success: bool) -> str:
    """The report as a Markdown table, one row per member."""
    head = "| member | label | seed | task | return (mean ± std) | length |" + (" success |" if with_success else "")
    rule = "|---|---|---|---|---|---|" + ("---|" if with_success else "")
    lines = [
        f"{report['checkpoint']} ({report['env_steps']:,} env steps), {report['episodes']} episodes per member"
        + (f", env overrides {' '.join(report['env_overrides'])}" if report["env_overrides"] else ""),
        head, rule,
    ]
    for row in report["members"]:
        line = (
            f"| {row['member']} | {row['label']} | {row['seed']} | {row['task']} | "
            f"{row['return_mean']:.2f} ± {row['return_std']:.2f} | {row['length_mean']:.0f} |"
        )
        if with_success:
            line += f" {row['success_rate']:.2f} |"
        lines.append(line)
    return "\n".join(lines)
