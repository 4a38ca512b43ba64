"""The device replay ring (`mjx_pbac.replay`): wrap-around, uniform sampling of stored rows only,
capacity."""

from __future__ import annotations

import chex
import jax
import numpy as np
import pytest

from mjx_pbac import replay
from tests.probe_envs import value_batch


def test_replay_ring_wraps_around_without_shifting():
    buffer = replay.init(capacity=5, obs_size=2, action_size=1)
    buffer = replay.insert(buffer, value_batch([1, 2, 3]))
    assert int(buffer.position) == 3 and int(buffer.size) == 3
    buffer = replay.insert(buffer, value_batch([4, 5, 6]))
    # 6 overwrote the oldest (1) in slot 0; the others did not move.
    np.testing.assert_array_equal(buffer.data.reward, [6, 2, 3, 4, 5])
    assert int(buffer.position) == 1 and int(buffer.size) == 5
    buffer = replay.insert(buffer, value_batch([7, 8, 9, 10]))
    np.testing.assert_array_equal(buffer.data.reward, [6, 7, 8, 9, 10])
    assert int(buffer.position) == 0 and int(buffer.size) == 5
    np.testing.assert_array_equal(buffer.data.next_obs[:, 0], buffer.data.reward + 0.5)
    np.testing.assert_array_equal(buffer.data.truncated, 1.0)
    np.testing.assert_array_equal(buffer.data.terminated, 0.0)


def test_replay_samples_uniformly_from_stored_transitions_only():
    buffer = replay.init(capacity=100, obs_size=2, action_size=1)
    buffer = replay.insert(buffer, value_batch([1, 2, 3, 4]))
    batch = replay.sample(buffer, jax.random.key(0), 4000)
    chex.assert_shape(batch.obs, (4000, 2))
    values, counts = np.unique(np.asarray(batch.reward), return_counts=True)
    np.testing.assert_array_equal(values, [1, 2, 3, 4])  # never an empty slot (reward 0)
    assert counts.min() > 850 and counts.max() < 1150  # 1000 expected each, sd ~27
    np.testing.assert_array_equal(batch.action[:, 0], batch.reward)  # rows stay together


def test_replay_refuses_more_than_capacity():
    with pytest.raises(ValueError, match="capacity 2"):
        replay.insert(replay.init(2, 2, 1), value_batch([1, 2, 3]))
