"""Tasks that share a robot as members of one program: each member gets its own task's rewards,
its own profile's per-task settings, and the report one row per task. The table command that
plans such programs is tested in test_table.py."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jp
import numpy as np
import pytest

import envs
import train as cli
from envs import registry
from envs.locomotion import Hopper
from envs.tools.gymnasium_fidelity import gym_rollout, to_mjx
from mjx_pbac.config import expand_members, load_profile, merge_task_configs

HOPPERS = ["hopper", "hopper_delayed", "hopper_very_delayed"]


@pytest.mark.slow
def test_tasks_of_one_robot_as_members_get_each_its_own_reward_and_termination():
    """One env with the three Hopper tasks' constants stacked on a member axis (as the trainer
    traces them) against each task's own env, on Gymnasium's transitions: the same rewards (to
    float32 rounding) and terminations."""
    env, params = envs.make_family(HOPPERS)
    stacked = jax.tree.map(lambda *leaves: jp.stack(leaves), *params)
    transitions = gym_rollout("hopper", 60, seed=3)
    prev = jax.tree.map(lambda *x: jp.stack(x), *[to_mjx(env, t.prev_data) for t in transitions])
    cur = jax.tree.map(lambda *x: jp.stack(x), *[to_mjx(env, t.data) for t in transitions])
    action = jp.asarray(np.stack([t.action for t in transitions]), jp.float32)

    @jax.jit
    def as_members(task):
        member_env = env.with_task(task)
        return jax.vmap(member_env.reward)(prev, cur, action), jax.vmap(member_env.terminated)(cur)

    rewards, terminated = jax.vmap(as_members)(stacked)
    assert any(t.terminated for t in transitions)
    for i, name in enumerate(HOPPERS):
        own = envs.make(name)
        own_rewards = jax.jit(jax.vmap(own.reward))(prev, cur, action)
        # Equal to float32 rounding: with the constants traced, XLA fuses the products differently.
        np.testing.assert_allclose(np.asarray(rewards[i]), np.asarray(own_rewards), rtol=1e-6, atol=1e-7, err_msg=name)
        np.testing.assert_array_equal(np.asarray(terminated[i]), np.asarray(jax.vmap(own.terminated)(cur)))
    # The tasks do differ on these transitions (dense vs delayed, c = 0 vs c = 1).
    assert not np.allclose(rewards[0], rewards[1]) and not np.allclose(rewards[1], rewards[2])


def test_make_family_refuses_tasks_that_cannot_share_a_program(monkeypatch):
    with pytest.raises(ValueError, match=r"different envs .*ReacherHard"):
        envs.make_family(["cartpole_swingup_sparse", "reacher_hard"])
    monkeypatch.setitem(registry._REGISTRY, "hopper_short", registry.EnvSpec(Hopper, {"episode_length": 200}, "test"))
    with pytest.raises(ValueError, match="differ in episode_length, which is not a per-member task constant"):
        envs.make_family(["hopper", "hopper_short"])
    _, params = envs.make_family(["chain"])
    assert params == [None]  # no task constants: the chain's members carry none


def test_members_of_several_tasks_take_their_task_overrides():
    base = load_profile("ant")
    config = dataclasses.replace(
        base, train=dataclasses.replace(base.train, tasks=("ant_very_delayed",), num_seeds=2,
                                        task_overrides=("ant_very_delayed:prior_variance=5.0",))
    )
    members = expand_members(config)
    assert [(m.task, m.seed, m.config.prior_variance) for m in members] == [
        ("ant", 0, 1.0), ("ant", 1, 1.0), ("ant_very_delayed", 0, 5.0), ("ant_very_delayed", 1, 5.0)
    ]
    assert {m.label for m in members} == {"pbac"}  # one method, two tasks: one column, two rows
    assert members[2].overrides == {"pbac.prior_variance": 5.0}


def test_task_profiles_give_the_per_task_values_and_refuse_what_members_cannot_share():
    base = load_profile("hopper")
    tasks = dataclasses.replace(base, train=dataclasses.replace(base.train, tasks=("hopper_delayed", "hopper_very_delayed")))
    merged = merge_task_configs(tasks, {t: load_profile(t) for t in ("hopper_delayed", "hopper_very_delayed")})
    # The paper's hopper uses kappa 0.01, the delayed hoppers 0.05 (paper Table 5).
    assert merged.train.task_overrides == ("hopper_delayed:bootstrap_rate=0.05", "hopper_very_delayed:bootstrap_rate=0.05")
    wider = load_profile("hopper_delayed")
    wider = dataclasses.replace(wider, pbac=dataclasses.replace(wider.pbac, hidden_sizes=(64, 64)))
    with pytest.raises(ValueError, match=r"pbac.hidden_sizes \(\(64, 64\) vs \(256, 256\)\)"):
        merge_task_configs(tasks, {"hopper_delayed": wider})
    longer = load_profile("hopper_delayed")
    longer = dataclasses.replace(longer, train=dataclasses.replace(longer.train, total_steps=200_000))
    with pytest.raises(ValueError, match=r"train.total_steps"):
        merge_task_configs(tasks, {"hopper_delayed": longer})


def test_cli_tasks_errors_name_what_is_wrong(tmp_path, capsys):
    with pytest.raises(SystemExit, match="different envs"):
        cli.main(["--profile", "ant", "--tasks", "hopper", "--train.run-dir", str(tmp_path / "x")])
    with pytest.raises(SystemExit, match=r"malformed task override 'prior_variance=5.0'"):
        cli.main(["--profile", "ant", "--train.task-overrides", "prior_variance=5.0", "--train.run-dir", str(tmp_path / "y")])
    with pytest.raises(SystemExit, match="cannot sweep 'num_critics'"):
        cli.main(["--profile", "ant", "--tasks", "ant_delayed", "--train.task-overrides", "ant_delayed:num_critics=3",
                  "--train.run-dir", str(tmp_path / "z")])
    assert not (tmp_path / "x").exists() and not (tmp_path / "z").exists()


@pytest.mark.slow
def test_three_tasks_two_seeds_in_one_program_report_per_task(tmp_path):
    """The table command on the three Hopper tasks at tiny sizes: one program of 3 tasks x 2
    seeds, its config naming each member's task and per-task setting, and a report with one row
    per task; running the command again skips the finished run."""
    out = tmp_path / "table"
    args = [
        "table", "--tasks", ",".join(HOPPERS), "--algos", "pbac", "--seeds", "2", "--out", str(out),
        "--train.total-steps", "64", "--train.warmup-steps", "32", "--train.chunk-steps", "32",
        "--train.num-envs", "2", "--train.eval-interval", "64", "--train.eval-episodes", "1",
        "--train.checkpoint-interval", "64", "--train.batch-size", "8", "--train.updates-per-step", "1",
        "--train.buffer-size", "64", "--train.progress", "False", "--train.tensorboard", "False",
        "--pbac.num-critics", "2", "--pbac.hidden-sizes", "8",
    ]
    cli.main(args)
    plan = json.loads((out / "table.json").read_text())
    assert [run["tasks"] for run in plan["runs"]] == [HOPPERS] and plan["runs"][0]["status"] == "finished"
    record = json.loads((out / "runs" / f"pbac_{'+'.join(HOPPERS)}" / "config.json").read_text())
    assert [(m["task"], m["seed"]) for m in record["members"]] == [(t, s) for t in HOPPERS for s in (0, 1)]
    assert record["config"]["train"]["task_overrides"] == [
        "hopper_delayed:bootstrap_rate=0.05", "hopper_very_delayed:bootstrap_rate=0.05"
    ]
    table = (out / "report" / "results.md").read_text()
    for task in HOPPERS:
        # a row in each table: final and AULC, ours and the paper's, and time to score at 0.9 and 1.0
        assert table.count(f"| {task} |") == 6, table
    cli.main(args)  # again: nothing to do
    assert json.loads((out / "table.json").read_text())["runs"][0]["status"] == "finished"
