"""Replay on the device: a fixed-size FIFO ring of transitions with uniform sampling.

Inserting N transitions writes them at `position .. position + N - 1` (mod capacity) and
overwrites the oldest when full; nothing is shifted, every array keeps its shape, so the buffer
lives inside jitted code and its memory can be donated from one chunk to the next.

Terminated and truncated are stored separately, with the real final observation as `next_obs`,
so learners bootstrap on 1 - terminated only (docs/design.md "Training defaults").
"""

from __future__ import annotations

import jax
import jax.numpy as jp
from flax import struct


@struct.dataclass
class Transition:
    """One transition, or a batch of them along a leading axis."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    next_obs: jax.Array
    terminated: jax.Array
    truncated: jax.Array


@struct.dataclass
class ReplayBuffer:
    data: Transition
    """Every field with leading axis `capacity`."""
    position: jax.Array
    """Where the next transition goes (int32)."""
    size: jax.Array
    """Transitions stored so far, at most `capacity` (int32)."""

    @property
    def capacity(self) -> int:
        return self.data.reward.shape[0]


def init(capacity: int, obs_size: int, action_size: int) -> ReplayBuffer:
    def zeros(*shape):
        return jp.zeros((capacity, *shape), jp.float32)

    data = Transition(
        obs=zeros(obs_size),
        action=zeros(action_size),
        reward=zeros(),
        next_obs=zeros(obs_size),
        terminated=zeros(),
        truncated=zeros(),
    )
    return ReplayBuffer(data=data, position=jp.zeros((), jp.int32), size=jp.zeros((), jp.int32))


def insert(buffer: ReplayBuffer, batch: Transition) -> ReplayBuffer:
    """Writes the N transitions of `batch` (leading axis N <= capacity) at the ring position."""
    capacity = buffer.capacity
    count = batch.reward.shape[0]
    if count > capacity:
        raise ValueError(f"cannot insert {count} transitions into a buffer of capacity {capacity}")
    index = (buffer.position + jp.arange(count)) % capacity
    data = jax.tree.map(lambda stored, new: stored.at[index].set(new.astype(stored.dtype)), buffer.data, batch)
    return buffer.replace(
        data=data,
        position=(buffer.position + count) % capacity,
        size=jp.minimum(buffer.size + count, capacity),
    )


def sample(buffer: ReplayBuffer, key: jax.Array, batch_size: int) -> Transition:
    """`batch_size` transitions drawn uniformly with replacement from the stored ones."""
    index = jax.random.randint(key, (batch_size,), 0, jp.maximum(buffer.size, 1))
    return jax.tree.map(lambda stored: stored[index], buffer.data)
