"""Name -> environment: `make("ant_delayed", delay_threshold=1.0)`.

Each registered name is an env class plus the overrides that turn its default config into the
named task (the delay thresholds of the paper's Table 3). Overrides given to `make` are checked against the
config dataclass: an unknown key, a value of the wrong type, or a float that is not finite (inf,
nan) is an error that lists what is valid.

A parametric family (`register_family`) adds the names `<prefix><N>` for every integer N, e.g.
`deep_chain_30` for the deep chain with length 30.0: such a name resolves to an ordinary entry
(its preset sets one config field to float(N)), so `make`, `config_of` and `make_family` treat it
exactly as a registered name. `registered_names()` lists only the concrete names; `describe()`
and the unknown-name error also show each family as `<prefix><N>`.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from typing import Any, NamedTuple

from envs.base import Env


class EnvSpec(NamedTuple):
    env_class: type
    preset: dict[str, Any]
    description: str


class FamilySpec(NamedTuple):
    env_class: type
    field: str
    """The config field that the name's integer sets (as a float)."""
    placeholder: str
    """How `describe()` writes the integer, e.g. "L" in "deep_chain_<L>"."""
    preset: dict[str, Any]
    description: str
    """One line; `{value}` in it is replaced by the integer of a concrete name."""


_REGISTRY: dict[str, EnvSpec] = {}
_FAMILIES: dict[str, FamilySpec] = {}


def register(name: str, env_class: type, description: str, **preset: Any) -> None:
    """Adds `name`: `env_class(config)` with `preset` applied to `env_class.default_config()`."""
    if name in _REGISTRY:
        raise ValueError(f"environment {name!r} is already registered")
    _REGISTRY[name] = EnvSpec(env_class, dict(preset), description)


def register_family(
    prefix: str, env_class: type, field: str, description: str, placeholder: str = "N", **preset: Any
) -> None:
    """Adds the names `f"{prefix}{N}"` for every integer N >= 0 written in decimal without leading
    zeros: `env_class(config)` with `preset` and `field = float(N)` applied to its default config.

    E.g. `register_family("deep_chain_", DeepChain, "length", "...", placeholder="L")` makes
    `deep_chain_30` the deep chain with length 30.0. Whether N is a valid value is the config's
    to say (its `__post_init__` runs when the name is resolved by `config_of` or `make`).
    """
    if prefix in _FAMILIES:
        raise ValueError(f"environment family {prefix!r} is already registered")
    if field in preset:
        raise ValueError(f"the family's field {field!r} is set by the name; do not preset it")
    _FAMILIES[prefix] = FamilySpec(env_class, field, placeholder, dict(preset), description)


def registered_names() -> list[str]:
    """The concrete registered names (not the `<prefix><N>` names of parametric families)."""
    return sorted(_REGISTRY)


def _family_patterns() -> dict[str, FamilySpec]:
    """`"<prefix><placeholder>"` (e.g. "deep_chain_<L>") -> its family."""
    return {f"{prefix}<{family.placeholder}>": family for prefix, family in sorted(_FAMILIES.items())}


def describe() -> dict[str, str]:
    """Registered name -> one-line description; a parametric family as `"<prefix><N>"`."""
    described = {name: _REGISTRY[name].description for name in registered_names()}
    for pattern, family in _family_patterns().items():
        described[pattern] = family.description.replace("{value}", f"<{family.placeholder}>")
    return described


def _family_spec(name: str) -> EnvSpec | None:
    """The entry of `name` if it is `<prefix><N>` of a registered family, else None."""
    for prefix, family in _FAMILIES.items():
        digits = name[len(prefix):]
        if name.startswith(prefix) and digits.isascii() and digits.isdigit() and digits == str(int(digits)):
            try:
                value = float(int(digits))
            except OverflowError:
                raise ValueError(f"environment {name!r}: {family.placeholder} = {digits} is too large for a float") from None
            preset = {**family.preset, family.field: value}
            return EnvSpec(family.env_class, preset, family.description.replace("{value}", digits))
    return None


def _spec(name: str) -> EnvSpec:
    if name in _REGISTRY:
        return _REGISTRY[name]
    spec = _family_spec(name)
    if spec is None:
        patterns = _family_patterns()
        close = difflib.get_close_matches(name, [*_REGISTRY, *patterns], n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        families = "".join(
            f"; {pattern} for an integer {family.placeholder}" for pattern, family in patterns.items()
        )
        raise ValueError(
            f"unknown environment {name!r}{hint}; registered: {', '.join(registered_names())}{families}"
        )
    return spec


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
            if abs(value) > 2**31 - 1:
                raise ValueError(f"override {key}={value!r} must lie within int32 (|value| <= 2**31 - 1)")
            return value
        if option is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                finite = math.isfinite(value)
            except OverflowError:  # an int too large for a float
                finite = False
            if not finite:
                raise ValueError(f"override {key}={value!r} must be a finite number (not inf or nan)")
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
