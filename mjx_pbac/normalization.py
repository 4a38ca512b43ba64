"""Observation normalisation: running mean and variance of the training envs' observations, kept
on the device beside the training state (`TrainConfig.normalize_observations`; docs/design.md
"Recipe options beyond the paper").

Beyond the paper (whose networks see raw observations), as the fast off-policy recipes for
massively parallel simulation do (FastTD3's and Brax's SAC and PPO observation normalisers):
every vector step merges the N observations the agent acts on into the running moments (Chan et
al.'s parallel update), and the agent sees (obs - mean) / sqrt(var + EPSILON), clipped to
[-CLIP, CLIP]. The replay buffer keeps raw observations; a minibatch is normalised with the
moments of the moment it is drawn, so targets and inputs always share one normalisation.
Evaluation normalises with the moments as they are (it never updates them).

Shapes: `RunningMoments` holds `count` [] (float32, observations merged so far), `mean` and `var`
[obs] (the population variance). Starting from count 0, mean 0, var 1, the first merge takes the
batch's moments exactly.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
from flax import struct

EPSILON = 1e-8
"""Added to the variance under the square root (a constant feature divides by ~1e-4, not by 0)."""
CLIP = 10.0
"""Normalised observations are clipped to [-CLIP, CLIP] (as Stable-Baselines3's VecNormalize):
a state far outside what was seen so far cannot blow up the networks' inputs."""


@struct.dataclass
class RunningMoments:
    count: jax.Array
    """Observations merged so far (float32 scalar)."""
    mean: jax.Array
    """[obs] their mean."""
    var: jax.Array
    """[obs] their population variance (1 before the first merge)."""


def init(obs_size: int) -> RunningMoments:
    return RunningMoments(
        count=jp.zeros((), jp.float32), mean=jp.zeros((obs_size,), jp.float32), var=jp.ones((obs_size,), jp.float32)
    )


def update(moments: RunningMoments, obs: jax.Array) -> RunningMoments:
    """`moments` with the batch `obs` [N, obs] merged in (Chan, Golub and LeVeque's pairwise
    update: exact for the union of both sets, whatever their sizes)."""
    n = jp.asarray(obs.shape[0], jp.float32)
    batch_mean = jp.mean(obs, axis=0)
    batch_var = jp.var(obs, axis=0)
    total = moments.count + n
    delta = batch_mean - moments.mean
    mean = moments.mean + delta * (n / total)
    m2 = moments.var * moments.count + batch_var * n + jp.square(delta) * (moments.count * n / total)
    return RunningMoments(count=total, mean=mean, var=m2 / total)


def normalize(moments: RunningMoments | None, obs: jax.Array) -> jax.Array:
    """clip((obs - mean) / sqrt(var + EPSILON), -CLIP, CLIP); `obs` itself without moments (the
    option off)."""
    if moments is None:
        return obs
    return jp.clip((obs - moments.mean) * jax.lax.rsqrt(moments.var + EPSILON), -CLIP, CLIP)
