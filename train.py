"""mjx-pbac's one entry point: `python train.py COMMAND [options]` (`--help` on any command).

Commands:
  bench-env   env throughput (MJX steps/s and compile time vs instance count, Gymnasium ratio),
              written as a JSON report naming the device.

This is the only module that parses the command line; library code takes typed configs.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from typing import Any, Literal

import tyro


def parse_overrides(pairs: tuple[str, ...]) -> tuple[tuple[str, Any], ...]:
    """("integrator=euler", "iterations=2") -> (("integrator", "euler"), ("iterations", 2))."""
    parsed = []
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"error: malformed override {pair!r}: expected KEY=VALUE, e.g. integrator=euler")
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw  # a bare word is a string
        parsed.append((key.strip(), value))
    return tuple(parsed)


BENCH_PRESETS = {
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


@dataclasses.dataclass(frozen=True)
class BenchEnvArgs:
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


def bench_env(args: BenchEnvArgs) -> None:
    import envs
    from envs.benchmark import EnvBenchConfig, run_benchmark, write_report

    fields = dict(BENCH_PRESETS[args.preset])
    for name, value in [
        ("env_names", args.env),
        ("num_envs", args.num_envs),
        ("steps_per_call", args.steps_per_call),
        ("repeats", args.repeats),
        ("gymnasium_steps", args.gymnasium_steps),
    ]:
        if value not in ((), None):
            fields[name] = value
    try:
        config = EnvBenchConfig(**fields, overrides=parse_overrides(args.set))
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    for name in config.env_names:  # fail fast, before any compile, on a bad name or override
        try:
            envs.make(name, **dict(config.overrides))  # builds the model; compiles nothing
        except (ValueError, TypeError) as error:
            raise SystemExit(f"error: {error}") from None
    report = run_benchmark(config, out=args.out)
    write_report(report, args.out)
    print(f"wrote {args.out} ({report['device']['device_kind']})")


COMMANDS = {"bench-env": (BenchEnvArgs, bench_env)}


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        raise SystemExit(f"error: unknown command {command!r}; valid: {', '.join(COMMANDS)}")
    args_type, run = COMMANDS[command]
    run(tyro.cli(args_type, args=rest, prog=f"train.py {command}"))


if __name__ == "__main__":
    main(sys.argv[1:])
