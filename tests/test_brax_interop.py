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
def test_brax_ppo_trains_a_few_iterations_on_ant_delayed():
    env = envs.make("ant_delayed")
    progress = []
    _, params, metrics = ppo.train(
        environment=env,
        num_timesteps=2 * 8 * 8,
        episode_length=16,
        num_envs=8,
        batch_size=8,
        num_minibatches=1,
        unroll_length=8,
        num_updates_per_batch=1,
        num_evals=1,
        run_evals=False,  # Brax's evaluator would compile a second Ant program (~1 min on 2 cores)
        seed=0,
        progress_fn=lambda step, m: progress.append((step, m)),
    )
    assert len(progress) == 1 and progress[0][0] >= 2 * 8 * 8
    losses = {name: value for name, value in metrics.items() if "loss" in name}
    assert losses, sorted(metrics)
    assert all(np.isfinite(value) for value in losses.values()), losses
    assert params is not None
