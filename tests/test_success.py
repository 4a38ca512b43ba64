"""Success of envs whose reward is their success at each step (Meta-World, `reports_success`): an
episode succeeded iff its return is > 0, the loop counts the training episodes that succeeded, and
the runner logs each member's evaluation success rate (eval.jsonl, TensorBoard, summary.json)
beside the returns; envs that do not report success log none. Also the Meta-World profiles (paper
Table 2) and the metaworld table block."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest

import envs
from mjx_pbac import records, runner
from mjx_pbac.algos import pbac
from mjx_pbac.config import RunConfig, TrainConfig, expand_members, load_profile
from mjx_pbac.loop import make_trainer, member_inputs
from tests.probe_envs import CoinEnv, CountingEnv

SMALL = pbac.Config(num_critics=3, hidden_sizes=(8,))
SUCCESS_RETURN = 4.0  # CoinEnv: reward 1 at steps 2..5 of a 5-step episode that drew heads


def test_success_rate_is_the_fraction_of_episodes_with_positive_return():
    returns = np.array([[0.0, 3.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [500.0, 1.0, 2.0, 1.0]])
    # Member 0: episodes 1 and 3 succeeded (2 of 4), whatever their returns (3 and 1): 0.5.
    np.testing.assert_array_equal(records.success_rates(returns), [0.5, 0.0, 1.0])


def _coin_train(**overrides) -> TrainConfig:
    settings = dict(
        env="probe", total_steps=40, num_envs=2, batch_size=4, updates_per_step=1, buffer_size=64,
        warmup_steps=20, chunk_steps=20, eval_interval=20, eval_episodes=16, checkpoint_interval=20,
    )
    return TrainConfig(**{**settings, **overrides})


def test_evaluation_and_training_episodes_of_a_success_env():
    env = CoinEnv()
    train = _coin_train()
    trainer = make_trainer(train, env, pbac.make(SMALL, env.observation_size, env.action_size))
    state = trainer.init(*member_inputs([(0, SMALL), (1, SMALL)]))
    returns = np.asarray(jax.device_get(trainer.evaluate(state)["returns"]))  # [2, 16]
    assert returns.shape == (2, 16)
    assert set(np.unique(returns)) <= {0.0, SUCCESS_RETURN}
    success = records.success_rates(returns)
    # The success rate counts episodes, not rewarded steps: mean return = 4 x success rate.
    np.testing.assert_allclose(returns.mean(axis=1), SUCCESS_RETURN * success)
    np.testing.assert_array_equal(success, (returns == SUCCESS_RETURN).mean(axis=1))
    assert np.all((success > 0) & (success < 1))  # 16 fair coins per member: a real fraction
    # Training: 10 vector steps of 2 instances, 5-step episodes -> 4 episodes per member, each
    # returning 4 if it succeeded: return_sum = 4 x success_sum.
    state, metrics = trainer.warmup_chunk(state)
    metrics = jax.device_get(metrics)
    np.testing.assert_array_equal(metrics["episodes"], [4, 4])
    np.testing.assert_allclose(metrics["return_sum"], SUCCESS_RETURN * metrics["success_sum"])
    assert metrics["success_sum"].dtype == np.int32


def test_envs_that_do_not_report_success_count_none():
    env = CountingEnv()
    assert not getattr(env, "reports_success", False)
    trainer = make_trainer(_coin_train(), env, pbac.make(SMALL, env.observation_size, env.action_size))
    _, metrics = trainer.warmup_chunk(trainer.init(*member_inputs([(0, SMALL)])))
    assert "success_sum" not in metrics and "return_sum" in metrics


def _fake_family(env):
    def make_family(names, **overrides):
        return env, [None] * len(names)

    return make_family


@pytest.mark.parametrize("probe", [CoinEnv, CountingEnv])
def test_runner_logs_the_success_rate_of_each_evaluation(tmp_path, monkeypatch, probe):
    monkeypatch.setattr(envs, "make_family", _fake_family(probe()))
    # chunk_seconds 0: whole chunks, no one-step probe, so each metrics row is a 20-step chunk's
    train = _coin_train(num_seeds=2, run_dir=str(tmp_path / "run"), progress=False, total_steps=60, chunk_seconds=0.0)
    run_dir = runner.train(RunConfig(train=train, pbac=SMALL))
    evaluations = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
    assert [e["env_steps"] for e in evaluations] == [0, 0, 20, 20, 40, 40, 60, 60]
    chunks = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((run_dir / "summary.json").read_text())["final_eval"]
    from tests.test_runner import _tensorboard_scalars

    tags = set()
    for member_dir in (run_dir / "tb").iterdir():
        tags |= set(_tensorboard_scalars(member_dir))
    if probe is CountingEnv:  # no success reported: nothing logged about it
        assert not any("success_rate" in e for e in evaluations)
        assert not any("episode_success" in c for c in chunks)
        assert "success_rate" not in summary and "success_rate" not in summary["per_member"][0]
        assert "eval/success_rate" not in tags
        return
    for e in evaluations:
        returns = np.array(e["returns"])
        assert e["success_rate"] == np.mean(returns > 0)
        assert e["return_mean"] == pytest.approx(SUCCESS_RETURN * e["success_rate"])
    assert any(0 < e["success_rate"] < 1 for e in evaluations)
    for c in chunks:  # 4 training episodes per member per chunk, each returning 0 or 4
        assert c["episodes"] == 4
        assert c["episode_success"] == pytest.approx(c["episode_return"] / SUCCESS_RETURN)
    final = [e for e in evaluations if e["env_steps"] == 60]
    assert summary["success_rate"] == pytest.approx(np.mean([e["success_rate"] for e in final]))
    assert [m["success_rate"] for m in summary["per_member"]] == [e["success_rate"] for e in final]
    assert {"eval/success_rate", "train/episode_success"} <= tags


# -- Meta-World profiles and block (paper Table 2) -------------------------------------------

METAWORLD = {  # profile: PBAC (kappa, PSR, sigma0^2), paper "Hyperparameters specific to PBAC" / SPEC 2.5
    "mw_window_close": (0.01, 10, 5.0),
    "mw_window_open": (0.05, 10, 1.0),
    "mw_drawer_close": (0.05, 10, 1.0),
    "mw_drawer_open": (0.05, 10, 1.0),
    "mw_reach": (0.01, 10, 1.0),
    "mw_button_press_topdown": (0.05, 10, 1.0),
    "mw_door_open": (0.05, 10, 1.0),
}


@pytest.mark.parametrize("name", sorted(METAWORLD))
def test_metaworld_profiles_carry_the_papers_values(name):
    config = load_profile(name)
    t, p, boot = config.train, config.pbac, config.bootdqn_p
    assert t.env == name
    # Paper appendix "Meta-World": 1,000,000 env steps; shared settings (paper Table 7, SPEC 2.5).
    assert (t.total_steps, t.num_envs, t.batch_size, t.updates_per_step, t.buffer_size) == (1_000_000, 1, 256, 5, 100_000)
    assert (t.warmup_steps, t.eval_interval, t.eval_episodes) == (10_000, 20_000, 10)
    assert (p.bootstrap_rate, p.posterior_sampling_rate, p.prior_variance) == METAWORLD[name]
    assert (p.num_critics, p.hidden_sizes, p.gamma, p.tau, p.critic_lr) == (10, (256, 256), 0.99, 0.005, 3e-4)
    # Paper "Hyperparameters specific to BootDQN-P": 0.05 / 5 / 5.0 on every Meta-World task.
    assert (boot.bootstrap_rate, boot.posterior_sampling_rate, boot.prior_scale) == (0.05, 5, 5.0)
    assert config.sac.num_critics == 2


def _metaworld_registered() -> str | None:
    """None when the Meta-World envs are registered, else why not."""
    try:
        envs.make("mw_drawer_open")
    except Exception as error:  # noqa: BLE001 - not registered yet, or its dependencies missing
        return f"envs.make('mw_drawer_open') fails: {type(error).__name__}: {error}"
    return None


def test_metaworld_block_plans_one_program_per_task():
    reason = _metaworld_registered()
    if reason:
        pytest.skip(reason)
    from mjx_pbac.table import BLOCKS, plan

    assert BLOCKS["table2"] == BLOCKS["metaworld"] == tuple(METAWORLD)
    configs = {("pbac", task): load_profile(task) for task in BLOCKS["metaworld"]}
    programs = plan(configs)
    assert [p.tasks for p in programs] == [(task,) for task in METAWORLD]
    for task in METAWORLD:
        env = envs.make(task)
        assert getattr(env, "reports_success", False), task
        assert (env.observation_size, env.action_size, env.episode_length) == (39, 4, 500)


def test_metaworld_profiles_expand_to_members():
    """Each profile trains on its own task with 5 seeds (paper: five seeds)."""
    for name in METAWORLD:
        config = load_profile(name)
        config = dataclasses.replace(config, train=dataclasses.replace(config.train, num_seeds=5))
        members = expand_members(config)
        assert [m.seed for m in members] == [0, 1, 2, 3, 4] and {m.task for m in members} == {name}
