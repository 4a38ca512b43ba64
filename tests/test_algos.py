"""The registry (`mjx_pbac.algos`): every algorithm through the same command, loop, buffer,
evaluation and logs, and each one's sweepable knobs (paper appendix "Baselines")."""

from __future__ import annotations

import dataclasses
import json
import typing

import jax
import jax.numpy as jp
import numpy as np
import pytest

import envs
import train as cli
from envs.base import MjxEnv
from mjx_pbac import algos
from mjx_pbac.algos.base import knob_names, stack_configs
from mjx_pbac.config import RunConfig
from mjx_pbac.policy import load_policy
from tests import conftest
from tests.policy_checks import logged_row, replayed_returns

ALGORITHMS = typing.get_args(typing.get_type_hints(RunConfig)["algo"])


def test_registry_names_every_algorithm_and_its_sweepable_knobs():
    """Every registered name builds an algorithm that initialises and acts; its sweepable fields
    are exactly its config's knobs; an unknown name is refused with the valid ones."""
    assert algos.NAMES == ("pbac", "sac", "bootdqn_p", "drnd", "ben", "td3") == ALGORITHMS
    assert algos.sweepable("sac") == ("gamma", "tau", "critic_lr", "actor_lr", "alpha_lr", "weight_decay")
    assert algos.sweepable("drnd") == (
        "gamma", "tau", "critic_lr", "actor_lr", "alpha_lr", "weight_decay", "predictor_lr", "bonus_scale", "actor_bonus_scale", "sign"
    )
    with pytest.raises(ValueError, match=r"unknown algorithm 'pbca' \(did you mean pbac\?\); valid: pbac, sac, bootdqn_p, drnd, ben, td3"):
        algos.module("pbca")
    for name in algos.NAMES:
        module = algos.module(name)
        assert module is algos.ALGORITHMS[name] and module.__name__ == f"mjx_pbac.algos.{name}"
        assert algos.sweepable(name) == knob_names(module.Config), name
        config = module.Config(hidden_sizes=(4,))
        algorithm = algos.make(name, [config], 3, 2)
        state = jax.jit(algorithm.init)(jax.random.key(0), config)  # jitted: one compile, not op by op
        assert type(state) is module.State and state.config.hidden_sizes == (4,), name
        action = jax.jit(algorithm.eval_act)(state, jp.zeros((5, 3)))
        assert action.shape == (5, 2) and np.all(np.abs(np.asarray(action)) <= 1.0), name


@pytest.mark.parametrize("algo", ALGORITHMS)
@pytest.mark.slow
def test_every_algorithm_trains_on_the_chain_through_the_command(algo, tmp_path, capsys):
    run_dir = tmp_path / algo
    platform = "cpu" if algo == "sac" else "auto"  # both run here; the first line names the device
    cli.main([
        "--profile", "chain", "--algo", algo, "--seeds", "2", "--train.total-steps", "2000",
        "--train.eval-interval", "1000", "--train.run-dir", str(run_dir), "--train.progress", "False",
        "--train.tensorboard", "False", "--train.platform", platform,
    ])
    assert capsys.readouterr().out.splitlines()[0].startswith("device: cpu (cpu) x1, jax ")
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
    # The trained policy back from the run directory acts as the run's evaluation did, to the bit:
    # its final evaluation's episodes, replayed from the host with `act`, return what it logged.
    loaded = load_policy(run_dir, member=1)
    assert (loaded.env_steps, loaded.member.seed, loaded.member.label, loaded.env_name) == (2000, 1, algo, "chain")
    row = logged_row(run_dir, 1, 2000)
    assert replayed_returns(loaded, len(row["returns"])) == row["returns"], algo


def _tiny_widths(algo):
    """Width-8 networks for `algo` (DRND's predictor too), as command-line overrides."""
    flags = [f"--{algo}.hidden-sizes", "8"]
    if algo == "drnd":
        flags += ["--drnd.predictor-hidden-sizes", "8", "8", "--drnd.embedding-size", "4", "--drnd.num-targets", "3"]
    return flags


# Each algorithm on a many-dimensional observation, through the command. PBAC on MJX cartpole
# swing-up (sparse), 5 observations: an MJX env in the loop, through the `_fast` profile at the
# device scripts' dry-run sizes (conftest.DRY_TINY), the very command fast.sh's dry run gives, so
# the two compile one set of programs. The baselines on the deep chain (65 observations, no
# physics): the loop, the replay and the evaluation do not depend on the algorithm, and an MJX
# cartpole program per baseline cost ~80 s to compile each on this CPU (2026-11-30).
MANY_DIMENSIONAL = {
    "cartpole_swingup_sparse": (20, 5, {"cart_position", "pole_angle"}),  # episode length (DRY_TINY's), observations, visit fields
    "deep_chain_10": (100, 65, {"x_position", "goal"}),
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "algo, env", [(algo, "cartpole_swingup_sparse" if algo == "pbac" else "deep_chain_10") for algo in ALGORITHMS if algo != "td3"]
)  # TD3, the example: chain only
def test_every_algorithm_trains_on_a_many_dimensional_env_through_the_command(algo, env, tmp_path, monkeypatch):
    """2 seeds of 2 instances, warm-up then training, and whole greedy evaluation episodes: on the
    deep chain 100 + 100 steps and one 100-step episode; on cartpole fast.sh's dry run (40 + 80
    steps, two 20-step episodes), whose training and evaluation programs share one trace of the
    physics step (`MjxEnv.physics_step`)."""
    traces = []
    physics_step = MjxEnv._physics_step
    monkeypatch.setattr(MjxEnv, "_physics_step", lambda self, *args: traces.append(1) or physics_step(self, *args))
    length, observations, fields = MANY_DIMENSIONAL[env]
    assert envs.make(env).observation_size == observations
    run_dir = tmp_path / algo
    if env == "cartpole_swingup_sparse":
        sizes = ["--profile", "cartpole_swingup_sparse_fast", "--seeds", "2", "--train.tasks", *conftest.DRY_TINY]
        steps, rows, episodes = 120, 2 * 2, 2  # two training chunks of two members
    else:
        sizes = [
            "--profile", "quickstart", "--algo", algo, "--train.env", env, "--train.num-envs", "2", "--train.total-steps", "200",
            "--train.warmup-steps", "100", "--train.chunk-steps", "100", "--train.eval-interval", "200",
            "--train.eval-episodes", "1", "--train.batch-size", "16", "--train.buffer-size", "400", *_tiny_widths(algo),
        ]
        steps, rows, episodes = 200, 1, 1  # one chunk of the quickstart's one member
    cli.main([
        *sizes, "--train.visit-interval", "40", "--train.run-dir", str(run_dir), "--train.progress", "False",
        "--train.tensorboard", "False", "--train.chunk-seconds", "0",  # whole chunks, no one-step probe: a row per chunk
    ])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["final_eval"]["env_steps"] == steps
    evaluation = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()][-1]
    assert evaluation["lengths"] == [length] * episodes and np.isfinite(evaluation["return_mean"])
    if env == "cartpole_swingup_sparse":
        assert 0.0 <= evaluation["return_mean"] <= length  # sparse {0, 1} rewards
        assert len(traces) == 1 and set(summary["compiles"]) >= {"chunk", "evaluate_snapshots"}, (traces, summary["compiles"])
    trained = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = [record for record in trained if record["phase"] == "train"]
    assert len(trained) == rows and all(r["updates_per_s"] > 0 and "critic_loss" in r for r in trained)
    for record in trained:
        for name, value in record.items():
            if isinstance(value, float):
                assert np.isfinite(value), (algo, name)
    visits = [json.loads(line) for line in (run_dir / "visits.jsonl").read_text().splitlines()]
    assert visits and set(visits[0]["state"]) == fields


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_every_algorithm_can_sweep_what_it_declares(algo):
    """Each sweepable field (a knob) is a traced leaf of the member's config in its agent state,
    so two members differing only there share one program; fixed fields cannot differ."""
    config = getattr(RunConfig(), algo)
    sweepable = algos.sweepable(algo)
    assert sweepable and len(jax.tree.leaves(config)) == len(sweepable)
    algorithm = algos.make(algo, [config], 2, 1)
    state = jax.eval_shape(algorithm.init, jax.random.key(0), config)
    assert {path[-1].name for path, _ in jax.tree_util.tree_flatten_with_path(state.config)[0]} == set(sweepable)
    fixed = [f.name for f in dataclasses.fields(config) if f.name not in sweepable]
    assert "hidden_sizes" in fixed
    with pytest.raises(ValueError, match="hidden_sizes differs between members"):
        stack_configs([config, dataclasses.replace(config, hidden_sizes=(7,))])


def test_unknown_algorithm_is_refused(capsys):
    with pytest.raises(SystemExit) as raised:
        cli.main(["--profile", "chain", "--algo", "ppo"])
    err = str(raised.value.code)
    assert "ppo" in err and all(name in err for name in algos.NAMES)
