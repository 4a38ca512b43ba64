"""The deep-exploration probe: every algorithm on the deep-sea chain at several lengths
(`python train.py probe`), and what it shows.

The probe env (`envs.deep_chain`) gives each cell a fixed random action sign, so no constant
action and hardly any random or committed-random policy reaches the far reward: only directed
exploration does. Each variant (an algorithm with its probe settings) is one program whose
members are the lengths (`deep_chain_<L>` tasks) crossed with the seeds, run one after another
through `mjx_pbac.table.run_table` (so a second call continues, skipping finished variants).

OUT/
  table.json            the plan and each variant's status (as `train.py table` writes)
  runs/<variant>/       one ordinary run directory per variant (`report` reads it as any run)
  probe.json            per variant x length: seeds that reached the goal during training, first-
                        visit steps, final greedy return, seeds solved, disagreement at the end;
                        per variant the largest length solved (and reached) in >= 8/10 seeds;
                        per length the env's known answers
  probe.md              the same as tables
  probe_success.png     seeds solved and reached against length, per variant
  spread_position.png   the ensemble's disagreement against position (final checkpoints)

"Reached": the member's training instance entered the goal zone at least once (warm-up
included; `first_goal_step` in metrics.jsonl). "Late": it was in the goal zone during the last
quarter of training (what its acting heads do, which the mean-over-heads evaluation can miss). "Solved": its final greedy evaluation (the mean
over heads, as every evaluation here) returned more than the midpoint between the distractor's
return and the optimal return.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from mjx_pbac import rundir

SOLVED_SHARE = 0.8
"""A length counts as solved (reached) by a variant when at least this share of its seeds did."""


class Variant(NamedTuple):
    algo: str
    args: tuple[str, ...]
    """Command-line options on top of the probe profile."""
    description: str


VARIANTS: dict[str, Variant] = {
    "pbac_soft": Variant("pbac", ("--pbac.actor", "soft"), "PBAC, squashed-Gaussian heads (the paper's actor)"),
    "pbac_deterministic": Variant("pbac", ("--pbac.actor", "deterministic"), "PBAC, tanh heads"),
    "pbac_prior": Variant(
        "pbac",
        ("--pbac.actor", "deterministic", "--pbac.prior-scale", "{bootdqn_p.prior_scale}"),
        "PBAC, tanh heads, critics with BootDQN-P's random priors (beyond the paper)",
    ),
    "sac": Variant("sac", (), "SAC"),
    "bootdqn_p": Variant("bootdqn_p", (), "BootDQN-P"),
    "drnd_penalty": Variant("drnd", ("--drnd.sign", "penalty"), "DRND, bonus subtracted in the target (the reference code)"),
    "drnd_bonus": Variant("drnd", ("--drnd.sign", "bonus"), "DRND, bonus added (the DRND paper)"),
    "ben": Variant("ben", (), "BEN"),
}
"""Probe variants by name; `{section.field}` in an option takes that value from the profile."""

DEFAULT_LENGTHS = (10, 20, 30)


def task_name(length: int) -> str:
    return f"deep_chain_{length}"


def variant_args(name: str, profile_config: Any) -> list[str]:
    """The variant's options with `{section.field}` filled in from `profile_config` (a RunConfig)."""
    args = []
    for arg in VARIANTS[name].args:
        if arg.startswith("{") and arg.endswith("}"):
            section, field = arg[1:-1].split(".")
            arg = str(getattr(getattr(profile_config, section), field))
        args.append(arg)
    return args


# -- known answers ----------------------------------------------------------------------------


def known_answers(task: str, env_overrides: dict[str, Any]) -> dict[str, float]:
    """The env's reference values for `task`: optimal, goal and distractor returns, the solved
    threshold, and the probabilities that reference policies reach the goal within an episode."""
    import envs

    env = envs.make(task, **env_overrides)
    optimal, distractor = env.optimal_return(), env.distractor_return()
    return {
        "length": env.config.length,
        "steps_to_goal": env.config.steps_to_goal,
        "optimal_return": optimal,
        "distractor_return": distractor,
        "solved_threshold": (optimal + distractor) / 2,
        "random_sign_reach": env.reach_probability("random_sign"),
        "committed_random_reach": env.reach_probability("committed_random"),
        "constant_reach": env.reach_probability("constant"),
    }


# -- reading the runs -------------------------------------------------------------------------


def member_outcomes(run_dir: Path) -> list[dict[str, Any]]:
    """Per member of a probe run: task, seed, first goal visit (env steps, None if never), final
    greedy return, and the disagreement metrics of its last training chunk."""
    record = json.loads((run_dir / rundir.CONFIG).read_text())
    first: dict[int, int] = {}
    last_chunk: dict[int, dict[str, Any]] = {}
    entries = rundir.read_jsonl(run_dir / rundir.METRICS)
    total = record.get("effective_steps", {}).get("total_steps") or max((e["env_steps"] for e in entries), default=0)
    late: set[int] = {e["member"] for e in entries if e.get("goal_steps", 0) > 0 and e["env_steps"] > 0.75 * total}
    for entry in entries:
        member = entry["member"]
        if "first_goal_step" in entry and member not in first:
            first[member] = entry["first_goal_step"]
        if entry.get("phase") == "train":
            last_chunk[member] = entry
    evaluations = rundir.read_jsonl(run_dir / rundir.EVAL)
    last_step = max((e["env_steps"] for e in evaluations), default=None)
    final = {e["member"]: e["return_mean"] for e in evaluations if e["env_steps"] == last_step}
    names = ("critic_q_spread", "critic_gap_spread", "critic_vote_spread", "critic_pair_q_spread", "head_action_spread")
    return [
        {
            "member": m["index"],
            "task": m["task"],
            "seed": m["seed"],
            "first_goal_step": first.get(m["index"]),
            "late_goal": m["index"] in late,
            "final_return": final.get(m["index"]),
            "final_env_steps": last_step,
            **{name: last_chunk.get(m["index"], {}).get(name) for name in names},
        }
        for m in record["members"]
    ]


def _mean(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def summarize(plan: dict[str, Any]) -> dict[str, Any]:
    """probe.json's content from the plan (`probe.json` as written before the runs) and the runs."""
    lengths = plan["lengths"]
    known = {str(length): plan["known"][str(length)] for length in lengths}
    rows, per_variant = [], {}
    for variant, run_dir in plan["runs"].items():
        run_dir = Path(run_dir)
        outcomes = member_outcomes(run_dir) if (run_dir / rundir.CONFIG).is_file() else []
        solved_lengths, reached_lengths = [], []
        for length in lengths:
            answers = known[str(length)]
            members = [o for o in outcomes if o["task"] == task_name(length)]
            finished = [o for o in members if o["final_return"] is not None]
            firsts = [o["first_goal_step"] for o in members if o["first_goal_step"] is not None]
            solved = sum(o["final_return"] > answers["solved_threshold"] for o in finished)
            row = {
                "variant": variant,
                "length": length,
                "seeds": len(members),
                "reached": len(firsts),
                "late": sum(o["late_goal"] for o in members),
                "first_visit_median": float(np.median(firsts)) if firsts else None,
                "first_visit_min": min(firsts) if firsts else None,
                "first_visit_max": max(firsts) if firsts else None,
                "final_return_mean": _mean([o["final_return"] for o in finished]),
                "final_returns": [o["final_return"] for o in members],
                "solved": solved,
                **{name: _mean([o[name] for o in members]) for name in (
                    "critic_q_spread", "critic_gap_spread", "critic_vote_spread", "critic_pair_q_spread", "head_action_spread"
                )},
            }
            rows.append(row)
            if members and solved >= SOLVED_SHARE * len(members):
                solved_lengths.append(length)
            if members and len(firsts) >= SOLVED_SHARE * len(members):
                reached_lengths.append(length)
        per_variant[variant] = {
            "largest_solved": max(solved_lengths, default=None),
            "largest_reached": max(reached_lengths, default=None),
            "status": plan.get("status", {}).get(variant),
        }
    return {**plan, "rows": rows, "variants": per_variant}


# -- writing ----------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.{digits}f}"


def markdown(summary: dict[str, Any]) -> str:
    lengths = summary["lengths"]
    lines = [
        "# Deep-exploration probe (deep-sea chain)",
        "",
        f"Seeds per cell: {summary['seeds']}; env steps per run: {summary['total_steps']:,}; "
        f"profile `{summary['profile']}`; device: {summary.get('device', '?')}; "
        f"wall time: {_fmt(summary.get('elapsed_s'), 0)} s.",
        "",
        "## Known answers",
        "",
        "| length | steps to goal | optimal return | distractor return | solved if return > | "
        "P(reach), random +-1 | P(reach), committed random | P(reach), constant |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for length in lengths:
        k = summary["known"][str(length)]
        lines.append(
            f"| {length} | {k['steps_to_goal']} | {k['optimal_return']:.2f} | {k['distractor_return']:.2f} | "
            f"{k['solved_threshold']:.2f} | {k['random_sign_reach']:.3g} | {k['committed_random_reach']:.3g} | "
            f"{k['constant_reach']:.3g} |"
        )
    lines += [
        "",
        "## Seeds solved / reached the goal in training",
        "",
        "Solved: final greedy (mean-over-heads) return above the threshold. Reached: the training "
        "instance entered the goal zone at least once.",
        "",
        "| variant | " + " | ".join(f"L = {length}" for length in lengths) + " | largest L solved (>= 8/10) | largest L reached (>= 8/10) |",
        "|---|" + "---|" * (len(lengths) + 2),
    ]
    by_key = {(r["variant"], r["length"]): r for r in summary["rows"]}
    for variant, info in summary["variants"].items():
        cells = []
        for length in lengths:
            r = by_key[(variant, length)]
            cells.append(f"{r['solved']}/{r['seeds']} · {r['reached']}/{r['seeds']}" if r["seeds"] else "-")
        lines.append(
            f"| {variant} | " + " | ".join(cells) + f" | {_fmt(info['largest_solved'])} | {_fmt(info['largest_reached'])} |"
        )
    lines += [
        "",
        "## Per variant and length",
        "",
        "First visit: env steps until the first step in the goal zone (median [min, max] over the "
        "seeds that reached it). Spreads: the last training chunk, mean over seeds "
        "(`mjx_pbac/disagreement.py`): q = std over critics of Q at the replayed actions "
        "(`critic_q_spread`), gap = of Q(s, a1) - Q(s, a2), vote = of its sign (0 all agree, "
        "1 even split), heads = std of the heads' actions.",
        "",
        "| variant | L | reached | first visit | in goal, last quarter | final return (mean) | solved | q spread | gap spread | vote spread | heads spread |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summary["rows"]:
        first = (
            f"{_fmt(r['first_visit_median'], 0)} [{_fmt(r['first_visit_min'])}, {_fmt(r['first_visit_max'])}]"
            if r["reached"]
            else "-"
        )
        lines.append(
            f"| {r['variant']} | {r['length']} | {r['reached']}/{r['seeds']} | {first} | {r['late']}/{r['seeds']} | {_fmt(r['final_return_mean'])} | "
            f"{r['solved']}/{r['seeds']} | {_fmt(r['critic_q_spread'], 3)} | {_fmt(r['critic_gap_spread'], 3)} | "
            f"{_fmt(r['critic_vote_spread'], 3)} | {_fmt(r['head_action_spread'], 3)} |"
        )
    unfinished = [v for v, info in summary["variants"].items() if info.get("status") not in (None, "finished")]
    if unfinished:
        lines += ["", "Not finished: " + ", ".join(f"{v} ({summary['variants'][v]['status']})" for v in unfinished)]
    return "\n".join(lines) + "\n"


def plot_success(summary: dict[str, Any], path: Path) -> Path:
    """Grouped bars per length, one per variant: seeds that reached the goal in training (light)
    with the seeds solved (dark) drawn inside them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mjx_pbac.report.figures import save_png

    lengths = summary["lengths"]
    by_key = {(r["variant"], r["length"]): r for r in summary["rows"]}
    variants = [v for v in summary["variants"] if any(by_key[(v, length)]["seeds"] for length in lengths)]
    width = 0.8 / max(len(variants), 1)
    colors = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(lengths) + 0.35 * len(variants) * len(lengths)), 4))
    for i, variant in enumerate(variants):
        xs = np.arange(len(lengths)) + (i - (len(variants) - 1) / 2) * width
        reached = [by_key[(variant, length)]["reached"] for length in lengths]
        solved = [by_key[(variant, length)]["solved"] for length in lengths]
        ax.bar(xs, reached, width * 0.95, color=colors(i), alpha=0.35)
        ax.bar(xs, solved, width * 0.6, color=colors(i), label=variant)
    ax.axhline(SOLVED_SHARE * summary["seeds"], color="grey", lw=0.8, ls="--")
    ax.set_xticks(np.arange(len(lengths)), [f"L = {length}" for length in lengths])
    ax.set_ylim(0, summary["seeds"] + 0.5)
    ax.set_ylabel(f"seeds (of {summary['seeds']})")
    ax.legend(fontsize=8, ncol=2, loc="upper right")
    ax.set_title(
        f"deep-sea chain, {summary['total_steps']:,} env steps per seed: seeds solved (dark) "
        "within seeds that reached the goal in training (light)",
        fontsize=9,
    )
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    plt.close(fig)
    return path


def position_spreads(run_dir: Path, length: int, pairs: int = 32) -> dict[str, np.ndarray]:
    """The disagreement measures at every cell x = 0, 1, ..., L of the deep chain for each member
    of `run_dir` training on `deep_chain_<length>`, from its newest checkpoint: {"x": [P],
    measure: [seeds, P]}, each position averaged over `pairs` random action pairs."""
    import jax
    import jax.numpy as jp

    from mjx_pbac import checkpoint
    from mjx_pbac.build import build
    from mjx_pbac.disagreement import ensemble_disagreement

    config, _ = rundir.load_run_config(run_dir)
    built = build(config, donate=False)
    state, _ = checkpoint.restore(checkpoint.latest(run_dir / rundir.CHECKPOINTS), template=built.init_state())
    members = [m.index for m in built.members if m.task == task_name(length)]
    env = built.env
    xs = np.arange(0, length + 1, env.config.step_size, dtype=np.float32)
    obs = jax.vmap(env._get_obs)(jp.asarray(np.repeat(xs, pairs)))

    def one(agent, key):
        return ensemble_disagreement(built.algorithm, agent, obs, key)

    agents = jax.tree.map(lambda leaf: leaf[np.asarray(members)], state.agent)
    keys = jax.random.split(jax.random.key(0), len(members))
    values = jax.device_get(jax.jit(jax.vmap(one))(agents, keys))
    return {"x": xs, **{name: np.asarray(v).reshape(len(members), len(xs), pairs).mean(axis=2) for name, v in values.items()}}


def plot_spreads(summary: dict[str, Any], path: Path, variants: tuple[str, ...] = ("pbac_soft", "pbac_deterministic", "pbac_prior", "bootdqn_p"), length: int | None = None) -> Path | None:
    """Gap spread, vote spread and Q spread against position for the given variants (those that
    finished), at `length` (default: the largest probed length up to 30)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mjx_pbac.report.figures import save_png

    lengths = summary["lengths"]
    length = length or max([L for L in lengths if L <= 30] or lengths[:1])
    from mjx_pbac import checkpoint

    done = [
        v for v in variants
        if v in summary["runs"] and summary["variants"].get(v, {}).get("status") == "finished"
        and checkpoint.list_checkpoints(Path(summary["runs"][v]) / rundir.CHECKPOINTS)
    ]
    if not done:  # e.g. a copy of the probe without its checkpoints (they hold the replay buffers)
        return None
    panels = (("critic_q_spread", "q_spread", "std over critics of Q(s, a1)"),
              ("critic_gap_spread", "gap_spread", "std over critics of Q(s, a1) - Q(s, a2)"),
              ("critic_vote_spread", "vote_spread", "std over critics of sign of the gap"),
              ("head_action_spread", "action_spread", "std over heads of the action"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.6))
    data = {}
    for variant in done:
        data[variant] = position_spreads(Path(summary["runs"][variant]), length)
        spreads = data[variant]
        for ax, (_, key, _) in zip(axes, panels):
            mean = spreads[key].mean(axis=0)
            line, = ax.plot(spreads["x"], mean, label=variant)
            ax.fill_between(spreads["x"], spreads[key].min(axis=0), spreads[key].max(axis=0), color=line.get_color(), alpha=0.12)
    for ax, (_, _, title) in zip(axes, panels):
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("position x (cell)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"ensemble disagreement against position, deep chain L = {length}, final checkpoints "
                 "(line: mean over seeds, band: min-max)", fontsize=10)
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    plt.close(fig)
    summary["spread_position"] = {
        "length": length,
        "variants": {v: {k: np.round(np.asarray(d[k]).mean(axis=0), 4).tolist() for k in d if k != "x"} for v, d in data.items()},
        "x": np.asarray(next(iter(data.values()))["x"]).tolist(),
    }
    return path


def write_probe_report(out_dir: str | Path, figures: bool = True) -> dict[str, Path]:
    """probe.json (updated with the results), probe.md and the figures from OUT/probe_plan.json
    and the runs; returns the paths written."""
    out_dir = Path(out_dir)
    plan_path = out_dir / "probe_plan.json"
    if not plan_path.is_file():
        from mjx_pbac.cli import program

        raise ValueError(f"{out_dir} is not a probe directory (no probe_plan.json); run `{program()} probe --out {out_dir}`")
    plan = json.loads(plan_path.read_text())
    table = out_dir / "table.json"
    if table.is_file():
        record = json.loads(table.read_text())
        plan["status"] = {entry["name"]: entry["status"] for entry in record["runs"]}
        plan["elapsed_s"] = record.get("elapsed_s", plan.get("elapsed_s"))
    summary = summarize(plan)
    written = {}
    if figures:
        written["success"] = plot_success(summary, out_dir / "probe_success.png")
        spread = plot_spreads(summary, out_dir / "spread_position.png")
        earlier = out_dir / "probe.json"
        if spread is None and earlier.is_file() and (out_dir / "spread_position.png").is_file():
            # No checkpoints to recompute it from: keep the figure and values already written.
            previous = json.loads(earlier.read_text()).get("spread_position")
            if previous is not None:
                summary["spread_position"] = previous
                spread = out_dir / "spread_position.png"
        if spread is not None:
            written["spread"] = spread
    text = markdown(summary)
    if "success" in written:
        text += "\n![seeds solved and reached](probe_success.png)\n"
    if "spread" in written:
        text += "\n![disagreement against position](spread_position.png)\n"
    (out_dir / "probe.md").write_text(text)
    (out_dir / "probe.json").write_text(json.dumps(summary, indent=2) + "\n")
    written["markdown"], written["json"] = out_dir / "probe.md", out_dir / "probe.json"
    return written
