"""Seeds and sweep points as a vmapped member axis: independence, equivalence with a run alone,
per-member hyperparameters, the command line, and a report from a real run."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest

import train as cli
from mjx_pbac.build import build
from mjx_pbac.config import expand_members, load_profile
from mjx_pbac.loop import non_finite_metrics

CHAIN = load_profile("chain")


def _config(seed=0, num_seeds=1, sweep=(), chunk_steps=100, **train):
    settings = dict(seed=seed, num_seeds=num_seeds, sweep=tuple(sweep), chunk_steps=chunk_steps, total_steps=3000, warmup_steps=1000)
    return dataclasses.replace(CHAIN, train=dataclasses.replace(CHAIN.train, **{**settings, **train}))


def _trained(config, train_chunks=1):
    """The state after 10 warm-up chunks (1,000 steps) and `train_chunks` chunks of 100 updates."""
    built = build(config)
    state = built.init_state()
    for _ in range(10):
        state, _ = built.trainer.warmup_chunk(state)
    for _ in range(train_chunks):
        state, _ = built.trainer.train_chunk(state)
    return jax.device_get(state)


def _member(tree, index):
    def plain(leaf):
        return jax.random.key_data(leaf) if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key) else leaf

    return [np.asarray(leaf)[index] for leaf in jax.tree.leaves(jax.tree.map(plain, tree))]


def _max_difference(a, b):
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def three_seeds():
    return _trained(_config(seed=0, num_seeds=3))


@pytest.mark.slow
def test_vmapped_seeds_are_independent(three_seeds):
    state = three_seeds
    for name, tree in [("critic", state.agent.critic_params), ("actor", state.agent.actor_params)]:
        leaves = jax.tree.leaves(tree)
        for i, j in [(0, 1), (0, 2), (1, 2)]:
            assert not any(np.array_equal(leaf[i], leaf[j]) for leaf in leaves), (name, i, j)
    actions = np.asarray(state.buffer.data.action)
    assert not np.array_equal(actions[0], actions[1])  # own exploration (warm-up and policy)
    np.testing.assert_array_equal(state.seed, [0, 1, 2])
    # A member depends on its own seed only: seed 1 as the first of seeds (1, 2, 3) is bit for bit
    # seed 1 as the second of (0, 1, 2).
    shifted = _trained(_config(seed=1, num_seeds=3))
    assert _max_difference(_member(shifted.agent, 0), _member(state.agent, 1)) == 0.0
    assert _max_difference(_member(shifted.buffer, 0), _member(state.buffer, 1)) == 0.0


@pytest.mark.slow
def test_one_seed_in_a_vmapped_run_matches_it_trained_alone(three_seeds):
    """Identical initialisation, data and randomness; after 100 gradient steps the parameters
    agree to float32 rounding (XLA's batched matrix products round differently from unbatched
    ones, so long runs drift apart as any rounding change makes RL runs drift)."""
    alone = _trained(_config(seed=1, num_seeds=1))
    init_alone = build(_config(seed=1)).init_state()
    init_three = build(_config(seed=0, num_seeds=3)).init_state()
    assert _max_difference(_member(init_alone, 0), _member(init_three, 1)) == 0.0
    assert _max_difference(_member(alone.buffer, 0), _member(three_seeds.buffer, 1)) < 1e-5
    assert _max_difference(_member(alone.agent, 0), _member(three_seeds.agent, 1)) < 1e-5


def test_sweep_members_carry_their_own_hyperparameters():
    config = _config(seed=4, num_seeds=2, sweep=("bootstrap_rate=0.01,0.3", "posterior_sampling_rate=1,10"))
    members = expand_members(config)
    assert [m.label for m in members[::2]] == [
        "pbac bootstrap_rate=0.01 posterior_sampling_rate=1",
        "pbac bootstrap_rate=0.01 posterior_sampling_rate=10",
        "pbac bootstrap_rate=0.3 posterior_sampling_rate=1",
        "pbac bootstrap_rate=0.3 posterior_sampling_rate=10",
    ]
    assert [m.seed for m in members] == [4, 5] * 4
    assert members[5].overrides == {"pbac.bootstrap_rate": 0.3, "pbac.posterior_sampling_rate": 1}
    state = build(config).init_state()
    np.testing.assert_allclose(state.agent.config.bootstrap_rate, [0.01] * 4 + [0.3] * 4)
    np.testing.assert_array_equal(state.acting.posterior_sampling_rate, [1, 1, 10, 10] * 2)
    np.testing.assert_allclose(state.agent.config.prior_variance, 1.0)  # not swept: the profile's
    # The same seed starts from the same parameters at every sweep point.
    assert _max_difference(_member(state.agent.critic_params, 0), _member(state.agent.critic_params, 6)) == 0.0


@pytest.mark.slow
def test_a_sweep_point_trains_as_its_value_says():
    """The member with bootstrap_rate 0.3 is the same whether the grid lists 0.3 first or last,
    and differs from the member with 0.01: the traced value, not the profile's, drives it."""
    forward = _trained(_config(sweep=("bootstrap_rate=0.01,0.3",)))
    backward = _trained(_config(sweep=("bootstrap_rate=0.3,0.01",)))
    assert _max_difference(_member(forward.agent, 1), _member(backward.agent, 0)) == 0.0
    assert _max_difference(_member(forward.agent, 0), _member(forward.agent, 1)) > 1e-4


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--sweep", "bootstrp_rate=0.1,0.2"], "cannot sweep 'bootstrp_rate' of pbac (did you mean bootstrap_rate?); sweepable:"),
        (["--sweep", "num_critics=5,10"], "cannot sweep 'num_critics'"),
        (["--sweep", "bootstrap_rate=0.1,1.5"], "bootstrap_rate must lie in [0, 1), got 1.5"),
        (["--sweep", "bootstrap_rate"], "malformed sweep 'bootstrap_rate'"),
        (["--sweep", "prior_variance=1,2x"], "'2x' is not a number, True/False or a choice name"),
        (["--sweep", "prior_variance=1,high"], "sweep prior_variance='high' has type str; expected float"),
        (["--algo", "drnd", "--sweep", "sign=penalty,up"], "sweep sign='up': expected one of ['penalty', 'bonus']"),
        (["--seeds", "0"], "num_seeds must be >= 1"),
        (["--seeds"], "--seeds needs a value"),
    ],
)
def test_bad_seeds_and_sweeps_are_refused_with_what_is_valid(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as raised:
        cli.main(["--profile", "chain", "--train.run-dir", str(tmp_path / "never"), *argv])
    text = str(raised.value.code) + capsys.readouterr().err
    assert message in " ".join(text.replace("│", " ").split())  # tyro wraps its messages in a box
    assert not (tmp_path / "never").exists()


def test_non_finite_metrics_names_the_members():
    metrics = {"critic_loss": np.array([0.1, np.nan, 0.3]), "visit/x": np.array([[0.0, 1.0], [np.inf, 0.0], [0.0, 0.0]])}
    assert non_finite_metrics(metrics) == {"critic_loss": [1], "visit/x": [1]}


@pytest.mark.slow
def test_seeds_and_sweep_from_the_command_line_then_a_report(tmp_path, capsys):
    run_dir = tmp_path / "sweep"
    cli.main([
        "--profile", "chain", "--seeds", "2", "--sweep", "prior_variance=1.0,5.0",
        "--train.total-steps", "3000", "--train.eval-interval", "1000", "--train.run-dir", str(run_dir),
        "--train.progress", "False",
    ])
    config = json.loads((run_dir / "config.json").read_text())
    assert [(m["seed"], m["label"]) for m in config["members"]] == [
        (0, "pbac prior_variance=1.0"), (1, "pbac prior_variance=1.0"),
        (0, "pbac prior_variance=5.0"), (1, "pbac prior_variance=5.0"),
    ]
    evaluations = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
    assert sorted({(e["env_steps"], e["member"]) for e in evaluations}) == [(s, m) for s in (0, 1000, 2000, 3000) for m in range(4)]
    visits = [json.loads(line) for line in (run_dir / "visits.jsonl").read_text().splitlines()]
    assert sorted({v["env_steps"] for v in visits}) == list(range(500, 3001, 500))
    assert all(set(v["state"]) == {"x_position", "goal"} for v in visits) and len(visits) == 6 * 4
    assert len(list((run_dir / "tb").iterdir())) == 4

    out = tmp_path / "report"
    # --explore repeated and --explore with several values are the same request
    cli.main([
        "report", str(run_dir), "--out", str(out), "--explore", f"{run_dir},x_position,env_steps",
        "--phases", "3", "--explore", f"{run_dir},env_steps,x_position",
    ])
    assert {p.name for p in out.glob("exploration_*")} == {"exploration_0_chain.png", "exploration_1_chain.png"}
    markdown = (out / "results.md").read_text()
    assert "| chain |" in markdown and "pbac prior_variance=5.0" in markdown and "IQM over 2 seeds" in markdown
    assert "\\textbf" in (out / "results.tex").read_text()
    for name in ("curves_chain.png", "exploration_0_chain.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(SystemExit, match="available: env_steps, goal, x_position"):
        cli.main(["report", str(run_dir), "--out", str(out), "--explore", f"{run_dir},x_position,y_position"])
