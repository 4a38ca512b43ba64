"""Checks shared by every config section: run settings (`mjx_pbac.config`) and each algorithm's
hyperparameters (`mjx_pbac.algos`).

Every value is checked where its dataclass is built, so a value from the command line, a
profile, a config.json or a sweep is refused alike, with a one-line ValueError that names the
field, the value and what is valid: floats must be finite, ints at most 2**31 - 1 (they become
int32 seeds, shapes and counters on the device).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from typing import Any, Literal

INT32_MAX = 2**31 - 1
"""The largest seed, size or counter the device holds: seeds, shapes and step counters are int32."""


def require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def is_finite(value: int | float) -> bool:
    """math.isfinite, with an int too large for a float (10**400) counted as not finite."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def not_finite(name: str, value: Any) -> str:
    return f"{name} must be a finite number (not inf or nan), got {value}"


@functools.cache
def _number_fields(cls: type) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(float fields, int fields, tuple-of-int fields) of a config dataclass, by annotation."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    floats = tuple(name for name in names if hints[name] is float)
    ints = tuple(name for name in names if hints[name] is int)
    int_tuples = tuple(name for name in names if hints[name] == tuple[int, ...])
    return floats, ints, int_tuples


def check_numbers(config: Any) -> None:
    """Every float field of `config` is finite, and every int field (and every int of a tuple of
    ints, e.g. widths) at most 2**31 - 1: inf and nan arrive as easily from a TOML profile
    (`inf`, `nan`), a JSON config or an overflowing literal (`1e999`) as from code, and ints
    become int32 seeds, shapes and counters on the device. Called first by every section's
    `__post_init__`, so the range checks that follow never compare with a nan."""
    floats, ints, int_tuples = _number_fields(type(config))
    for name in floats:
        value = getattr(config, name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not is_finite(value):
            raise ValueError(not_finite(name, value))
    for name in ints:
        value = getattr(config, name)
        if isinstance(value, int) and value > INT32_MAX:
            raise ValueError(f"{name} must be <= 2**31 - 1 = {INT32_MAX} (an int32 on the device), got {value}")
    for name in int_tuples:
        values = getattr(config, name)
        if any(isinstance(v, int) and v > INT32_MAX for v in values):
            raise ValueError(f"{name} must hold values <= 2**31 - 1 = {INT32_MAX} (int32 shapes on the device), got {values}")


def check_actor_critic(config: Any) -> None:
    """The checks every actor-critic config shares: widths, discount, Polyak rate, weight decay,
    the hidden layers' normalisation."""
    widths = config.hidden_sizes
    require(len(widths) >= 1 and all(h >= 1 for h in widths), f"hidden_sizes must be positive widths, got {widths}")
    require(0.0 <= config.gamma < 1.0, f"gamma must lie in [0, 1), got {config.gamma}")
    require(0.0 < config.tau <= 1.0, f"tau must lie in (0, 1], got {config.tau}")
    require(0.0 <= config.weight_decay < 1.0, f"weight_decay must lie in [0, 1) (AdamW's decoupled decay per unit of learning rate), got {config.weight_decay}")
    check_choice(config, "layer_norm")


def check_positive(config: Any, *names: str) -> None:
    for name in names:
        require(getattr(config, name) > 0, f"{name} must be > 0, got {getattr(config, name)}")


def check_choice(config: Any, name: str) -> None:
    """A Literal field holds one of its choices."""
    choices = typing.get_args(typing.get_type_hints(type(config))[name])
    value = getattr(config, name)
    require(value in choices, f"{name} must be {' or '.join(repr(c) for c in choices)}, got {value!r}")


def coerce(key: str, value: Any, annotation: Any) -> Any:
    """`value` checked against a config field's annotation (bool, int, float, str, a Literal of
    choices, a tuple of one of those, or a union with None), an int widened to a float where a
    float is expected; a one-line ValueError or TypeError names `key`, the value and what is
    expected."""
    origin = typing.get_origin(annotation)
    if origin is Literal:
        if value not in typing.get_args(annotation):
            raise ValueError(f"{key}={value!r}: expected one of {list(typing.get_args(annotation))}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{key}={value!r}: expected a list")
        (item_type, _) = typing.get_args(annotation)
        return tuple(coerce(key, v, item_type) for v in value)
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    for option in options:
        if option is type(None) and value is None:
            return None
        if option is bool and isinstance(value, bool):
            return value
        if option is int and isinstance(value, int) and not isinstance(value, bool):
            return value  # sizes are bounded by each section's own check (`check_numbers`)
        if option is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            if not is_finite(value):
                raise ValueError(not_finite(key, value))
            return float(value)
        if option is str and isinstance(value, str):
            return value
    expected = " or ".join(getattr(o, "__name__", None) or str(o) for o in options)
    raise TypeError(f"{key}={value!r} has type {type(value).__name__}; expected {expected}")
