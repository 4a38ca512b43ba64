"""How much an ensemble disagrees in ways that can change behaviour.

`critic_q_spread` (the std over critics of Q at the batch's actions, from each critic loss) mixes
two things: disagreement about *which action is better* and per-critic constant offsets. An offset
c_k added to every action's value of critic k spreads the ensemble but leaves each critic's
preferred action, and so a posterior-sampled policy, unchanged. The measures here remove it.

For a state s, two actions a1, a2 drawn uniformly from [-1, 1]^A (the same pair for every
critic), critics Q_1..Q_C and actor heads pi_1..pi_H:

    gap_k(s)          = Q_k(s, a1) - Q_k(s, a2)              (offsets cancel)
    gap_spread(s)     = std_k gap_k(s)                         (same units as Q)
    vote_spread(s)    = std_k sign(gap_k(s))                   in [0, 1]: 0 when all critics prefer
                                                               the same action of the pair, 1 when
                                                               they split evenly (2 sqrt(p (1 - p))
                                                               with p the share preferring a1)
    q_spread(s)       = std_k Q_k(s, a1)                       (offsets included, for comparison)
    action_spread(s)  = mean over action dims of std_h pi_h(s) (0 for a single actor)

Standard deviations are population ones (ddof 0). `ensemble_disagreement` returns them per state
(for plots against position); `disagreement_metrics` averages them over a batch of states (what
the loop logs once per training chunk, as `critic_gap_spread`, `critic_vote_spread`,
`critic_pair_q_spread` and `head_action_spread`).
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_pbac.algos.base import AgentState, Algorithm

METRIC_NAMES = {
    "gap_spread": "critic_gap_spread",
    "vote_spread": "critic_vote_spread",
    "q_spread": "critic_pair_q_spread",
    "action_spread": "head_action_spread",
}
"""Per-state measure -> the name of its batch mean in metrics.jsonl and TensorBoard."""


def spreads(q1: jax.Array, q2: jax.Array, head_actions: jax.Array) -> dict[str, jax.Array]:
    """The measures from Q_k(s, a1) and Q_k(s, a2), each [C, B], and head actions [H, B, A];
    every result is [B]."""
    gap = q1 - q2
    return {
        "gap_spread": jp.std(gap, axis=0),
        "vote_spread": jp.std(jp.sign(gap), axis=0),
        "q_spread": jp.std(q1, axis=0),
        "action_spread": jp.mean(jp.std(head_actions, axis=0), axis=-1),
    }


def ensemble_disagreement(algorithm: Algorithm, state: AgentState, obs: jax.Array, key: jax.Array) -> dict[str, jax.Array]:
    """Per-state measures (see the module docstring) at obs [B, o], each [B]; one random action
    pair per state, drawn from `key`. Empty for an algorithm without `critic_values`."""
    if algorithm.critic_values is None or algorithm.head_actions is None:
        return {}
    heads = algorithm.head_actions(state, obs)
    pair = jax.random.uniform(key, (2, *heads.shape[1:]), minval=-1.0, maxval=1.0)
    q1 = algorithm.critic_values(state, obs, pair[0])
    q2 = algorithm.critic_values(state, obs, pair[1])
    return spreads(q1, q2, heads)


def disagreement_metrics(algorithm: Algorithm, state: AgentState, obs: jax.Array, key: jax.Array) -> dict[str, jax.Array]:
    """Batch means of `ensemble_disagreement`, under their metric names."""
    per_state = ensemble_disagreement(algorithm, state, obs, key)
    return {METRIC_NAMES[name]: jp.mean(value) for name, value in per_state.items()}
