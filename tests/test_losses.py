"""PBAC's losses (paper section 3.2, Eq. (critic_loss); section 3.3, the actor): hand-worked values,
gradients, switches and shape checks.

Every expected number below is worked out by hand in the comments (fractions, then `math.log`
for the logarithms); nothing re-implements the loss.
"""

from __future__ import annotations

import inspect
import itertools
import math

import chex
import jax
import jax.numpy as jp
import numpy as np
import pytest

from mjx_pbac.losses import bellman_targets, pbac_critic_loss, soft_actor_loss, temperature_loss

LOG_FLOOR = math.log(1e-6)  # = -13.815510557964274

# -- the shared hand-worked example ------------------------------------------------------------
#
# K = 3 members (rows), B = 3 samples (columns), gamma = 1/2, sigma0^2 = 2.
#   gamma^2 + 1/2 = 3/4;  reference coherence divisor 2 sigma0^2 = 4;
#   paper coherence divisor 2 gamma^2 sigma0^2 = 2 * 1/4 * 2 = 1.
#
#            column 0          column 1          column 2
#   q     = [2, 4, 6]        [5, 3, 7]        [1, 2, 3]
#   y     = [1, 2, 6]        [1, 1, 4]        [3, 0, 0]
#   mask  = [1, 1, 0]        [0, 1, 0]        [0, 0, 0]
#
# Column 0 has two unmasked members, column 1 one (paper variance -> floor), column 2 none
# (paper ybar -> plain mean; reference variance of all-zero masked q -> floor).
GAMMA = 0.5
PRIOR_VARIANCE = 2.0
Q = jp.array([[2.0, 5.0, 1.0], [4.0, 3.0, 2.0], [6.0, 7.0, 3.0]], jp.float32)
Y = jp.array([[1.0, 1.0, 3.0], [2.0, 1.0, 0.0], [6.0, 4.0, 0.0]], jp.float32)
MASK = jp.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]], jp.float32)

# Diversity, both forms (only unmasked entries count; mean over all K B = 9 entries):
#   (2-1)^2 + (4-2)^2 [column 0] + (3-1)^2 [column 1] = 1 + 4 + 4 = 9  ->  9 / 9 = 1.
DIVERSITY = 1.0

# Reference form.
#   coherence: ybar = plain means over k = [(1+2+6)/3, (1+1+4)/3, (3+0+0)/3] = [3, 2, 1]
#     (2-3)^2 + (4-3)^2 + (3-2)^2 = 1 + 1 + 1 = 3  ->  3 / 9 / 4 = 1/12.
#   propagation: variance (ddof 1) of mask * q, masked entries counted as zeros:
#     column 0: [2, 4, 0], mean 2, squares 0 + 4 + 4 = 8, / 2 = 4
#     column 1: [0, 3, 0], mean 1, squares 1 + 4 + 1 = 6, / 2 = 3
#     column 2: [0, 0, 0], variance 0 -> floor 1e-6
#     -(3/4) * (log 4 + log 3 + log 1e-6) / 3 = -(1/4) (log 12 + log 1e-6)  (~ 2.832652)
REF_COHERENCE = 1.0 / 12.0
REF_PROPAGATION = -0.25 * (math.log(12.0) + LOG_FLOOR)

# Paper form (moments over the unmasked members only).
#   coherence: ybar = [(1+2)/2, 1, plain mean (3+0+0)/3 = 1] = [3/2, 1, 1]
#     (2-3/2)^2 + (4-3/2)^2 + (3-1)^2 = 1/4 + 25/4 + 4 = 21/2  ->  21/2 / 9 / 1 = 7/6.
#     (column 2's ybar is multiplied by mask 0, so the plain-mean fallback only has to keep the
#     value and the gradient finite.)
#   propagation: column 0: unmasked q = [2, 4], mean 3, squares 1 + 1 = 2, / (2-1) = 2;
#     column 1: one member -> 1e-6; column 2: none -> 1e-6.
#     -(3/4) * (log 2 + 2 log 1e-6) / 3 = -(1/4) (log 2 + 2 log 1e-6)   (~ 6.734468)
PAPER_COHERENCE = 7.0 / 6.0
PAPER_PROPAGATION = -0.25 * (math.log(2.0) + 2.0 * LOG_FLOOR)

EXPECTED = {
    "reference": {"diversity": DIVERSITY, "coherence": REF_COHERENCE, "propagation": REF_PROPAGATION},
    "paper": {"diversity": DIVERSITY, "coherence": PAPER_COHERENCE, "propagation": PAPER_PROPAGATION},
}
TERMS = ("diversity", "coherence", "propagation")


def loss_fn(form, **switches):
    def f(q, y, mask=MASK):
        return pbac_critic_loss(q, y, mask, gamma=GAMMA, prior_variance=PRIOR_VARIANCE, form=form, **switches)

    return f


@pytest.mark.parametrize("form", ["reference", "paper"])
def test_critic_loss_hand_worked_terms_and_total(form):
    loss, aux = jax.jit(loss_fn(form))(Q, Y)
    chex.assert_shape(loss, ())
    expected = EXPECTED[form]
    for term in TERMS:
        np.testing.assert_allclose(aux[term], expected[term], rtol=1e-5, err_msg=term)
    np.testing.assert_allclose(loss, sum(expected.values()), rtol=1e-5)
    # A boolean mask (as jax.random.bernoulli returns) gives the same values.
    loss_bool, _ = loss_fn(form)(Q, Y, MASK.astype(bool))
    np.testing.assert_allclose(loss_bool, loss, rtol=1e-6)
    # The two forms really differ on this example (masked moments vs. zeros in the moments).
    assert abs(EXPECTED["reference"]["propagation"] - EXPECTED["paper"]["propagation"]) > 1.0


@pytest.mark.parametrize("form", ["reference", "paper"])
def test_critic_loss_switches_sum_remaining_terms(form):
    expected = EXPECTED[form]
    # Every on/off combination of the three terms: one off, two off (pairs), all off, all on.
    for flags in itertools.product([True, False], repeat=3):
        switches = dict(zip(("use_diversity", "use_coherence", "use_propagation"), flags))
        loss, aux = loss_fn(form, **switches)(Q, Y)
        want = sum(expected[t] for t, on in zip(TERMS, flags) if on)
        np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-6, err_msg=str(switches))
        # aux always reports all three terms, whether switched on or not.
        for term in TERMS:
            np.testing.assert_allclose(aux[term], expected[term], rtol=1e-5, err_msg=f"{switches} {term}")


@pytest.mark.parametrize("form", ["reference", "paper"])
def test_variance_floor(form):
    # All q equal, all unmasked, y = q: diversity = coherence = 0 and every column's variance is
    # 0 -> floored at 1e-6:  propagation = -(1/4 + 1/2) log 1e-6 = 0.75 * 13.8155106 = 10.3616329.
    q = jp.full((3, 2), 5.0, jp.float32)
    mask = jp.ones((3, 2), jp.float32)
    loss, aux = loss_fn(form)(q, q, mask)
    np.testing.assert_allclose(aux["propagation"], -0.75 * LOG_FLOOR, rtol=1e-6)
    np.testing.assert_allclose(loss, -0.75 * LOG_FLOOR, rtol=1e-6)
    # The floor gives no gradient (and no NaN from log 0).
    grad = jax.grad(lambda q: loss_fn(form)(q, q, mask)[0])(q)
    np.testing.assert_array_equal(grad, np.zeros((3, 2)))

    # Just above the floor it is not applied: q = [0, 0.002, 0.004] per column, mean 0.002,
    # squares 4e-6 + 0 + 4e-6 = 8e-6, / 2 = 4e-6:  propagation = -(3/4) log 4e-6 (~ 9.32191).
    q = jp.array([[0.0, 0.0], [0.002, 0.002], [0.004, 0.004]], jp.float32)
    _, aux = loss_fn(form)(q, q, mask)
    np.testing.assert_allclose(aux["propagation"], -0.75 * math.log(4e-6), rtol=1e-4)


# -- gradients ---------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["reference", "paper"])
def test_targets_get_no_gradient(form):
    grad_y = jax.grad(lambda y: loss_fn(form)(Q, y)[0])(Y)
    np.testing.assert_array_equal(grad_y, np.zeros((3, 3)))


def test_reference_gradient_hand_worked():
    # loss = (1/9) sum b (q-y)^2 + (1/36) sum b (q-ybar)^2 - (1/4) sum_i log v_i (reference form,
    # ybar = [3, 2, 1], v = [4, 3, floor]), x = b q per column, d v_i / d x_ki = 2 (x_ki - xbar_i)/2.
    #   (k=0, i=0): q=2, y=1, ybar=3:  2(1)/9 + 2(-1)/36 - (1/4)(2-2)/4 = 2/9 - 1/18 - 0 = 1/6
    #   (k=1, i=0): q=4, y=2, ybar=3:  2(2)/9 + 2(1)/36 - (1/4)(4-2)/4 = 4/9 + 1/18 - 1/8 = 3/8
    #   (k=1, i=1): q=3, y=1, ybar=2:  2(2)/9 + 2(1)/36 - (1/4)(3-1)/3 = 4/9 + 1/18 - 1/6 = 1/3
    #   masked entries: diversity and coherence weight them by b = 0, and the propagation term
    #   sees them as b q = 0 (constant in q): gradient 0.
    expected = np.array([[1 / 6, 0.0, 0.0], [3 / 8, 1 / 3, 0.0], [0.0, 0.0, 0.0]])
    grad = jax.grad(lambda q: loss_fn("reference")(q, Y)[0])(Q)
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-7)


def test_paper_gradient_hand_worked():
    # Paper form: coherence (1/9) sum b (q-ybar)^2 with ybar = [3/2, 1, 1]; v_0 = var([2, 4]) = 2
    # (ddof 1, d v_0 / d q_k0 = 2 (q_k0 - 3)); columns 1 and 2 floored (constant).
    #   (k=0, i=0): 2(1)/9 + 2(1/2)/9 - (1/4)(2(2-3))/2 = 2/9 + 1/9 + 1/4 = 7/12
    #   (k=1, i=0): 2(2)/9 + 2(5/2)/9 - (1/4)(2(4-3))/2 = 4/9 + 5/9 - 1/4 = 3/4
    #   (k=1, i=1): 2(2)/9 + 2(2)/9 - 0                                   = 8/9
    # Masked entries and the empty column 2: gradient exactly 0 (and finite).
    expected = np.array([[7 / 12, 0.0, 0.0], [3 / 4, 8 / 9, 0.0], [0.0, 0.0, 0.0]])
    grad = jax.grad(lambda q: loss_fn("paper")(q, Y)[0])(Q)
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("form", ["reference", "paper"])
def test_masked_entries_get_no_gradient_from_any_single_term(form):
    masked = np.asarray(MASK) == 0
    for term in TERMS:
        switches = {f"use_{t}": t == term for t in TERMS}
        grad = jax.grad(lambda q: loss_fn(form, **switches)(q, Y)[0])(Q)  # noqa: B023 - called at once
        assert np.all(np.isfinite(grad)), term
        np.testing.assert_array_equal(np.asarray(grad)[masked], 0.0, err_msg=term)
    # The reference propagation term alone: unmasked entries do get gradient, hand-worked above
    # as the last summand: (k=1, i=0) -(1/4)(4-2)/4 = -1/8, (k=1, i=1) -(1/4)(3-1)/3 = -1/6,
    # (k=0, i=0) 0 (it sits at the column mean 2 of [2, 4, 0]).
    if form == "reference":
        grad = jax.grad(lambda q: loss_fn(form, use_diversity=False, use_coherence=False)(q, Y)[0])(Q)
        expected = np.array([[0.0, 0.0, 0.0], [-1 / 8, -1 / 6, 0.0], [0.0, 0.0, 0.0]])
        np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-7)


# -- Bellman targets ---------------------------------------------------------------------------


def test_bellman_targets_hand_worked():
    # gamma = 0.9, alpha = 0.5; K = 2, B = 3. Column 0 is a truncated (not terminated)
    # transition, column 1 terminated, column 2 an ordinary one.
    #   column 0: soft values 10 - 0.5*2 = 9 and 0 - 0.5*2 = -1; y = 1 + 0.9 * [9, -1] = [9.1, 0.1]
    #   column 1: terminated -> y = r = 2 exactly, whatever next_q (1e6 here) and log-prob are
    #   column 2: soft values 4 - 0.5*(-4) = 6 and 2 + 2 = 4;   y = -1 + 0.9 * [6, 4] = [4.4, 2.6]
    reward = jp.array([1.0, 2.0, -1.0], jp.float32)
    terminated = jp.array([0.0, 1.0, 0.0], jp.float32)
    next_q = jp.array([[10.0, 1e6, 4.0], [0.0, -1e6, 2.0]], jp.float32)
    next_log_prob = jp.array([2.0, 3.0, -4.0], jp.float32)
    y = jax.jit(bellman_targets, static_argnames="gamma")(
        reward, terminated, next_q, next_log_prob, gamma=0.9, alpha=jp.float32(0.5)
    )
    chex.assert_shape(y, (2, 3))
    np.testing.assert_allclose(y, [[9.1, 2.0, 4.4], [0.1, 2.0, 2.6]], rtol=1e-6)
    np.testing.assert_array_equal(y[:, 1], [2.0, 2.0])  # exactly r through termination

    # alpha = 0: y = r + gamma (1 - d) q':  column 0: 1 + 0.9*[10, 0] = [10, 1].
    y0 = bellman_targets(reward, terminated, next_q, next_log_prob, gamma=0.9, alpha=0.0)
    np.testing.assert_allclose(y0[:, 0], [10.0, 1.0], rtol=1e-6)


def test_bellman_targets_has_no_truncation_argument():
    # Truncation must not stop bootstrapping, so the function cannot even be told about it.
    params = set(inspect.signature(bellman_targets).parameters)
    assert params == {"reward", "terminated", "next_q", "next_log_prob", "gamma", "alpha"}
    assert not any("trunc" in p for p in params)


# -- actor and temperature ---------------------------------------------------------------------


def test_soft_actor_loss_hand_worked():
    # alpha = 0.2, K = B = 2:
    #   alpha logp - q = [[-0.2 - 1, 0.1 - 2], [0.4 - 3, -0.4 - 4]] = [[-1.2, -1.9], [-2.6, -4.4]]
    #   mean = -10.1 / 4 = -2.525
    q = jp.array([[1.0, 2.0], [3.0, 4.0]], jp.float32)
    log_prob = jp.array([[-1.0, 0.5], [2.0, -2.0]], jp.float32)
    np.testing.assert_allclose(soft_actor_loss(q, log_prob, 0.2), -2.525, rtol=1e-6)
    # d/dq = -1/4 everywhere, d/dlogp = alpha/4 = 0.05.
    gq, glp = jax.grad(soft_actor_loss, argnums=(0, 1))(q, log_prob, 0.2)
    np.testing.assert_allclose(gq, np.full((2, 2), -0.25), rtol=1e-6)
    np.testing.assert_allclose(glp, np.full((2, 2), 0.05), rtol=1e-6)
    # Deterministic actor (alpha = 0, log-prob = 0): -mean q = -(1+2+3+4)/4 = -2.5.
    np.testing.assert_allclose(soft_actor_loss(q, jp.zeros_like(q), 0.0), -2.5, rtol=1e-6)


def test_temperature_loss_hand_worked_and_gradients():
    # log_alpha = 0.3, H_target = -2:  log pi + H = [-3, -1.5, 0, -4], mean = -8.5/4 = -2.125
    #   loss = -0.3 * (-2.125) = 0.6375;  d loss / d log_alpha = -mean(log pi + H) = 2.125.
    log_alpha = jp.float32(0.3)
    log_prob = jp.array([[-1.0, 0.5], [2.0, -2.0]], jp.float32)
    np.testing.assert_allclose(temperature_loss(log_alpha, log_prob, -2.0), 0.6375, rtol=1e-6)
    g_alpha, g_logp = jax.grad(temperature_loss, argnums=(0, 1))(log_alpha, log_prob, -2.0)
    np.testing.assert_allclose(g_alpha, 2.125, rtol=1e-6)
    np.testing.assert_array_equal(g_logp, np.zeros((2, 2)))


# -- shape and argument errors ------------------------------------------------------------------


@pytest.mark.parametrize(
    "q_shape, y_shape, mask_shape",
    [
        ((3, 2), (3, 3), (3, 2)),  # y differs
        ((3, 2), (3, 2), (2, 3)),  # mask differs
        ((3, 2), (2,), (3, 2)),  # y one-dimensional
        ((6,), (6,), (6,)),  # not [K, B]
        ((2, 3, 1), (2, 3, 1), (2, 3, 1)),  # not [K, B]
    ],
)
def test_critic_loss_shape_errors(q_shape, y_shape, mask_shape):
    with pytest.raises(ValueError):
        pbac_critic_loss(
            jp.zeros(q_shape), jp.zeros(y_shape), jp.ones(mask_shape), gamma=0.99, prior_variance=1.0
        )


def test_critic_loss_unknown_form():
    with pytest.raises(ValueError, match="form"):
        pbac_critic_loss(Q, Y, MASK, gamma=0.99, prior_variance=1.0, form="printed")
