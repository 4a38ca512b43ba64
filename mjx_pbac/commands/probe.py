"""`train.py probe`: every probe variant on the deep-sea chain at several lengths, the lengths x
seeds as members of one program per variant (mjx_pbac/probe.py), resumable, with its report."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import tyro

from mjx_pbac import cli
from mjx_pbac.commands import _common
from mjx_pbac.probe import DEFAULT_LENGTHS, VARIANTS

SUMMARY = (
    "every algorithm on the deep-sea chain at several lengths (seeds and lengths as members of one "
    "program per algorithm), resumable: seeds that reached the goal, first visits, final greedy return, "
    "largest length solved, ensemble disagreement."
)


@dataclasses.dataclass(frozen=True)
class Args:
    """Trains every probe variant on the deep-sea chain (envs/deep_chain.py: a fixed random
    action sign per cell, so no constant action reaches the goal) at each length, the lengths x
    seeds as members of one program per variant, at the probe profile's settings, e.g.
    profiles/deep_chain.toml: one head per episode for the posterior-sampling methods, a stated
    initial temperature for soft actors. Writes OUT/probe.md and OUT/probe.json (per variant and
    length: seeds that reached the goal in training, first-visit step, final greedy return, seeds
    solved, ensemble disagreement; per variant the largest length solved in >= 8/10 seeds),
    OUT/probe_success.png and OUT/spread_position.png. Running the same command again continues:
    finished variants are skipped, interrupted ones resume; the `report OUT` command rewrites the
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


def main(argv: list[str]) -> None:
    """Trains the variants `argv` names at its lengths (one program each), records the plan in
    OUT/probe_plan.json, then writes and prints the probe's report."""
    from mjx_pbac import devices
    from mjx_pbac.config import parse_overrides as parse
    from mjx_pbac.probe import known_answers, task_name, variant_args, write_probe_report
    from mjx_pbac.table import Program, run_table

    args, rest = cli.parse(Args, argv, f"{cli.program()} probe", known_only=True)
    names, lengths = _variants_and_lengths(args)
    if _common.sets_what_is_chosen(rest):
        raise SystemExit("error: probe chooses the algorithm, env and tasks of each run; use --algos and --lengths")
    tasks = [task_name(length) for length in lengths]
    length_args = ["--train.env", tasks[0], *(["--tasks", ",".join(tasks[1:])] if len(tasks) > 1 else [])]
    seed_args = ["--seeds", str(args.seeds)]
    profile_config = _common.load(args.profile)
    base = cli.configure(profile_config, [*rest, *seed_args], prog=f"{cli.program()} probe (profile {args.profile})")
    _common.use_platform(base.train.platform)
    _common.one_process("probe")
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
        config = cli.configure(profile_config, options, prog=f"{cli.program()} probe (variant {name})")
        _common.check_env(config)
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
        "device": devices.device_description()["device_kind"],
        "command": f"{cli.program()} probe " + " ".join(argv),
    }
    _write_plan(out_dir, plan)
    print(f"probe: {len(names)} variant(s) x {len(lengths)} length(s) x {plan['seeds']} seed(s), one program per variant -> {out_dir}", file=sys.stderr)

    def report(run_dirs, directory):
        written = write_probe_report(directory)
        print(Path(written["markdown"]).read_text())
        return written

    try:
        run_table(programs, out_dir, "probe", log=lambda text: print(text, file=sys.stderr), report=report)
    except ValueError as error:  # the runner's own errors pass with their exit codes
        raise SystemExit(f"error: {error}") from None


def _variants_and_lengths(args: Args) -> tuple[list[str], list[int]]:
    """The variant names and the sorted chain lengths `--algos` and `--lengths` ask for."""
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
    return names, lengths


def _write_plan(out_dir: str, plan: dict[str, Any]) -> None:
    """Writes `plan` to OUT/probe_plan.json, keeping the variants of an earlier probe there (a
    probe continued with more variants); refuses one of other lengths or seeds."""
    try:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SystemExit(f"error: cannot create the probe directory {out_dir}: {error.strerror}") from None
    plan_path = Path(out_dir) / "probe_plan.json"
    if plan_path.is_file():
        earlier = json.loads(plan_path.read_text())
        plan["runs"] = {**earlier.get("runs", {}), **plan["runs"]}
        plan["variants"] = {**earlier.get("variants", {}), **plan["variants"]}
        if earlier.get("lengths") != plan["lengths"] or earlier.get("seeds") != plan["seeds"]:
            raise SystemExit(
                f"error: {out_dir} holds a probe with lengths {earlier.get('lengths')} and {earlier.get('seeds')} seeds; "
                "use another --out for other lengths or seeds"
            )
    plan_path.write_text(json.dumps(plan, indent=2) + "\n")
