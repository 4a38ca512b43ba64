"""Registry-wide checks: every registered env jits once, vmaps, has the right sizes, stays finite."""

import chex
import jax
import jax.numpy as jp
import numpy as np
import pytest

import envs

SIZES = {
    "ant": (27, 8), "hopper": (11, 3), "humanoid": (376, 17), "chain": (1, 1), "deep": (65, 1),
    "cartpole": (5, 1), "ball": (8, 2), "reacher": (6, 2),
}
NUM_ENVS = 16
NUM_STEPS = 100
# The Meta-World tasks (`mw_*`) are seven robots, not one robot's reward variants, and a compiled
# 16-instance rollout of each takes minutes here: tests/test_metaworld.py traces all seven and
# compiles one.
FAMILIES = sorted({name.split("_")[0] for name in envs.registered_names()} - {"mw"})


def _family(robot):
    """The registered names of one robot: its base env first, then its reward variants."""
    names = [n for n in envs.registered_names() if n.split("_")[0] == robot]
    base = min(names, key=len)  # "ant" for the Ant family; the one name of a DM Control task
    return [base] + [n for n in names if n != base]


def _chunk_fn(env, variants):
    """50 random steps of 16 auto-resetting instances of `env`, as one jitted program.

    Each variant's reward and termination are evaluated on the same transitions (where the
    episode did not just end, since then `pipeline_state` is already the next episode's).
    """
    batched = envs.wrap_for_training(env, NUM_ENVS)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def chunk(state, key):
        def body(state, step_key):
            action = jax.random.uniform(step_key, (NUM_ENVS, env.action_size), minval=-1, maxval=1)
            prev_data = state.pipeline_state
            state = batched.step(state, action)
            carried_on = (state.done == 0) & (state.info["truncation"] == 0)
            finite = jp.all(jp.isfinite(state.obs)) & jp.all(jp.isfinite(state.reward))
            for variant in variants:
                reward = jax.vmap(variant.reward)(prev_data, state.pipeline_state, action)
                finite &= jp.all(jp.where(carried_on, jp.isfinite(reward), True))
                same_end = jax.vmap(variant.terminated)(state.pipeline_state) == (state.done > 0)
                finite &= jp.all(jp.where(carried_on, same_end, True))
            return state, (finite, carried_on)

        return jax.lax.scan(body, state, jax.random.split(key, NUM_STEPS // 2))

    return jax.jit(batched.reset), chunk


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.parametrize("robot", FAMILIES)
def test_registered_envs_jit_once_vmap_and_stay_finite(robot):
    """Every registered env: jits, vmaps over 16 instances, right sizes, finite for 100 steps.

    A robot's reward variants (`ant_delayed`, ...) are the same program as its base env with
    other reward constants: same class, same physics settings, same sizes (asserted), so one
    compiled 100-step rollout of the base env carries all of them, each variant's reward and
    termination evaluated on its transitions. (Tracing each variant's own step as well took
    5-20 CPU seconds per variant and checked nothing more: the step is the class's.)
    """
    chex.clear_trace_counter()
    base_name, *variant_names = _family(robot)
    env = envs.make(base_name)
    variants = [envs.make(name) for name in variant_names]
    obs_size, action_size = SIZES[robot]
    key = jax.random.PRNGKey(0)
    for name, candidate in zip([base_name] + variant_names, [env] + variants):
        assert type(candidate) is type(env), name
        if hasattr(env.config, "physics"):
            assert candidate.config.physics == env.config.physics, name
        assert candidate.observation_size == obs_size and candidate.action_size == action_size, name

    # 100 steps as two 50-step calls of one program: the second call must reuse it
    # (assert_max_traces would raise) and move nothing between host and device.
    reset, chunk = _chunk_fn(env, variants)
    state0 = reset(key)
    state1, (finite1, carried_on) = chunk(state0, jax.random.PRNGKey(1))
    key2 = jax.device_put(jax.random.PRNGKey(2))
    with jax.transfer_guard("disallow"):
        state, (finite2, _) = chunk(state1, key2)
    chex.assert_shape([state0.obs, state.obs, state.info["final_obs"]], (NUM_ENVS, obs_size))
    chex.assert_shape([state.reward, state.done, state.info["truncation"]], (NUM_ENVS,))
    assert bool(np.all(finite1)) and bool(np.all(finite2))
    assert float(np.mean(carried_on)) > 0.9  # the variants were checked on most transitions
    assert not np.allclose(np.asarray(state1.info["final_obs"]), np.asarray(state.info["final_obs"]))
    # Instances are independent: different reset noise and actions give different states.
    if getattr(env.config, "reset_noise_scale", 1.0) > 0:
        assert len(np.unique(np.asarray(state.obs), axis=0)) == NUM_ENVS


def test_unknown_name_lists_registered():
    with pytest.raises(ValueError, match=r"unknown environment 'ant_delayd'.*did you mean ant_delayed.*registered: ant,"):
        envs.make("ant_delayd")


def test_unknown_override_lists_valid_keys():
    with pytest.raises(ValueError, match=r"unknown override.*delay.*valid: delay_threshold"):
        envs.make("ant", delay=1.0)


@pytest.mark.parametrize(
    "override", [{"delay_threshold": "1"}, {"episode_length": 1.5}, {"terminate_when_unhealthy": 1}]
)
def test_wrong_override_type_is_named(override):
    key = next(iter(override))
    with pytest.raises(TypeError, match=f"override {key}="):
        envs.make("hopper", **override)


def test_overrides_reach_the_config_and_widen_ints():
    env = envs.make("humanoid", delay_threshold=1, action_cost_weight=0.2)
    assert env.config.delay_threshold == 1.0 and isinstance(env.config.delay_threshold, float)
    assert env.config.action_cost_weight == 0.2
    assert envs.config_of("humanoid_very_delayed").delay_threshold == 1.0
    assert envs.config_of("ant_very_delayed").delay_threshold == 2.0
    assert envs.config_of("hopper_delayed").action_cost_weight == 0.001


@pytest.mark.parametrize(
    "override, message",
    [
        ({"integrator": "rk5"}, "unknown integrator 'rk5'.*valid"),
        ({"solver": "pgs"}, "unknown solver 'pgs'.*valid"),
        ({"iterations": 0}, "iterations must be >= 1"),
        ({"episode_length": 0}, "episode_length must be >= 1"),
        ({"reset_noise_scale": -0.1}, "reset_noise_scale must be >= 0"),
    ],
)
def test_bad_values_are_named_before_any_model_is_built(override, message):
    with pytest.raises(ValueError, match=message):
        envs.config_of("hopper", **override)
    with pytest.raises(ValueError, match=message):
        envs.make("hopper", **override)
