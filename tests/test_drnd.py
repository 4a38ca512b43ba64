"""SAC-DRND baseline (`mjx_pbac.algos.drnd`; paper appendix "Baselines", DRND): the bonus and the
predictor loss by hand, the signed bonus inside the bootstrap of SAC's target, fixed random targets,
a predictor that distils them (seen pairs become less novel than unseen ones), and sweeps over the
sign.

Expected numbers are worked out by hand in the comments; nothing re-implements the losses.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np
import pytest

from mjx_pbac.algos import drnd, sac
from mjx_pbac.algos.base import traced
from mjx_pbac.algos.drnd import ReLUMLP, drnd_bonus, predictor_loss
from mjx_pbac.algos.sac import sac_targets
from mjx_pbac.config import RunConfig, TrainConfig, expand_members
from tests.probe_envs import CountingEnv, same_tree, value_batch

SMALL = drnd.Config(num_critics=2, hidden_sizes=(8,), predictor_hidden_sizes=(16, 16), embedding_size=4, num_targets=3)




# -- the bonus ------------------------------------------------------------------------------
#
# N = 2 targets, B = 2 samples, E = 2 outputs. Both samples see the same targets:
#   g_1 = [1, 0], g_2 = [3, 2]  ->  mu = [2, 1], B2 = [(1 + 9)/2, (0 + 4)/2] = [5, 2],
#   B2 - mu^2 = [1, 1].
# Sample 0, f = [2.5, 3]:
#   sum_j (f - mu)^2 = 0.25 + 4 = 4.25
#   |f^2 - mu^2| / var = [|6.25 - 4|, |9 - 1|] = [2.25, 8] -> clip to [1, 1] -> sqrt mean 1
#   b = 0.9 * 4.25 + 0.1 * 1 = 3.925
# Sample 1, f = [2.1, 1]:
#   sum_j (f - mu)^2 = 0.01 + 0 = 0.01
#   ratios [|4.41 - 4|, 0] = [0.41, 0] -> clip [0.41, 1e-3] -> sqrt [0.6403124, 0.0316228], mean 0.3359676
#   b = 0.9 * 0.01 + 0.1 * 0.3359676 = 0.0425968
TARGETS = jp.array([[[1.0, 0.0], [1.0, 0.0]], [[3.0, 2.0], [3.0, 2.0]]])  # [N, B, E]
PREDICTION = jp.array([[2.5, 3.0], [2.1, 1.0]])  # [B, E]


def test_bonus_by_hand():
    np.testing.assert_allclose(drnd_bonus(PREDICTION, TARGETS), [3.925, 0.0425968], rtol=1e-5)


def test_bonus_mix_weights_the_two_terms():
    # mix 0.5: sample 0 -> 0.5 * 4.25 + 0.5 * 1 = 2.625; sample 1 -> 0.005 + 0.5 * 0.3359676 = 0.1729838
    np.testing.assert_allclose(drnd_bonus(PREDICTION, TARGETS, mix=0.5), [2.625, 0.1729838], rtol=1e-5)
    # mix 1: plain RND against the targets' mean
    np.testing.assert_allclose(drnd_bonus(PREDICTION, TARGETS, mix=1.0), [4.25, 0.01], rtol=1e-5)


def test_bonus_is_finite_where_all_targets_agree():
    """Zero spread over the targets: the ratio's denominator is floored, so the distributional
    term is the clip's top (f != mu) or bottom (f == mu), never 0/0."""
    same = jp.ones((3, 2, 1))  # every target outputs 1
    prediction = jp.array([[1.0], [2.0]])
    # sample 0: distance 0, ratio 0/floor = 0 -> sqrt(1e-3) = 0.0316228; b = 0.1 * 0.0316228
    # sample 1: distance 1, ratio 3/floor -> 1;   b = 0.9 + 0.1 = 1.0
    np.testing.assert_allclose(drnd_bonus(prediction, same), [0.00316228, 1.0], rtol=1e-5)


def test_bonus_checks_shapes():
    with pytest.raises(ValueError, match=r"\[N, B, E\]"):
        drnd_bonus(PREDICTION, TARGETS[0])


def test_predictor_loss_by_hand_and_no_gradient_to_the_target():
    # (f - g)^2 = [[1, 0], [0, 4]] -> mean 5/4; d/df = 2 (f - g) / 4 = [[0.5, 0], [0, 1]]
    prediction = jp.array([[1.0, 2.0], [3.0, 4.0]])
    target = jp.array([[0.0, 2.0], [3.0, 2.0]])
    assert float(predictor_loss(prediction, target)) == pytest.approx(1.25)
    np.testing.assert_allclose(jax.grad(predictor_loss)(prediction, target), [[0.5, 0.0], [0.0, 1.0]])
    np.testing.assert_array_equal(jax.grad(predictor_loss, argnums=1)(prediction, target), 0.0)


# -- the bonus in SAC's target --------------------------------------------------------------


def test_sac_target_carries_the_bonus_inside_the_bootstrap():
    # gamma 0.9, alpha 0.5; min_k next_q = [1, 2]; log pi = [0, 2]; bonus = [4, -1]
    #   row 0, truncated:  1 + 0.9 (1 - 0 + 4) = 5.5
    #   row 1, terminated: 2 (the bonus of a next state that does not follow is not added)
    y = sac_targets(
        jp.array([1.0, 2.0]), jp.array([0.0, 1.0]), jp.array([[1.0, 3.0], [2.0, 2.0]]), jp.array([0.0, 2.0]),
        gamma=0.9, alpha=0.5, next_bonus=jp.array([4.0, -1.0]),
    )
    np.testing.assert_allclose(y, [5.5, 2.0], rtol=1e-6)


@pytest.mark.slow
def test_update_adds_sign_times_lambda_times_the_bonus_to_the_target():
    """Same state and key, so the same a' and critics: only the bonus term differs. Its size
    shows in the target as gamma * mean(b) (no row terminated), with the sign of the switch."""
    env = CountingEnv()
    algorithm = drnd.make(SMALL, env.observation_size, env.action_size)
    update = jax.jit(algorithm.update)
    batch = value_batch([1.0, 2.0, 3.0, 4.0])

    def target_mean(**changes):
        config = dataclasses.replace(SMALL, **changes)
        agent = algorithm.init(jax.random.key(0), config)
        _, metrics = update(agent, batch, jax.random.key(1), None)
        return float(metrics["target_mean"]), float(metrics["target_bonus_mean"])

    plain, zero = target_mean(bonus_scale=0.0)
    assert zero == 0.0
    penalty, signed_penalty = target_mean(sign="penalty")
    bonus, signed_bonus = target_mean(sign="bonus", bonus_scale=2.0)
    assert signed_penalty < 0 < signed_bonus
    assert signed_bonus == pytest.approx(-2.0 * signed_penalty, rel=1e-5)
    gamma = SMALL.gamma
    assert penalty - plain == pytest.approx(gamma * signed_penalty, rel=1e-4)
    assert bonus - plain == pytest.approx(gamma * signed_bonus, rel=1e-4)

    # Every row terminated: y = r whatever the bonus.
    terminated = batch.replace(terminated=jp.ones(4), truncated=jp.zeros(4))
    agent = algorithm.init(jax.random.key(0), dataclasses.replace(SMALL, sign="bonus"))
    _, metrics = update(agent, terminated, jax.random.key(1), None)
    assert float(metrics["target_mean"]) == pytest.approx(2.5, abs=1e-6)


@pytest.mark.slow
def test_actor_maximises_q_plus_the_signed_bonus_at_its_sample():
    """The actor's objective carries sign * lambda_actor * b(s, a~): with the same state and key
    only that term differs, by exactly the reported bonus; its gradient reaches the actor (through
    a~ and the predictor's output), so lambda_actor changes the actor's step, and lambda_actor = 0
    leaves SAC's actor."""
    env = CountingEnv()
    algorithm = drnd.make(SMALL, env.observation_size, env.action_size)
    update = jax.jit(algorithm.update)
    batch = value_batch([1.0, 2.0, 3.0, 4.0])

    def step(**changes):
        agent = algorithm.init(jax.random.key(0), dataclasses.replace(SMALL, **changes))
        return update(agent, batch, jax.random.key(1), None)

    plain, plain_metrics = step(actor_bonus_scale=0.0)
    assert float(plain_metrics["actor_bonus_mean"]) == 0.0
    penalised, metrics = step()
    signed = float(metrics["actor_bonus_mean"])
    assert signed < 0  # the penalty: -lambda_actor b, b > 0
    # L_pi = mean [alpha log pi - min Q - signed bonus]: the loss rises by the bonus's size
    assert float(metrics["actor_loss"]) - float(plain_metrics["actor_loss"]) == pytest.approx(-signed, rel=1e-4)
    # Adam's first step is sign-like; its second moment (the squared gradient) shows the bonus's gradient
    assert not same_tree(plain.actor_opt_state, penalised.actor_opt_state)
    assert same_tree(plain.critic_params, penalised.critic_params)  # the critic step comes first
    _, seeking_metrics = step(sign="bonus", actor_bonus_scale=2.0)
    assert float(seeking_metrics["actor_bonus_mean"]) == pytest.approx(-2.0 * signed, rel=1e-5)


def test_target_entropy_is_the_scale_times_the_action_dimensions():
    # Haarnoja et al.'s -A by default; the authors' DRND code's -A/2 with scale -0.5
    assert sac.target_entropy(drnd.Config(), 6) == -6.0
    assert sac.target_entropy(drnd.Config(target_entropy_scale=-0.5), 6) == -3.0


# -- the networks -----------------------------------------------------------------------------


def test_targets_fixed_predictor_distils_and_seen_pairs_become_less_novel():
    env = CountingEnv()
    config = dataclasses.replace(SMALL, predictor_lr=1e-3)
    algorithm = drnd.make(config, env.observation_size, env.action_size)
    update = jax.jit(algorithm.update)
    agent = algorithm.init(jax.random.key(0), config)
    before = agent
    seen = value_batch(np.linspace(-1.0, 1.0, 16))
    losses = []
    for step in range(300):
        agent, metrics = update(agent, seen, jax.random.key(step), None)
        losses.append(float(metrics["predictor_loss"]))
    assert same_tree(before.random_target_params, agent.random_target_params)  # never trained
    assert not same_tree(before.predictor_params, agent.predictor_params)
    # It can only fit the targets' mean (a random one each step), so the loss falls towards
    # their spread, not to 0.
    assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:20])

    network = ReLUMLP(config.predictor_hidden_sizes, config.embedding_size)

    def novelty(state, batch):
        x = jp.concatenate([batch.obs, batch.action], axis=-1)
        targets = jax.vmap(network.apply, in_axes=(0, None))(state.random_target_params, x)
        return float(jp.mean(drnd_bonus(network.apply(state.predictor_params, x), targets)))

    unseen = value_batch(np.linspace(4.0, 6.0, 16))
    assert novelty(agent, seen) < novelty(before, seen)
    assert novelty(agent, seen) < 0.5 * novelty(agent, unseen)


def test_predictor_lr_moves_only_the_predictor():
    env = CountingEnv()
    algorithm = drnd.make(SMALL, env.observation_size, env.action_size)
    update = jax.jit(algorithm.update)
    batch = value_batch([1.0, 2.0, 3.0])
    results = []
    for lr in (1e-4, 1e-1):
        agent = algorithm.init(jax.random.key(0), dataclasses.replace(SMALL, predictor_lr=lr))
        results.append(update(agent, batch, jax.random.key(1), None)[0])
    slow, fast = results
    assert not same_tree(slow.predictor_params, fast.predictor_params)
    for name in ("critic_params", "target_critic_params", "actor_params", "log_alpha", "random_target_params"):
        assert same_tree(getattr(slow, name), getattr(fast, name)), name


# -- config and sweeps ----------------------------------------------------------------------


def test_sign_is_swept_by_name_in_one_program():
    config = RunConfig(train=TrainConfig(env="chain", sweep=("sign=penalty,bonus",)), algo="drnd")
    members = expand_members(config)
    assert [m.label for m in members] == ["drnd sign=penalty", "drnd sign=bonus"]
    assert [float(traced(m.config).sign) for m in members] == [-1.0, 1.0]
    with pytest.raises(ValueError, match="expected one of"):
        expand_members(dataclasses.replace(config, train=TrainConfig(env="chain", sweep=("sign=up",))))


def test_default_is_the_reference_pipelines_penalty():
    assert drnd.Config().sign == "penalty" and float(traced(drnd.Config()).sign) == -1.0
    assert (drnd.Config().num_targets, drnd.Config().embedding_size, drnd.Config().predictor_lr) == (10, 32, 1e-4)
    # Yang et al.'s predictor and targets: three hidden ReLU layers of 256; the paper's 10 critics
    assert drnd.Config().predictor_hidden_sizes == (256, 256, 256)
    assert (drnd.Config().num_critics, drnd.Config().actor_bonus_scale, drnd.Config().target_entropy_scale) == (10, 1.0, -1.0)
    with pytest.raises(ValueError, match="num_targets"):
        drnd.Config(num_targets=1)
