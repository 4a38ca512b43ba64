"""What every algorithm shares (`mjx_pbac.algos.base`): posterior sampling's schedule and draws,
configs as pytrees (knobs traced, fixed fields static), stacking member configs, the interface
wrappers, and one gradient step."""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np
import pytest

from mjx_pbac.algos import drnd, pbac
from mjx_pbac.algos.base import (
    NO_ACTING,
    adam_state,
    gradient_step,
    knob_names,
    make_algorithm,
    polyak,
    posterior_sampling,
    redraw_heads,
    stack_configs,
    traced,
)

# -- posterior sampling ---------------------------------------------------------------------


def test_heads_redrawn_at_episode_start_and_every_psr_steps_per_instance():
    psr, num_heads = 3, 1000  # many heads: a redraw keeps the old head with probability 1e-3
    heads = jp.arange(4, dtype=jp.int32)
    # instance 0: mid-episode, counter 4 -> keep; 1: counter 6 (multiple of 3) -> redraw;
    # 2: episode_step 0 (new episode), counter 7 -> redraw; 3: mid-episode, counter 0 -> redraw.
    counter = jp.asarray([4, 6, 7, 0])
    episode_step = jp.asarray([2, 5, 0, 9])
    new = redraw_heads(jax.random.key(1), heads, counter, episode_step, num_heads, psr)
    assert int(new[0]) == 0
    assert int(new[1]) != 1 and int(new[2]) != 2 and int(new[3]) != 3
    assert len(set(np.asarray(new[1:]).tolist())) == 3  # each instance draws its own head


def test_head_schedule_over_time_follows_counter_not_episode():
    """Simulated over 12 steps of one instance with PSR 5 and an episode boundary at step 7:
    redraws at counters 0, 5, 10 and at the episode start (step 7), nowhere else."""
    psr, num_heads = 5, 10_000
    episode_step = [0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4]
    head = jp.asarray([-1], jp.int32)
    redraw_steps = []
    for t in range(12):
        new = redraw_heads(jax.random.key(t), head, jp.asarray([t]), jp.asarray([episode_step[t]]), num_heads, psr)
        if int(new[0]) != int(head[0]):
            redraw_steps.append(t)
        head = new
    assert redraw_steps == [0, 5, 7, 10]


def test_head_draws_are_uniform():
    draws = redraw_heads(jax.random.key(0), jp.zeros(50_000, jp.int32), jp.zeros(50_000, jp.int32), jp.ones(50_000, jp.int32), 10, 5)
    counts = np.bincount(np.asarray(draws), minlength=10)
    assert counts.min() > 4700 and counts.max() < 5300  # 5000 expected, sd ~67


def test_posterior_sampling_state_and_target_heads():
    """The acting rule PBAC uses: heads drawn in [0, K) at init, the counter advancing once per env
    step, and the head of the Bellman targets: the active head with one instance, one uniform draw
    per gradient step with many."""
    rule = posterior_sampling(num_heads=4, target_heads=True)
    config = pbac.Config(num_critics=4, posterior_sampling_rate=3)
    acting = rule.init(jax.random.key(0), traced(config), 1)
    assert acting.active_head.shape == (1,) and 0 <= int(acting.active_head[0]) < 4
    assert int(acting.posterior_sampling_rate) == 3 and acting.posterior_sampling_rate.dtype == jp.int32
    stepped = rule.step(acting, jp.asarray([5]), jax.random.key(1))
    assert int(stepped.sampling_counter[0]) == 1
    np.testing.assert_array_equal(rule.update_context(stepped, jax.random.key(2), 5), [int(stepped.active_head[0])] * 5)
    many = rule.init(jax.random.key(0), traced(config), 8)
    heads = np.asarray(rule.update_context(many, jax.random.key(3), 4000))
    assert heads.shape == (4000,) and set(heads.tolist()) == {0, 1, 2, 3}
    assert posterior_sampling(4, target_heads=False).update_context is None


# -- configs as pytrees ---------------------------------------------------------------------


def test_config_pytree_has_knobs_as_leaves_and_fixed_fields_static():
    config = pbac.Config(num_critics=3, tau=0.01, use_coherence=False)
    leaves, _treedef = jax.tree.flatten(config)
    assert len(leaves) == len(knob_names(pbac.Config)) == 13
    assert knob_names(pbac.Config)[:4] == ("gamma", "tau", "bootstrap_rate", "posterior_sampling_rate")
    as_traced = traced(config)
    assert as_traced.tau.dtype == jp.float32 and float(as_traced.tau) == np.float32(0.01)
    assert as_traced.posterior_sampling_rate.dtype == jp.int32
    assert float(as_traced.use_coherence) == 0.0  # booleans become 0/1 multipliers
    assert as_traced.num_critics == 3 and as_traced.hidden_sizes == config.hidden_sizes  # static
    # A choice knob becomes its number in the program (DRND's sign).
    assert float(traced(drnd.Config(sign="bonus")).sign) == 1.0 and float(traced(drnd.Config()).sign) == -1.0


def test_stack_configs_stacks_knobs_and_refuses_differing_fixed_fields():
    stacked = stack_configs([pbac.Config(bootstrap_rate=0.01), pbac.Config(bootstrap_rate=0.3)])
    np.testing.assert_allclose(stacked.bootstrap_rate, [0.01, 0.3])
    assert stacked.bootstrap_rate.shape == (2,) and stacked.num_critics == 10
    one = jax.tree.map(lambda leaf: leaf[1], stacked)
    assert float(one.bootstrap_rate) == np.float32(0.3)
    with pytest.raises(ValueError, match=r"num_critics differs between members \(10 vs 4\).*members may differ in: gamma, tau, "):
        stack_configs([pbac.Config(), pbac.Config(num_critics=4)])


def test_one_program_serves_every_knob_value():
    """A knob is traced: jitting on the config compiles once for any value."""
    calls = []

    @jax.jit
    def scaled(config):
        calls.append(1)
        return config.tau * 2.0

    for tau in (0.01, 0.02, 0.5):
        assert float(scaled(traced(pbac.Config(tau=tau)))) == pytest.approx(2 * tau)
    assert len(calls) == 1


# -- one gradient step ----------------------------------------------------------------------


def test_gradient_step_is_adam_with_the_learning_rate_in_its_state():
    """One step equals PyTorch's Adam written out: m = (1 - b1) g, v = (1 - b2) g^2, bias-corrected,
    p - lr m_hat / (sqrt(v_hat) + eps); the learning rate lives in the optimiser state."""
    params = {"w": jp.asarray([1.0, -2.0, 3.0])}
    state = adam_state(params, jp.float32(0.1))
    new, state, loss, aux = gradient_step(lambda p: (jp.sum(p["w"] ** 2), "aux"), params, state)
    g = 2 * np.asarray([1.0, -2.0, 3.0])
    m_hat = (1 - 0.9) * g / (1 - 0.9)
    v_hat = (1 - 0.999) * g**2 / (1 - 0.999)
    expected = np.asarray([1.0, -2.0, 3.0]) - 0.1 * m_hat / (np.sqrt(v_hat) + 1e-8)
    np.testing.assert_allclose(new["w"], expected, rtol=1e-6)
    assert float(loss) == 14.0 and aux == "aux"
    assert float(state.hyperparams["learning_rate"]) == pytest.approx(0.1)


def test_polyak_moves_targets_by_tau():
    target, online = {"w": jp.asarray([0.0, 10.0])}, {"w": jp.asarray([1.0, 0.0])}
    np.testing.assert_allclose(polyak(target, online, 0.25)["w"], [0.25, 7.5])


# -- the interface --------------------------------------------------------------------------


def test_make_algorithm_gives_stateless_algorithms_the_loops_signature():
    seen = {}

    def act(agent, obs, key):
        seen["act"] = (agent, obs)
        return obs

    def update(agent, batch, key):
        seen["update"] = (agent, batch)
        return agent, {}

    algorithm = make_algorithm(init=None, act=act, eval_act=None, update=update)
    assert algorithm.acting is NO_ACTING and algorithm.acting.init(None, None, 3) is None
    assert algorithm.act("agent", None, "obs", "key") == "obs" and seen["act"] == ("agent", "obs")
    algorithm.update("agent", "batch", "key", None)
    assert seen["update"] == ("agent", "batch")
    assert algorithm.critic_values is None and algorithm.head_actions is None


def test_make_algorithm_hands_the_acting_state_and_the_update_context_only_where_the_rule_has_them():
    """With an acting rule, act receives the acting state; an update context reaches update only
    when the rule makes one (PBAC's target head), and is dropped otherwise (BootDQN-P)."""
    seen = {}

    def act(agent, acting, obs, key):
        seen["act"] = (agent, acting, obs)
        return obs

    def update_with_context(agent, batch, key, context):
        seen["update"] = (agent, batch, context)
        return agent, {}

    def update_without(agent, batch, key):
        seen["update"] = (agent, batch)
        return agent, {}

    with_heads = posterior_sampling(num_heads=3, target_heads=True)
    algorithm = make_algorithm(init=None, act=act, eval_act=None, update=update_with_context, acting=with_heads)
    assert algorithm.acting is with_heads
    assert algorithm.act("agent", "acting", "obs", "key") == "obs" and seen["act"] == ("agent", "acting", "obs")
    algorithm.update("agent", "batch", "key", 2)
    assert seen["update"] == ("agent", "batch", 2)

    no_heads = posterior_sampling(num_heads=3, target_heads=False)
    algorithm = make_algorithm(init=None, act=act, eval_act=None, update=update_without, acting=no_heads)
    algorithm.act("agent", "acting", "obs", "key")
    assert seen["act"] == ("agent", "acting", "obs")
    algorithm.update("agent", "batch", "key", None)
    assert seen["update"] == ("agent", "batch")
