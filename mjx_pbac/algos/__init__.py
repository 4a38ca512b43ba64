"""The algorithms, one self-contained module each, and the registry that names them.

An algorithm module defines
- `Config`: its hyperparameters, an `@base.algorithm_config` dataclass whose `knob(...)` fields
  may differ between the members of one program (they are what `--sweep` can vary) and whose
  other fields are fixed (sizes, forms; part of the compiled program);
- `make(config, obs_size, action_size) -> base.Algorithm`: its networks, losses, acting and
  update. `config` may be one member's config or all members' stacked (`base.stack_configs`),
  so that build decisions can look at every member (PBAC builds prior networks when any member
  has prior_scale != 0).

Adding an algorithm is one file here plus its name in `NAMES`; the run config then has a section
for it (`[NAME]` in profiles, `--NAME.FIELD` on the command line) and `--algo NAME` trains it.
"""

from __future__ import annotations

import difflib
import importlib
from types import ModuleType
from typing import Any

from mjx_pbac.algos.base import Algorithm, knob_names, stack_configs

NAMES = ("pbac", "sac", "bootdqn_p", "drnd", "ben", "td3")
"""Registered algorithms, in the order help texts and reports list them."""

ALGORITHMS: dict[str, ModuleType] = {name: importlib.import_module(f"mjx_pbac.algos.{name}") for name in NAMES}


def module(name: str) -> ModuleType:
    """The module of algorithm `name`; a ValueError lists the valid names."""
    if name not in ALGORITHMS:
        close = difflib.get_close_matches(name, NAMES, n=2)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ValueError(f"unknown algorithm {name!r}{hint}; valid: {', '.join(NAMES)}")
    return ALGORITHMS[name]


def sweepable(name: str) -> tuple[str, ...]:
    """The fields of algorithm `name` that members of one program may differ in (its knobs)."""
    return knob_names(module(name).Config)


def make(name: str, member_configs: list[Any], obs_size: int, action_size: int) -> Algorithm:
    """Algorithm `name` built for members with these configs (they must agree in every fixed field)."""
    return module(name).make(stack_configs(list(member_configs)), obs_size, action_size)


__all__ = ["ALGORITHMS", "NAMES", "Algorithm", "make", "module", "sweepable"]
