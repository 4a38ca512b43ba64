"""Run by tests/test_devices.py in a process of its own with 4 CPU devices
(XLA_FLAGS=--xla_force_host_platform_device_count=4, which must be set before JAX starts, so
not in the test session): trains the same chain members on one device and sharded over four,
and writes what the tests check as JSON to argv[1].

    python tests/sharded_programs.py OUT.json
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import sys
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mjx_pbac import compilation_cache, config as run_config
from mjx_pbac.build import build
from mjx_pbac.hlo import program_stats

COLLECTIVES = re.compile(r"\b(all-gather|all-reduce|all-to-all|collective-permute|reduce-scatter)(-start)?\(")


def chain(seeds: int, devices: int, seed: int = 0) -> run_config.RunConfig:
    config = run_config.load_profile("chain")
    train = dataclasses.replace(
        config.train, seed=seed, num_seeds=seeds, devices=devices, total_steps=400, warmup_steps=100, chunk_steps=100,
        eval_interval=400, eval_episodes=2, checkpoint_interval=400, batch_size=32, buffer_size=400,
    )
    return dataclasses.replace(config, train=train)


def trained(config: run_config.RunConfig, chunks: int = 2):
    """(built, state after a warm-up chunk and `chunks` training chunks, last metrics, evaluation)."""
    built = build(config)
    state, _ = built.trainer.warmup_chunk(built.init_state())
    for _ in range(chunks):
        state, metrics = built.trainer.train_chunk(state)
    return built, state, metrics, built.trainer.evaluate(state)


def compare(a, b) -> dict:
    """Leaves of two host trees: how many are bit-identical, and the largest difference relative
    to the value's size (|a - b| / max(|b|, 1))."""
    left, right = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(left) == len(right)
    relative = [
        float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)) / np.maximum(np.abs(y.astype(np.float64)), 1.0)))
        if x.size else 0.0
        for x, y in zip(left, right)
    ]
    return {"leaves": len(left), "identical": sum(d == 0.0 for d in relative), "max_relative_difference": max(relative)}


def main(out: str) -> None:
    compilation_cache.enable()
    report: dict = {"device_count": jax.device_count()}
    # The one-device reference: 8 members in one program, of which 4, 6 or 8 are compared (a
    # member's training depends on its own seed only, test_sweeps.py), so one program serves all three.
    one = trained(chain(8, devices=1))
    reference = one[0].layout.gather(one[1:])
    for seeds in (4, 6, 8):
        four = trained(chain(seeds, devices=4))
        hosts = [jax.tree.map(lambda leaf, n=seeds: leaf[:n], reference), four[0].layout.gather(four[1:])]
        row = {
            "layout": [one[0].layout.devices, four[0].layout.devices, four[0].layout.padded, four[0].layout.describe()],
            "state": compare(hosts[0][0], hosts[1][0]),
            "metrics": compare(hosts[0][1], hosts[1][1]),
            "evaluation": compare(hosts[0][2], hosts[1][2]),
            "gathered_members": int(jax.tree.leaves(hosts[1][0])[0].shape[0]),
        }
        report[f"members_{seeds}"] = row

    # The 8-member state over 4 devices: how each array lies, and device 1's members against the
    # same two members trained alone on one device (the sharded program is the one-device program).
    built, state, _metrics, _ = trained(chain(8, devices=4))
    layouts = []
    for leaf in jax.tree.leaves(state):
        shards = leaf.addressable_shards
        layouts.append({
            "spec": str(leaf.sharding.spec),
            "devices": len({shard.device.id for shard in shards}),
            "members_per_shard": sorted({shard.data.shape[0] for shard in shards}),
        })
    report["shardings"] = layouts
    alone = trained(chain(2, devices=1, seed=2))
    pair = jax.tree.map(lambda leaf: leaf[2:4], built.layout.gather(state))
    report["device_1_vs_alone"] = compare(pair, alone[0].layout.gather(alone[1]))

    # Nothing crosses to the host inside a chunk, nothing is traced or compiled again (JAX logs
    # each compile when jax_log_compiles is on), no branch, no loop on data, no collective (the
    # members never talk).
    built.trainer.evaluate(state)
    compiles = []
    handler = logging.Handler()
    handler.emit = lambda record: compiles.append(record.getMessage()) if record.getMessage().startswith("Compiling") else None
    logging.getLogger("jax").addHandler(handler)
    jax.config.update("jax_log_compiles", True)
    with jax.transfer_guard("disallow"):
        for _ in range(3):
            state, _metrics = built.trainer.train_chunk(state)
        built.trainer.evaluate(state)
    jax.config.update("jax_log_compiles", False)
    logging.getLogger("jax").removeHandler(handler)
    compiled = built.trainer.train_chunk.lower(state).compile()
    stats = program_stats(compiled)
    report["train_chunk"] = {
        "compiles_in_steady_state": len(compiles),
        "data_dependent_loops": stats["data_dependent_loops"] - built.trainer.any_length,  # beyond the chunk's own
        "conditionals": stats["conditionals"] - built.trainer.any_length,
        "collectives": sorted({m.group(1) for m in COLLECTIVES.finditer(compiled.as_text())}),
    }

    # A checkpoint's members restored onto another layout (one device) and onto the same (four):
    # the same layout continues bit for bit, another to float32 rounding.
    saved = built.layout.gather(state)
    continued, _ = built.trainer.train_chunk(built.layout.restore(saved, like=state))
    reference, _ = built.trainer.train_chunk(state)
    single = build(chain(8, devices=1))
    template = single.init_state()
    elsewhere, _ = single.trainer.train_chunk(single.layout.restore(saved, like=template))
    report["resume_same_layout"] = compare(built.layout.gather(continued), built.layout.gather(reference))
    report["resume_one_device"] = compare(single.layout.gather(elsewhere), built.layout.gather(reference))

    # bench-seeds across devices: a row per (seeds, devices), each with its speed-ups.
    from mjx_pbac.profiling import ProfileSettings, measure_seed_scaling

    scaling = measure_seed_scaling(chain(1, devices=1), "chain", (2,), ProfileSettings(measure_steps=20, timed_chunks=1), device_counts=(1, 2))
    report["bench_seeds"] = [
        {key: row[key] for key in ("seeds", "devices", "devices_used", "padded_members", "speedup_vs_one_device", "vmapped_seconds_per_chunk")}
        for row in scaling["rows"]
    ]
    Path(out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
