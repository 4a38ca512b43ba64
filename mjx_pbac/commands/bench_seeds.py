"""`train.py bench-seeds --profile NAME`: N seeds as one vmapped program against N sequential
runs, sharded over 1, 2, ... devices (mjx_pbac/profiling.py measures it), as a JSON report."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import tyro

from mjx_pbac.commands import _common
from mjx_pbac.config import RunConfig

SUMMARY = (
    "N seeds as one vmapped program against N sequential runs, sharded over 1, 2, ... devices "
    "(time, speed-ups, device footprint), JSON report."
)


@dataclasses.dataclass(frozen=True)
class Args:
    """N seeds as one vmapped program against N sequential runs, sharded over 1, 2, ... D devices:
    time per chunk, speed-ups and device footprint for each N and D; JSON report naming the device."""

    run: Annotated[RunConfig, tyro.conf.arg(name="")]
    seed_counts: tuple[int, ...] = (1, 2, 4, 8, 10)
    """Numbers of seeds N to measure (1 is always measured: it gives the sequential time)."""
    device_counts: Annotated[tuple[int, ...], tyro.conf.arg(help_behavior_hint="(default: 1 2 4 ... every visible device)")] = ()
    """Numbers of devices D to shard each N over (1 is always measured)."""
    measure_steps: int = 0
    """Env steps per timed chunk (rounded up to whole vector steps); 0 picks 20 vector steps."""
    timed_chunks: int = 3
    """Chunks timed per N after an untimed one (the median is reported)."""
    out: str = "bench_seeds.json"
    """Where the JSON report goes."""


def main(argv: list[str]) -> None:
    """Measures the profile `argv` names at each seed and device count, prints a line per
    measurement and writes the report."""
    import jax

    from mjx_pbac.profiling import ProfileSettings, device_counts_up_to, measure_seed_scaling

    profile, args = _common.measurement(Args, "bench-seeds", argv)
    if not args.seed_counts or min(args.seed_counts) < 1:
        raise SystemExit(f"error: seed counts must be >= 1, got {args.seed_counts}")
    available = jax.device_count()
    device_counts = args.device_counts or device_counts_up_to(available)
    if min(device_counts) < 1 or max(device_counts) > available:
        raise SystemExit(f"error: device counts must lie in [1, {available}] ({available} visible), got {device_counts}")
    _common.check_memory(dataclasses.replace(args.run, train=dataclasses.replace(args.run.train, num_seeds=max(args.seed_counts), devices=1)))
    try:
        settings = ProfileSettings(measure_steps=args.measure_steps, timed_chunks=args.timed_chunks)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    report = measure_seed_scaling(args.run, profile, args.seed_counts, settings, out=args.out, device_counts=device_counts)
    for row in report["rows"]:
        spread = f" on {row['devices_used']} device{'s' if row['devices_used'] != 1 else ''}"
        print(
            f"{row['seeds']:3d} seeds{spread}: {row['vmapped_seconds_per_chunk']:.3f} s/chunk vs "
            f"{row['sequential_seconds_per_chunk']:.3f} s sequential ({row['speedup_vs_sequential']:.2f}x), "
            f"{row['speedup_vs_one_device']:.2f}x one device, "
            f"compile {row['compile_s']:.1f} s, program {row['program_bytes'] or 0:,} bytes"
        )
    print(f"wrote {args.out} ({report['device']['device_kind']})")
