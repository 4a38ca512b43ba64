"""The table command (`mjx_pbac.table`): it plans one program per robot and DM Control task of the
paper's Table 1, runs each algorithm, resumes, refuses a changed command, records a diverged run and
goes on, stops at an interrupted or failed one with its exit code, and names bad input."""

from __future__ import annotations

import dataclasses
import json

import pytest

import train as cli
from mjx_pbac.config import expand_members, load_profile


def _chain_table(out, *extra):
    return [
        "table", "--tasks", "chain", "--out", str(out), "--train.total-steps", "400", "--train.warmup-steps", "200",
        "--train.chunk-steps", "200", "--train.eval-interval", "400", "--train.eval-episodes", "1",
        "--train.checkpoint-interval", "200", "--train.progress", "False", "--train.tensorboard", "False", *extra,
    ]


@pytest.mark.slow
def test_table_runs_each_algorithm_resumes_and_refuses_a_changed_command(tmp_path, capsys):
    out = tmp_path / "table"
    cli.main(_chain_table(out, "--algos", "pbac,sac", "--seeds", "2"))
    plan = json.loads((out / "table.json").read_text())
    assert [(r["algorithm"], r["tasks"], r["status"]) for r in plan["runs"]] == [
        ("pbac", ["chain"], "finished"), ("sac", ["chain"], "finished")
    ]
    table = (out / "report" / "results.md").read_text()
    assert table.count("| chain | **") == 2 and "| Task | pbac | sac |" in table
    assert {path.name for path in (out / "report").glob("*.png")} == {"curves_chain.png", "curves_wall_chain.png"}
    # A crash before the first checkpoint: the run starts again in place, its logs set aside.
    crashed = out / "runs" / "sac_chain"
    (crashed / "checkpoints").rename(tmp_path / "moved")
    (crashed / "summary.json").write_text('{"status": "failed"}')
    capsys.readouterr()
    cli.main(_chain_table(out, "--algos", "pbac,sac", "--seeds", "2"))
    err = capsys.readouterr().err
    assert "pbac on chain: finished earlier, skipped" in err and "starting" in err and "again from step 0" in err
    assert (crashed / "attempts" / "1" / "metrics.jsonl").is_file()
    assert json.loads((crashed / "summary.json").read_text())["status"] == "finished"
    assert json.loads((out / "table.json").read_text())["runs"][1]["status"] == "finished"
    # A directory without a readable config.json is set aside, not lost.
    (crashed / "config.json").write_text("{")
    cli.main(_chain_table(out, "--algos", "pbac,sac", "--seeds", "2"))
    assert "set aside as sac_chain.incomplete-" in capsys.readouterr().err
    assert len(list((out / "runs").glob("sac_chain.incomplete-*"))) == 1
    from mjx_pbac import runner

    with pytest.raises(runner.RunError, match=r"exists but it was started with other settings: train.num_seeds"):
        cli.main(_chain_table(out, "--algos", "pbac", "--seeds", "3"))


@pytest.mark.parametrize(
    "args, message",
    [
        (["table", "--algos", "pbac"], "give one of --block"),
        (["table", "--block", "dmc", "--tasks", "chain"], "give one of --block"),
        (["table", "--block", "atari"], "unknown block 'atari'; valid: dmc, dense, delayed, mujoco, table1, metaworld, table2"),
        (["table", "--tasks", "chain", "--algos", "pbac,ppo"], "unknown algorithm.s. ppo; valid: pbac, sac"),
        (["table", "--tasks", "chain", "--algo", "sac"], "table chooses the profile, algorithm and tasks"),
        (["table", "--tasks", "nope"], "unknown profile 'nope'"),
    ],
)
def test_table_errors_name_what_is_wrong(args, message):
    with pytest.raises(SystemExit, match=message):
        cli.main(args)


@pytest.mark.slow
def test_table1_plans_one_program_per_robot_and_dm_control_task():
    """The paper's Table 1 for two algorithms: the 8 MuJoCo tasks in 3 programs per algorithm
    (one per robot, each task with its own profile's per-task values), the 3 DM Control tasks in
    a program each."""
    from mjx_pbac.table import BLOCKS, plan

    configs = {}
    for algo in ("pbac", "bootdqn_p"):
        for task in BLOCKS["table1"]:
            config = load_profile(task)
            configs[(algo, task)] = dataclasses.replace(config, algo=algo)
    programs = plan(configs)
    assert [(p.algo, p.tasks) for p in programs if p.algo == "pbac"] == [
        ("pbac", ("ball_in_cup_catch",)), ("pbac", ("cartpole_swingup_sparse",)), ("pbac", ("reacher_hard",)),
        ("pbac", ("ant", "ant_delayed", "ant_very_delayed")), ("pbac", ("hopper", "hopper_delayed", "hopper_very_delayed")),
        ("pbac", ("humanoid", "humanoid_delayed")),
    ]
    ant = next(p for p in programs if p.algo == "bootdqn_p" and p.tasks[0] == "ant")
    members = {m.task: m.config for m in expand_members(ant.config)}
    # BootDQN-P's per-task values (paper Table 9): ant 0.05 / 5 / 5.0, ant_delayed 0.1 / 1 / 1.0.
    assert (members["ant"].bootstrap_rate, members["ant"].posterior_sampling_rate, members["ant"].prior_scale) == (0.05, 5, 5.0)
    assert (members["ant_delayed"].bootstrap_rate, members["ant_delayed"].posterior_sampling_rate,
            members["ant_delayed"].prior_scale) == (0.1, 1, 1.0)
    assert len(plan(configs, group_tasks=False)) == 22


@pytest.mark.slow
def test_table_records_a_diverged_run_and_goes_on(tmp_path, monkeypatch, capsys):
    from mjx_pbac import runner

    real_train = runner.train

    def diverging_pbac(config, profile="custom", resume_dir=None, changes=None):
        if config is not None and config.algo == "pbac":
            raise runner.TrainingDiverged("training diverged (planted)")
        return real_train(config, profile=profile, resume_dir=resume_dir, changes=changes)

    monkeypatch.setattr(runner, "train", diverging_pbac)
    out = tmp_path / "table"
    cli.main(_chain_table(out, "--algos", "pbac,sac", "--seeds", "1"))
    runs = json.loads((out / "table.json").read_text())["runs"]
    assert [(r["algorithm"], r["status"]) for r in runs] == [("pbac", "diverged"), ("sac", "finished")]
    assert "pbac on chain diverged, going on with the next run" in capsys.readouterr().err
    assert (out / "report" / "results.md").is_file()


def test_an_interrupted_or_failed_run_stops_the_table_with_its_exit_code(tmp_path, monkeypatch, capsys):
    from mjx_pbac import runner

    def stopped(config, profile="custom", resume_dir=None, changes=None):
        raise runner.RunInterrupted("interrupted by SIGTERM at 1,000 env steps (planted)")

    monkeypatch.setattr(runner, "train", stopped)
    out = tmp_path / "table"
    assert cli.run(_chain_table(out, "--algos", "pbac,sac", "--seeds", "1")) == 75
    runs = json.loads((out / "table.json").read_text())["runs"]
    assert [(r["algorithm"], r["status"]) for r in runs] == [("pbac", "interrupted"), ("sac", "planned")]
    err = capsys.readouterr().err
    assert "pbac on chain interrupted; run the same command again to continue" in err
    assert "stopped: interrupted by SIGTERM" in err

    def failed(config, profile="custom", resume_dir=None, changes=None):
        raise runner.RunFailed("run failed after 0 env steps: MemoryError (planted)")

    monkeypatch.setattr(runner, "train", failed)
    assert cli.run(_chain_table(out, "--algos", "pbac,sac", "--seeds", "1")) == 1
    assert json.loads((out / "table.json").read_text())["runs"][0]["status"] == "failed"
    (tmp_path / "file").write_text("x")
    assert cli.run(_chain_table(tmp_path / "file" / "t", "--algos", "pbac")) == 2
    assert "cannot create the output directory" in capsys.readouterr().err


def test_a_table_run_started_before_an_option_existed_or_on_another_platform_is_the_same_run(tmp_path):
    from mjx_pbac import table
    from mjx_pbac.config import config_to_dict

    config = dataclasses.replace(load_profile("chain"), train=dataclasses.replace(load_profile("chain").train, num_seeds=2))
    record = json.loads(json.dumps(config_to_dict(config)))
    del record["train"]["platform"]  # as config.json was written before --train.platform existed
    (tmp_path / "config.json").write_text(json.dumps({"config": record, "profile": "chain"}))
    assert table._same_run(tmp_path, config) is None
    assert table._same_run(tmp_path, dataclasses.replace(config, train=dataclasses.replace(config.train, platform="cpu"))) is None
    longer = dataclasses.replace(config, train=dataclasses.replace(config.train, total_steps=40_000))
    assert table._same_run(tmp_path, longer) == "it was started with other settings: train.total_steps"
