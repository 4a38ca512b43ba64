"""Registry-wide checks: every registered env jits once, vmaps, has the right sizes, stays finite."""

import chex
import jax
import jax.numpy as jp
import numpy as np
import pytest

import envs

SIZES = {"ant": (27, 8), "hopper": (11, 3), "humanoid": (376, 17), "chain": (1, 1)}
NUM_ENVS = 64
# Delayed variants share physics and termination with the dense env (only the reward differs,
# and the reward is checked against Gymnasium in test_locomotion.py), so the expensive robots
# roll out 100 steps in the dense env and 20 in each variant: this keeps the suite in budget.
DENSE = {"ant", "hopper", "humanoid", "chain"}


def _rollout_fn(env, num_steps):
    batched = envs.wrap_for_training(env, NUM_ENVS)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def rollout(key):
        state = batched.reset(key)

        def body(state, step_key):
            action = jax.random.uniform(step_key, (NUM_ENVS, env.action_size), minval=-1, maxval=1)
            state = batched.step(state, action)
            finite = jp.all(jp.isfinite(state.obs)) & jp.all(jp.isfinite(state.reward))
            return state, (finite, state.done, state.info["truncation"])

        return jax.lax.scan(body, state, jax.random.split(key, num_steps))

    return rollout


@pytest.mark.parametrize("name", envs.registered_names())
def test_registered_env_jits_once_vmaps_and_stays_finite(name):
    chex.clear_trace_counter()
    env = envs.make(name)
    robot = name.split("_")[0]
    obs_size, action_size = SIZES[robot]
    assert env.observation_size == obs_size and env.action_size == action_size
    num_steps = 100 if (name in DENSE or robot == "hopper") else 20
    rollout = _rollout_fn(env, num_steps)
    state, (finite, done, truncation) = rollout(jax.random.PRNGKey(0))
    chex.assert_shape(state.obs, (NUM_ENVS, obs_size))
    chex.assert_shape(state.reward, (NUM_ENVS,))
    assert bool(np.all(finite))
    # A second call with another key reuses the compiled program (assert_max_traces would raise),
    # and nothing crosses between host and device inside it (the key is already on the device).
    key = jax.device_put(jax.random.PRNGKey(1))
    with jax.transfer_guard("disallow"):
        state2, _ = rollout(key)
    # (final_obs: the chain's 100-step horizon has just reset every instance to x = 0.)
    assert not np.allclose(np.asarray(state.info["final_obs"]), np.asarray(state2.info["final_obs"]))
    # Instances are independent: different reset noise and actions give different states.
    if env.config.reset_noise_scale > 0:
        assert len(np.unique(np.asarray(state.obs), axis=0)) == NUM_ENVS


def test_unknown_name_lists_registered():
    with pytest.raises(ValueError, match="unknown environment 'ant_delayd'.*did you mean ant_delayed.*registered: ant,"):
        envs.make("ant_delayd")


def test_unknown_override_lists_valid_keys():
    with pytest.raises(ValueError, match="unknown override.*delay.*valid: delay_threshold"):
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


def test_bad_physics_settings_are_named():
    with pytest.raises(ValueError, match="unknown integrator 'rk5'.*valid"):
        envs.make("hopper", integrator="rk5")
