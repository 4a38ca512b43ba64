"""Name -> algorithm: the one place that knows which algorithms exist.

Each entry builds an `Algorithm` (its networks, losses and how it acts) from its config section
of `RunConfig`; the loop, buffer, evaluation, logging, checkpoints and sweeps are shared.
"""

from __future__ import annotations

from typing import Any

from mjx_pbac.algorithm import Algorithm
from mjx_pbac.config import RunConfig


def make_algorithm(config: RunConfig, obs_size: int, action_size: int, member_configs: list[Any] | None = None) -> Algorithm:
    """The selected algorithm (`config.algo`) with its section's hyperparameters; `member_configs`
    (each member's section, after sweeps and task overrides) decide what must be built for all
    of them, e.g. PBAC's prior networks when any member has prior_scale > 0."""
    return make(config.algo, config.algorithm_config, obs_size, action_size, member_configs)


def make(algo: str, algorithm_config: Any, obs_size: int, action_size: int, member_configs: list[Any] | None = None) -> Algorithm:
    if algo == "pbac":
        from mjx_pbac.pbac import make_pbac

        configs = member_configs or [algorithm_config]
        return make_pbac(algorithm_config, obs_size, action_size, prior_networks=any(c.prior_scale != 0 for c in configs))
    if algo == "sac":
        from mjx_pbac.sac import make_sac

        return make_sac(algorithm_config, obs_size, action_size)
    if algo == "bootdqn_p":
        from mjx_pbac.bootdqn_p import make_bootdqn_p

        return make_bootdqn_p(algorithm_config, obs_size, action_size)
    if algo == "drnd":
        from mjx_pbac.drnd import make_drnd

        return make_drnd(algorithm_config, obs_size, action_size)
    if algo == "ben":
        from mjx_pbac.ben import make_ben

        return make_ben(algorithm_config, obs_size, action_size)
    raise ValueError(f"unknown algorithm {algo!r}; valid: pbac, sac, bootdqn_p, drnd, ben")
