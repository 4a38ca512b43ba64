"""TD3 (`mjx_pbac.algos.td3`), the example of docs/algorithms.md "Adding an algorithm": targets with
clipped smoothing noise and the min over two target critics, delayed actor and target updates,
clipped exploration noise, and training through the one command."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jp
import numpy as np
import pytest

import train as cli
from mjx_pbac.algos import td3
from tests.probe_envs import CountingEnv, same_tree, value_batch

SMALL = td3.Config(hidden_sizes=(8,))


def test_targets_take_the_min_over_critics_and_stop_at_termination():
    # next_q: critic 0 = [3, 3, 3], critic 1 = [-2, 5, 1] -> min [-2, 3, 1]; gamma 0.5;
    # rows: terminated, not, not -> y = [1, 2 + 1.5, 3 + 0.5] = [1, 3.5, 3.5]
    y = td3.td3_targets(
        jp.asarray([1.0, 2.0, 3.0]), jp.asarray([1.0, 0.0, 0.0]), jp.asarray([[3.0, 3.0, 3.0], [-2.0, 5.0, 1.0]]), gamma=0.5
    )
    np.testing.assert_allclose(y, [1.0, 3.5, 3.5])


def test_smoothing_noise_is_clipped_and_only_moves_the_target():
    """With a huge target noise clipped at 0 the update equals the noiseless one, bit for bit."""
    env = CountingEnv()
    algorithm = td3.make(SMALL, env.observation_size, env.action_size)
    update = jax.jit(algorithm.update)
    batch = value_batch([1.0, 2.0, 3.0])
    metrics = {}
    for name, config in {
        "none": dataclasses.replace(SMALL, target_noise=0.0),
        "clipped": dataclasses.replace(SMALL, target_noise=100.0, target_noise_clip=0.0),
        "noisy": dataclasses.replace(SMALL, target_noise=0.5),
    }.items():
        _, metrics[name] = update(algorithm.init(jax.random.key(0), config), batch, jax.random.key(1), None)
    assert float(metrics["none"]["target_mean"]) == float(metrics["clipped"]["target_mean"])
    assert float(metrics["none"]["target_mean"]) != float(metrics["noisy"]["target_mean"])


def test_target_is_the_min_over_target_critics_at_the_target_action_plus_noise_clipped_to_c():
    """One transition, target noise sd 100 clipped at c = 0.3: the noise is +c or -c, so
    y = r + gamma min_k Qbar_k(s', clip(pibar(s') +- c, -1, 1)), one of two values worked out from
    the fresh state's critics and policy (its targets are copies of them); both occur over keys,
    and neither is the noiseless target."""
    env = CountingEnv()
    config = dataclasses.replace(SMALL, gamma=0.5, target_noise=100.0, target_noise_clip=0.3)
    algorithm = td3.make(config, env.observation_size, env.action_size)
    state = algorithm.init(jax.random.key(0), config)
    batch = value_batch([0.2])  # r = 0.2, s' = [0.7, 0.7], not terminated
    pibar = algorithm.eval_act(state, batch.next_obs)  # [1, 1]

    def y(action):
        return 0.2 + 0.5 * float(jp.min(algorithm.critic_values(state, batch.next_obs, action)))

    candidates = {sign: y(jp.clip(pibar + sign * 0.3, -1.0, 1.0)) for sign in (1.0, -1.0)}
    assert abs(candidates[1.0] - candidates[-1.0]) > 1e-4 and abs(y(pibar) - candidates[1.0]) > 1e-5
    update = jax.jit(algorithm.update)
    seen = set()
    for step in range(8):
        _, metrics = update(state, batch, jax.random.key(step), None)
        target = float(metrics["target_mean"])
        sign = min(candidates, key=lambda s: abs(candidates[s] - target))
        assert target == pytest.approx(candidates[sign], abs=1e-5), (target, candidates)
        seen.add(sign)
    assert seen == {1.0, -1.0}


def test_actor_and_targets_move_only_every_policy_delay_steps():
    env = CountingEnv()
    config = dataclasses.replace(SMALL, policy_delay=3)
    algorithm = td3.make(config, env.observation_size, env.action_size)
    update = jax.jit(algorithm.update)
    state = algorithm.init(jax.random.key(0), config)
    batch = value_batch([1.0, 2.0, 3.0, 4.0])
    moved = []
    for step in range(7):
        new, metrics = update(state, batch, jax.random.key(step), None)
        assert not same_tree(new.critic_params, state.critic_params)  # the critics learn every step
        moved.append(not same_tree(new.actor_params, state.actor_params))
        assert moved[-1] == (not same_tree(new.target_actor_params, state.target_actor_params))
        assert moved[-1] == (not same_tree(new.target_critic_params, state.target_critic_params))
        state = new
    assert moved == [True, False, False, True, False, False, True]
    assert int(state.steps) == 7 and float(metrics["alpha"]) == 0.0


def test_exploration_adds_clipped_gaussian_noise_and_eval_is_the_policy():
    env = CountingEnv()
    algorithm = td3.make(SMALL, env.observation_size, env.action_size)
    state = algorithm.init(jax.random.key(0), SMALL)
    obs = jp.tile(jp.asarray([[0.3, -0.2]]), (4000, 1))
    greedy = algorithm.eval_act(state, obs)
    noisy = algorithm.act(state, None, obs, jax.random.key(1))
    noise = np.asarray(noisy - greedy)[:, 0]
    assert noise.std() == pytest.approx(0.1, rel=0.05) and abs(noise.mean()) < 0.01
    loud = algorithm.init(jax.random.key(0), dataclasses.replace(SMALL, exploration_noise=10.0))
    actions = np.asarray(algorithm.act(loud, None, obs, jax.random.key(1)))
    assert np.all(np.abs(actions) <= 1.0) and np.mean(np.abs(actions) == 1.0) > 0.8


def test_td3_trains_through_the_one_command_with_a_sweep(tmp_path):
    """`train.py --profile chain --algo td3` (the profile's [td3] section), two seeds x two
    exploration noises in one program, 3,000 steps: finished, finite losses, a deterministic actor
    (alpha and entropy 0), finite returns. About 10 s with a warm compile cache."""
    run_dir = tmp_path / "td3"
    code = cli.run([
        "--profile", "chain", "--algo", "td3", "--seeds", "2", "--sweep", "exploration_noise=0.1,0.3",
        "--train.total-steps", "3000", "--train.eval-interval", "1000", "--train.run-dir", str(run_dir),
        "--train.progress", "False", "--train.tensorboard", "False",
    ])
    assert code == 0
    config = json.loads((run_dir / "config.json").read_text())
    assert config["algorithm"] == "td3" and config["config"]["td3"]["hidden_sizes"] == [32, 32]  # the profile's [td3]
    assert [m["label"] for m in config["members"]] == ["td3 exploration_noise=0.1"] * 2 + ["td3 exploration_noise=0.3"] * 2
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "finished"
    trained = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = [record for record in trained if record["phase"] == "train"]
    assert {record["member"] for record in trained} == {0, 1, 2, 3}
    for record in trained:
        assert all(np.isfinite(record[name]) for name in ("critic_loss", "actor_loss", "target_mean"))
        assert record["alpha"] == 0.0 and record["entropy"] == 0.0  # a deterministic actor
    evaluations = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
    final = [e for e in evaluations if e["env_steps"] == 3000]
    assert len(final) == 4 and all(np.isfinite(e["return_mean"]) for e in final)
