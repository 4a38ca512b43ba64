"""Name -> environment: `make("ant_delayed", delay_threshold=1.0)`.

Each registered name is an env class plus the overrides that turn its default config into the
named task (the delay thresholds of SPEC 1.1). Overrides given to `make` are checked against the
config dataclass: an unknown key, or a value of the wrong type, is an error that lists what is
valid.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from typing import Any, NamedTuple

from envs.base import Env


class EnvSpec(NamedTuple):
    env_class: type
    preset: dict[str, Any]
    description: str


_REGISTRY: dict[str, EnvSpec] = {}


def register(name: str, env_class: type, description: str, **preset: Any) -> None:
    """Adds `name`: `env_class(config)` with `preset` applied to `env_class.default_config()`."""
    if name in _REGISTRY:
        raise ValueError(f"environment {name!r} is already registered")
    _REGISTRY[name] = EnvSpec(env_class, dict(preset), description)


def registered_names() -> list[str]:
    return sorted(_REGISTRY)


def describe() -> dict[str, str]:
    """Registered name -> one-line description."""
    return {name: _REGISTRY[name].description for name in registered_names()}


def _spec(name: str) -> EnvSpec:
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, _REGISTRY, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ValueError(
            f"unknown environment {name!r}{hint}; registered: {', '.join(registered_names())}"
        )
    return _REGISTRY[name]


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation)


def _coerce(key: str, value: Any, annotation: Any) -> Any:
    """`value` checked (and int -> float widened) against a config field's annotation."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    for option in options:
        if option is type(None) and value is None:
            return None
        if option is bool and isinstance(value, bool):
            return value
        if option is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if option is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if option is str and isinstance(value, str):
            return value
    expected = " or ".join(_type_name(o) for o in options)
    raise TypeError(f"override {key}={value!r} has type {type(value).__name__}; expected {expected}")


def config_of(name: str, **overrides: Any) -> Any:
    """The resolved config dataclass of `name` with `overrides` applied and type-checked."""
    spec = _spec(name)
    config = spec.env_class.default_config()
    hints = typing.get_type_hints(type(config))
    valid = [field.name for field in dataclasses.fields(config)]
    unknown = sorted(set(overrides) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown override(s) {', '.join(unknown)} for environment {name!r}; "
            f"valid: {', '.join(valid)}"
        )
    merged = {**spec.preset, **overrides}
    checked = {key: _coerce(key, value, hints[key]) for key, value in merged.items()}
    return dataclasses.replace(config, **checked)


def make(name: str, **overrides: Any) -> Env:
    """A fresh, unwrapped instance of the registered env `name`.

    Overrides are fields of its config (e.g. `delay_threshold`, `action_cost_weight`,
    `integrator`); see `config_of(name)` for the defaults.
    """
    return _spec(name).env_class(config_of(name, **overrides))


def make_family(names: list[str] | tuple[str, ...], **overrides: Any) -> tuple[Env, list[Any]]:
    """One env that simulates every task in `names`, and each task's constants: the tasks of one
    robot (e.g. ant, ant_delayed, ant_very_delayed) as members of one compiled program.

    The tasks must be the same env class with the same config except its `TASK_FIELDS` (reward
    constants, carried per member as `env.task_params()` and applied by `env.with_task`); the
    error names any other difference. Envs without task constants give None per task.
    """
    names = list(names)
    built = [make(name, **overrides) for name in names]
    first = built[0]
    task_fields = getattr(type(getattr(first, "config", None)), "TASK_FIELDS", ())
    for name, env in zip(names[1:], built[1:]):
        if type(env) is not type(first):
            raise ValueError(
                f"tasks {names[0]!r} and {name!r} cannot share one program: they are different envs "
                f"({type(first).__name__}, {type(env).__name__}); train them in separate runs"
            )
        differing = [
            field.name
            for field in dataclasses.fields(first.config)
            if field.name not in task_fields and getattr(first.config, field.name) != getattr(env.config, field.name)
        ]
        if differing or not task_fields:
            what = ", ".join(differing) if differing else "its config"
            raise ValueError(
                f"tasks {names[0]!r} and {name!r} cannot share one program: they differ in {what}, "
                f"which is not a per-member task constant ({', '.join(task_fields) or 'none for this env'})"
            )
    return first, [env.task_params() if task_fields else None for env in built]
