"""`train.py bench-env`: MJX env throughput against the instance count, and against Gymnasium's
C MuJoCo env (envs/tools/benchmark.py measures it), as a JSON report."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from mjx_pbac import cli
from mjx_pbac.commands import _common
from mjx_pbac.config import Platform

SUMMARY = (
    "env throughput (MJX steps/s and compile time vs instance count, Gymnasium ratio), written as a "
    "JSON report naming the device."
)

PRESETS = {
    "quick": dict(env_names=("hopper",), num_envs=(1, 16), steps_per_call=10, repeats=2, gymnasium_steps=300),
    "cpu": dict(env_names=("ant", "hopper", "humanoid"), num_envs=(1, 64, 256), steps_per_call=10, repeats=2),
    "gpu": dict(
        env_names=("ant", "hopper", "humanoid"),
        num_envs=(1, 64, 256, 1024, 4096, 8192, 16384, 32768),
        steps_per_call=50,
        repeats=3,
        gymnasium_steps=2000,
    ),
}
"""The sizes of each --preset, as EnvBenchConfig fields."""


@dataclasses.dataclass(frozen=True)
class Args:
    """Measure env steps/s and compile time for a range of instance counts; write JSON."""

    preset: Literal["quick", "cpu", "gpu"] = "quick"
    """Starting point for the sizes below: quick (one env, seconds), cpu, or gpu (up to 32768)."""
    env: tuple[str, ...] = ()
    """Registered env names to time; empty keeps the preset's."""
    num_envs: tuple[int, ...] = ()
    """Instance counts; empty keeps the preset's."""
    steps_per_call: int | None = None
    """Env steps per jitted call; None keeps the preset's."""
    repeats: int | None = None
    """Timed calls per size (median reported); None keeps the preset's."""
    gymnasium_steps: int | None = None
    """Steps of Gymnasium's C MuJoCo env to time (0 skips it); None keeps the preset's."""
    set: tuple[str, ...] = ()
    """Env overrides KEY=VALUE for every env, e.g. --set integrator=euler iterations=2."""
    out: str = "bench_env.json"
    """Where the JSON report goes."""
    platform: Platform = "auto"
    """Where to measure, as the training command's --train.platform (gpu / tpu: an error, not a
    silent CPU measurement, when JAX has no such device)."""

    def bench_config_fields(self) -> dict[str, Any]:
        """The preset's EnvBenchConfig fields with the given sizes in place of its own."""
        given = {"env_names": self.env, "num_envs": self.num_envs, "steps_per_call": self.steps_per_call,
                 "repeats": self.repeats, "gymnasium_steps": self.gymnasium_steps}
        return {**PRESETS[self.preset], **{name: value for name, value in given.items() if value not in ((), None)}}


def main(argv: list[str]) -> None:
    """Times the envs `argv` names at its instance counts and writes the report."""
    import envs
    from envs.tools import benchmark

    args = cli.parse(Args, argv, f"{cli.program()} bench-env")
    _common.use_platform(args.platform, "--platform")
    try:
        config = benchmark.EnvBenchConfig(**args.bench_config_fields(), overrides=_common.parse_overrides(args.set))
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    for name in config.env_names:  # fail fast, before any compile, on a bad name or override
        try:
            envs.make(name, **dict(config.overrides))  # builds the model; compiles nothing
        except (ValueError, TypeError) as error:
            raise SystemExit(f"error: {error}") from None
    report = benchmark.run_benchmark(config, out=args.out)
    benchmark.write_report(report, args.out)
    print(f"wrote {args.out} ({report['device']['device_kind']})")
