"""Every algorithm through the same command, loop, buffer, evaluation and logs (SPEC 3)."""

from __future__ import annotations

import json
import typing

import numpy as np
import pytest

import train as cli
from mjx_pbac.config import SWEEPABLE, RunConfig, load_profile

ALGORITHMS = typing.get_args(typing.get_type_hints(RunConfig)["algo"])


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_every_algorithm_trains_on_the_chain_through_the_command(algo, tmp_path):
    run_dir = tmp_path / algo
    cli.main([
        "--profile", "chain", "--algo", algo, "--seeds", "2", "--train.total-steps", "2000",
        "--train.eval-interval", "1000", "--train.run-dir", str(run_dir), "--train.progress", "False",
        "--train.tensorboard", "False",
    ])
    config = json.loads((run_dir / "config.json").read_text())
    assert config["algorithm"] == algo and [m["label"] for m in config["members"]] == [algo, algo]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished"
    trained = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = [record for record in trained if record["phase"] == "train"]
    assert trained, "no training chunk"
    for record in trained:
        for name in ("critic_loss", "actor_loss", "critic_q_mean", "target_mean"):
            assert np.isfinite(record[name]), (algo, name)


def _tiny_widths(algo):
    """Width-8 networks for `algo` (DRND's predictor too), as command-line overrides."""
    flags = [f"--{algo}.hidden-sizes", "8"]
    if algo == "drnd":
        flags += ["--drnd.predictor-hidden-sizes", "8", "8", "--drnd.embedding-size", "4", "--drnd.num-targets", "3"]
    return flags


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALGORITHMS)
def test_every_algorithm_trains_on_an_mjx_env_through_the_command(algo, tmp_path):
    """MJX cartpole swing-up (sparse), 2 instances, 100 warm-up + 100 training steps, then a full
    1000-step greedy evaluation episode. Cartpole is the cheapest MJX program to compile (two
    joints, no contacts), which dominates this test on a CPU."""
    run_dir = tmp_path / algo
    cli.main([
        "--profile", "quickstart", "--algo", algo, "--train.env", "cartpole_swingup_sparse",
        "--train.num-envs", "2", "--train.total-steps", "200", "--train.visit-interval", "100",
        "--train.warmup-steps", "100", "--train.chunk-steps", "100", "--train.eval-interval", "200",
        "--train.eval-episodes", "1", "--train.batch-size", "16", "--train.buffer-size", "400",
        "--train.run-dir", str(run_dir), "--train.progress", "False", "--train.tensorboard", "False",
        *_tiny_widths(algo),
    ])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["final_eval"]["env_steps"] == 200
    evaluation = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()][-1]
    assert evaluation["lengths"] == [1000] and 0.0 <= evaluation["return_mean"] <= 1000.0  # sparse {0, 1} rewards
    trained = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = [record for record in trained if record["phase"] == "train"]
    assert len(trained) == 1 and trained[0]["updates_per_s"] > 0 and "critic_loss" in trained[0]
    for name, value in trained[0].items():
        if isinstance(value, float):
            assert np.isfinite(value), (algo, name)
    visits = [json.loads(line) for line in (run_dir / "visits.jsonl").read_text().splitlines()]
    assert visits and set(visits[0]["state"]) == {"cart_position", "pole_angle"}


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_every_algorithm_can_sweep_what_it_declares(algo):
    """Each declared sweepable field is a traced hyperparameter of that algorithm (or its PSR)."""
    from mjx_pbac.algorithms import make

    config = getattr(RunConfig(), algo)
    algorithm = make(algo, config, 2, 1)
    traced = set(type(algorithm.hyperparams(config)).__dataclass_fields__)
    assert set(SWEEPABLE[algo]) - {"posterior_sampling_rate"} <= traced, algo


def test_paper_profiles_carry_bootdqn_p_hyperparameters():
    """Paper appendix table of BootDQN-P (BR, PSR, PS); changes from the defaults in bold there."""
    table = {
        "ant": (0.05, 5, 5.0), "hopper": (0.05, 5, 5.0), "humanoid": (0.1, 1, 5.0),
        "ant_delayed": (0.1, 1, 1.0), "ant_very_delayed": (0.05, 5, 5.0), "hopper_delayed": (0.05, 5, 5.0),
        "hopper_very_delayed": (0.05, 5, 5.0), "humanoid_delayed": (0.1, 1, 9.0),
        "cartpole_swingup_sparse": (0.05, 10, 1.0), "ball_in_cup_catch": (0.05, 5, 5.0), "reacher_hard": (0.05, 1, 1.0),
    }
    for name, expected in table.items():
        boot = load_profile(name).bootdqn_p
        assert (boot.bootstrap_rate, boot.posterior_sampling_rate, boot.prior_scale) == expected, name
        assert (boot.num_critics, boot.hidden_sizes) == (10, (256, 256))
        assert load_profile(name).sac.num_critics == 2


def test_unknown_algorithm_is_refused(capsys):
    with pytest.raises(SystemExit) as raised:
        cli.main(["--profile", "chain", "--algo", "ppo"])
    err = str(raised.value.code)
    assert "ppo" in err and all(name in err for name in ("pbac", "sac", "bootdqn_p", "drnd", "ben"))
