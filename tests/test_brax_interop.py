"""Brax's own PPO trainer accepts our envs unchanged (its wrappers: vmap, episode, auto-reset)."""

import jax
import numpy as np
import pytest
from brax.training.agents.ppo import train as ppo

import envs


@pytest.fixture(autouse=True)
def device_put_replicated_shim(monkeypatch):
    """Brax 0.14.2's trainers still call `jax.device_put_replicated`, which JAX 0.10 removed.

    The shim is the drop-in replacement from JAX's pmap migration guide (stack one copy per
    device, then `device_put`); it touches Brax's calls only, never our envs.
    """
    if "device_put_replicated" in dir(jax):
        return

    def device_put_replicated(value, devices):
        stacked = jax.tree.map(lambda x: np.stack([np.asarray(x)] * len(devices)), value)
        return jax.device_put(stacked, devices[0]) if len(devices) == 1 else jax.device_put(
            stacked, jax.sharding.PositionalSharding(devices)
        )

    monkeypatch.setattr(jax, "device_put_replicated", device_put_replicated, raising=False)


@pytest.mark.slow
def test_brax_ppo_trains_a_few_iterations_on_our_env():
    """Two PPO iterations (one gradient step each) on our MJX cartpole swing-up: Brax's wrappers
    step it, its losses are finite, its gradient steps change the policy and value networks, and
    the trained policy maps an observation of our env to an action of our env's size in [-1, 1].
    Every env shares the Brax API (`envs.base`); cartpole is the cheapest MJX env to compile."""
    env = envs.make("cartpole_swingup_sparse")
    progress, snapshots = [], []
    make_policy, params, metrics = ppo.train(
        environment=env,
        num_timesteps=2 * 8 * 8,
        episode_length=16,
        num_envs=8,
        batch_size=8,
        num_minibatches=1,
        unroll_length=8,
        num_updates_per_batch=1,
        num_evals=1,
        run_evals=False,  # Brax's evaluator would compile a second physics program
        seed=0,
        progress_fn=lambda step, m: progress.append((step, m)),
        policy_params_fn=lambda step, make, p: snapshots.append((step, jax.device_get(p))),
    )
    assert len(progress) == 1 and progress[0][0] >= 2 * 8 * 8
    losses = {name: value for name, value in metrics.items() if "loss" in name}
    assert losses, sorted(metrics)
    assert all(np.isfinite(value) for value in losses.values()), losses
    # (normalizer, policy, value) parameters: finite, and the policy and value networks trained.
    assert [step for step, _ in snapshots] == [0, progress[0][0]]
    initial = snapshots[0][1]
    _, policy_params, value_params = params
    for name, trained, before in (("policy", policy_params, initial[1]), ("value", value_params, initial[2])):
        leaves, initial_leaves = jax.tree.leaves(trained), jax.tree.leaves(before)
        assert leaves and [x.shape for x in leaves] == [x.shape for x in initial_leaves], name
        assert all(np.all(np.isfinite(x)) for x in leaves), name
        assert any(not np.array_equal(x, y) for x, y in zip(leaves, initial_leaves)), f"{name} did not change"
    # The policy's first layer reads our observation; its last gives a mean and a scale per action.
    kernels = [x for x in jax.tree.leaves(policy_params) if x.ndim == 2]
    assert kernels[0].shape[0] == env.observation_size and kernels[-1].shape[1] == 2 * env.action_size
    policy = make_policy(params, deterministic=True)
    obs = env.reset(jax.random.key(1)).obs
    action, _ = policy(obs, jax.random.key(2))
    assert action.shape == (env.action_size,) and np.all(np.isfinite(action)) and np.all(np.abs(action) <= 1.0)
