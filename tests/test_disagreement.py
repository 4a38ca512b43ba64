"""Ensemble disagreement (mjx_pbac/disagreement.py) on hand-built ensembles with known answers,
and PBAC's optional random prior networks."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np
import pytest

from mjx_pbac import algos
from mjx_pbac.algos import pbac
from mjx_pbac.algos.base import make_algorithm, traced
from mjx_pbac.disagreement import disagreement_metrics, ensemble_disagreement, spreads
from mjx_pbac.replay import Transition


def linear_ensemble(slopes, offsets, heads) -> tuple[algos.Algorithm, dict]:
    """Q_k(s, a) = slopes[k] * a + offsets[k] (1-D actions); the heads' actions given per head."""
    state = {"w": jp.asarray(slopes, jp.float32), "c": jp.asarray(offsets, jp.float32), "h": jp.asarray(heads, jp.float32)}

    def critic_values(state, obs, action):
        return state["w"][:, None] * action[None, :, 0] + state["c"][:, None]

    def head_actions(state, obs):
        return jp.broadcast_to(state["h"][:, None, None], (state["h"].shape[0], obs.shape[0], 1))

    algorithm = make_algorithm(
        init=None, act=None, eval_act=None, update=None, critic_values=critic_values, head_actions=head_actions
    )
    return algorithm, state


def test_constant_offsets_spread_the_values_but_not_the_preferences():
    """Critics that differ only by offsets c_k: std of Q is std(c) = 1.5 (c = 0, 3), yet every
    critic ranks every action pair the same way: gap and vote spreads are exactly 0."""
    algorithm, state = linear_ensemble([2.0, 2.0], [0.0, 3.0], heads=[0.5, 0.5])
    obs = jp.zeros((64, 1))
    per_state = ensemble_disagreement(algorithm, state, obs, jax.random.key(0))
    np.testing.assert_allclose(per_state["q_spread"], 1.5, rtol=1e-6)
    np.testing.assert_array_equal(per_state["gap_spread"], 0.0)
    np.testing.assert_array_equal(per_state["vote_spread"], 0.0)
    np.testing.assert_array_equal(per_state["action_spread"], 0.0)


def test_opposite_preferences_split_the_vote_and_the_gap_spread_is_hand_worked():
    """Slopes +1 and -1: gap_k = w_k (a1 - a2), so std_k gap = |a1 - a2| and the critics always
    prefer opposite actions of the pair (vote spread 1); heads at -0.2 and 0.6: action spread 0.4."""
    algorithm, state = linear_ensemble([1.0, -1.0], [0.0, 0.0], heads=[-0.2, 0.6])
    obs = jp.zeros((16, 1))
    key = jax.random.key(3)
    per_state = ensemble_disagreement(algorithm, state, obs, key)
    pair = jax.random.uniform(key, (2, 16, 1), minval=-1.0, maxval=1.0)  # the pair the function draws
    np.testing.assert_allclose(per_state["gap_spread"], np.abs(pair[0, :, 0] - pair[1, :, 0]), rtol=1e-6)
    np.testing.assert_array_equal(per_state["vote_spread"], 1.0)
    np.testing.assert_allclose(per_state["action_spread"], 0.4, rtol=1e-6)
    metrics = disagreement_metrics(algorithm, state, obs, key)
    assert set(metrics) == {"critic_gap_spread", "critic_vote_spread", "critic_pair_q_spread", "head_action_spread"}
    np.testing.assert_allclose(metrics["critic_gap_spread"], np.mean(np.abs(pair[0, :, 0] - pair[1, :, 0])), rtol=1e-6)


def test_vote_spread_is_two_root_p_one_minus_p():
    """Four critics, three preferring a1 (p = 3/4): std of the signs (+1, +1, +1, -1) is
    2 sqrt(p (1 - p)) = sqrt(3) / 2."""
    q1 = jp.asarray([[1.0], [2.0], [0.5], [0.0]])
    q2 = jp.asarray([[0.0], [1.0], [0.0], [1.0]])
    out = spreads(q1, q2, jp.zeros((1, 1, 2)))
    np.testing.assert_allclose(out["vote_spread"], [np.sqrt(3) / 2], rtol=1e-6)
    np.testing.assert_allclose(out["gap_spread"], [np.std([1.0, 1.0, 0.5, -1.0])], rtol=1e-6)


def test_algorithms_without_critics_report_nothing():
    algorithm, state = linear_ensemble([1.0], [0.0], heads=[0.0])
    assert ensemble_disagreement(algorithm._replace(critic_values=None), state, jp.zeros((2, 1)), jax.random.key(0)) == {}


SMALL = pbac.Config(num_critics=3, hidden_sizes=(8,), actor="deterministic")


def _batch(key, n=16, obs_size=3, action_size=2) -> Transition:
    keys = jax.random.split(key, 4)
    return Transition(
        obs=jax.random.normal(keys[0], (n, obs_size)),
        action=jax.random.uniform(keys[1], (n, action_size), minval=-1, maxval=1),
        reward=jax.random.normal(keys[2], (n,)),
        next_obs=jax.random.normal(keys[3], (n, obs_size)),
        terminated=jp.zeros((n,)),
        truncated=jp.zeros((n,)),
    )


@pytest.mark.slow
def test_pbac_without_priors_is_the_paper_pbac_and_with_priors_adds_beta_p():
    """prior_scale 0 builds no priors (the same parameters as before priors existed); beta > 0:
    Q_k = f_k + beta p_k with p_k fixed through an update, and the update differs."""
    plain = pbac.make(SMALL, 3, 2)
    state = plain.init(jax.random.key(0), SMALL)
    assert state.prior_params is None
    beta = dataclasses.replace(SMALL, prior_scale=2.5)
    # Built for a program whose members include one with beta > 0: every member gets priors.
    with_priors = algos.make("pbac", [SMALL, beta], 3, 2)
    primed = with_priors.init(jax.random.key(0), beta)
    # Same key: the trainable critics and actor are the plain PBAC's; the priors come on top.
    for name in ("critic_params", "actor_params"):
        jax.tree.map(np.testing.assert_array_equal, getattr(primed, name), getattr(state, name))
    batch = _batch(jax.random.key(1))
    f = plain.critic_values(state, batch.obs, batch.action)
    p = plain.critic_values(state.replace(critic_params=primed.prior_params), batch.obs, batch.action)
    np.testing.assert_allclose(with_priors.critic_values(primed, batch.obs, batch.action), f + 2.5 * p, rtol=1e-5, atol=1e-6)
    # beta = 0 with priors built gives the plain values and the plain update, bit for bit.
    zeroed = primed.replace(config=traced(SMALL))
    np.testing.assert_array_equal(with_priors.critic_values(zeroed, batch.obs, batch.action), f)
    updated, _ = jax.jit(with_priors.update)(primed, batch, jax.random.key(2), jp.int32(0))
    jax.tree.map(np.testing.assert_array_equal, updated.prior_params, primed.prior_params)
    plain_updated, _ = jax.jit(plain.update)(state, batch, jax.random.key(2), jp.int32(0))
    leaves = zip(jax.tree.leaves(updated.critic_params), jax.tree.leaves(plain_updated.critic_params))
    assert not all(np.allclose(a, b) for a, b in leaves)


def test_pbac_prior_scale_is_validated_and_sweepable():
    with pytest.raises(ValueError, match="prior_scale must be >= 0"):
        pbac.Config(prior_scale=-1.0)
    assert "prior_scale" in algos.sweepable("pbac")
