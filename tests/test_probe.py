"""The probe command (`train.py probe`): lengths x seeds as members of one program per variant,
goal visits recorded exactly, the report's counts from the runs, resume and its errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

import train as cli
from mjx_pbac.probe import VARIANTS, summarize


def _probe(out, *extra):
    return [
        "probe", "--out", str(out), "--lengths", "4,6", "--seeds", "2",
        "--train.total-steps", "600", "--train.warmup-steps", "200", "--train.chunk-steps", "200",
        "--train.eval-interval", "600", "--train.checkpoint-interval", "600", "--train.visit-interval", "1",
        "--train.progress", "False", "--train.tensorboard", "False", *extra,
    ]


@pytest.mark.slow
def test_probe_runs_variants_records_first_visits_and_reports(tmp_path, capsys):
    out = tmp_path / "probe"
    cli.main(_probe(out, "--algos", "pbac_prior,bootdqn_p"))
    printed = capsys.readouterr().out
    assert "# Deep-exploration probe" in printed and "| pbac_prior |" in printed
    summary = json.loads((out / "probe.json").read_text())
    assert summary["lengths"] == [4, 6] and summary["seeds"] == 2
    assert set(summary["variants"]) == {"pbac_prior", "bootdqn_p"}
    assert all(v["status"] == "finished" for v in summary["variants"].values())
    # Known answers of the env, per length.
    assert summary["known"]["4"]["steps_to_goal"] == 3 and summary["known"]["6"]["constant_reach"] == 0.0
    assert summary["known"]["4"]["committed_random_reach"] == pytest.approx(2.0**-3)

    for variant in ("pbac_prior", "bootdqn_p"):
        run = out / "runs" / variant
        config = json.loads((run / "config.json").read_text())
        assert [m["task"] for m in config["members"]] == ["deep_chain_4"] * 2 + ["deep_chain_6"] * 2
        if variant == "pbac_prior":
            assert config["config"]["pbac"]["prior_scale"] == 5.0 and config["config"]["pbac"]["actor"] == "deterministic"
            assert config["config"]["pbac"]["posterior_sampling_rate"] == 100
        # The first goal visit in metrics.jsonl is the first step whose recorded state (every
        # step here: visit interval 1) is in the goal.
        metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        visits = [json.loads(line) for line in (run / "visits.jsonl").read_text().splitlines()]
        for member in range(4):
            from_visits = next((v["env_steps"] for v in visits if v["member"] == member and v["state"]["goal"] > 0), None)
            from_metrics = next((m["first_goal_step"] for m in metrics if m["member"] == member and "first_goal_step" in m), None)
            assert from_visits == from_metrics
            steps_in_goal = sum(v["state"]["goal"] > 0 for v in visits if v["member"] == member)
            assert steps_in_goal == sum(m["goal_steps"] for m in metrics if m["member"] == member)
        # The disagreement metrics are logged per training chunk.
        train_chunks = [m for m in metrics if m["phase"] == "train"]
        assert train_chunks and all(0.0 <= m["critic_vote_spread"] <= 1.0 and m["critic_gap_spread"] >= 0 for m in train_chunks)
        rows = [r for r in summary["rows"] if r["variant"] == variant]
        for row in rows:
            task = f"deep_chain_{row['length']}"
            members = [m["index"] for m in config["members"] if m["task"] == task]
            reached = {m["member"] for m in metrics if "first_goal_step" in m and m["member"] in members}
            assert row["reached"] == len(reached) and row["seeds"] == 2
            late = {m["member"] for m in metrics if m.get("goal_steps", 0) > 0 and m["env_steps"] > 450 and m["member"] in members}
            assert row["late"] == len(late)
            threshold = summary["known"][str(row["length"])]["solved_threshold"]
            assert row["solved"] == sum(r > threshold for r in row["final_returns"])
    assert (out / "probe_success.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # a PNG, not just bytes
    spread = summary["spread_position"]
    assert spread["length"] == 6 and len(spread["x"]) == 7
    assert set(spread["variants"]) == {"pbac_prior", "bootdqn_p"}
    assert all(len(v) == 7 for v in spread["variants"]["bootdqn_p"].values())

    # Again: both variants are skipped; `report` rewrites the same summary.
    cli.main(_probe(out, "--algos", "pbac_prior,bootdqn_p"))
    assert capsys.readouterr().err.count("finished earlier, skipped") == 2
    (out / "probe.md").unlink()
    cli.main(["report", str(out)])
    assert (out / "probe.md").is_file()
    assert json.loads((out / "probe.json").read_text())["rows"] == summary["rows"]
    with pytest.raises(SystemExit, match="holds a probe with lengths"):
        cli.main(_probe(out, "--algos", "sac", "--lengths", "4,8"))


@pytest.mark.parametrize(
    "args, message",
    [
        (["probe", "--algos", "pbac,ppo"], "unknown probe variant.s. pbac, ppo; valid: all, pbac_soft"),
        (["probe", "--lengths", "10,x"], "--lengths takes comma-separated integers"),
        (["probe", "--lengths", "1"], "--lengths must be integers >= 2"),
        (["probe", "--algo", "sac"], "probe chooses the algorithm, env and tasks"),
        (["probe", "--tasks", "chain"], "probe chooses the algorithm, env and tasks"),
        (["probe", "--profile", "nope"], "unknown profile 'nope'"),
        (["probe", "--profile", "chain", "--algos", "sac"], "profile 'chain' trains env 'chain', not a deep chain"),
    ],
)
def test_probe_errors_name_what_is_wrong(args, message):
    with pytest.raises(SystemExit, match=message):
        cli.main(args)


def test_summary_counts_and_largest_length(tmp_path):
    """summarize() on hand-written run files: reached = members with a first visit, solved =
    final return above the threshold, largest length where >= 8/10 of the seeds did."""
    run = tmp_path / "run"
    run.mkdir()
    members = [{"index": i, "seed": i % 10, "task": f"deep_chain_{10 if i < 10 else 20}", "label": "x"} for i in range(20)]
    (run / "config.json").write_text(json.dumps({"members": members}))
    metrics, evals = [], []
    for m in members:
        i = m["index"]
        entry = {"member": i, "phase": "train", "env_steps": 1000, "critic_gap_spread": float(i), "goal_steps": 5 if i < 3 else 0}
        if i < 9 or i in (10, 11):  # L=10: 9 of 10 reach; L=20: 2 of 10
            entry["first_goal_step"] = 100 * (i + 1)
        metrics.append(entry)
        evals.append({"member": i, "env_steps": 1000, "return_mean": 90.0 if i < 8 else 5.0})
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(e) for e in metrics) + "\n")
    (run / "eval.jsonl").write_text("\n".join(json.dumps(e) for e in evals) + "\n")
    known = {"10": {"solved_threshold": 50.0}, "20": {"solved_threshold": 40.0}}
    summary = summarize({"lengths": [10, 20], "known": known, "runs": {"x": str(run)}, "status": {"x": "finished"}})
    rows = {r["length"]: r for r in summary["rows"]}
    assert (rows[10]["reached"], rows[10]["solved"], rows[20]["reached"], rows[20]["solved"]) == (9, 8, 2, 0)
    assert (rows[10]["late"], rows[20]["late"]) == (3, 0)  # in the goal during the last quarter
    assert rows[10]["first_visit_min"] == 100 and rows[10]["first_visit_max"] == 900
    assert rows[10]["critic_gap_spread"] == pytest.approx(np.mean(range(10)))
    assert summary["variants"]["x"]["largest_solved"] == 10 and summary["variants"]["x"]["largest_reached"] == 10


def test_variants_name_their_algorithms():
    """The probe covers PBAC and every paper baseline; TD3 (the example of adding an algorithm,
    not a paper baseline) is not one of its variants."""
    from mjx_pbac import algos

    assert {v.algo for v in VARIANTS.values()} == set(algos.NAMES) - {"td3"}
