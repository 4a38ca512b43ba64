"""What one env step costs in a compiled program, per task and solver setting (CPU or GPU).

For each env: one auto-resetting instance (the paper's one-env-per-seed setting) stepped 20 times
with uniform random actions in one jitted `lax.scan`, compiled and read with
`mjx_pbac.hlo.program_stats` (loops with a data-dependent trip count, branches, executed ops per
env step: about one kernel launch each on a GPU) and timed (median of 3 calls). Variants:

- `default`: the env's defaults (fixed-trip solve, 4 solver / 2 line-search iterations);
- `ls8`: 8 line-search iterations (the earlier default), fixed-trip solve: MJX's while loop run
  at its cap, so its op count is the earlier default's worst case;
- `while_ls8`: MJX's own while-loop solve with 8 line-search iterations (the earlier default;
  its op count counts each data-dependent loop's body once, a lower bound);
- `no_reset`: the default env step without the auto-reset wrapper (what the reset costs).

    python benchmarks/env_ops.py --out docs/evidence/data/throughput/env_ops_cpu.json [--envs ant hopper ...]

The report is rewritten after every measurement.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax

import envs
from mjx_pbac.devices import device_description
from mjx_pbac.hlo import program_stats

VARIANTS = {
    "default": ({}, True),
    "ls8": ({"ls_iterations": 8}, True),
    "while_ls8": ({"ls_iterations": 8, "solver_loop": "while"}, True),
    "no_reset": ({}, False),
}
STEPS = 20


def measure(name: str, overrides: dict, wrapped: bool) -> dict:
    env = envs.make(name, **overrides)
    batched = envs.wrap_for_training(env, 1) if wrapped else envs.BatchedEnv(env, 1)

    def rollout(state, key):
        def step(state, step_key):
            action = jax.random.uniform(step_key, (1, env.action_size), minval=-1.0, maxval=1.0)
            return batched.step(state, action), None

        return jax.lax.scan(step, state, jax.random.split(key, STEPS))[0]

    state = jax.jit(batched.reset)(jax.random.PRNGKey(0))
    tick = time.perf_counter()
    compiled = jax.jit(rollout).lower(state, jax.random.PRNGKey(1)).compile()
    compile_s = time.perf_counter() - tick
    state = jax.block_until_ready(compiled(state, jax.random.PRNGKey(1)))
    seconds = []
    for i in range(3):
        tick = time.perf_counter()
        state = jax.block_until_ready(compiled(state, jax.random.PRNGKey(2 + i)))
        seconds.append(time.perf_counter() - tick)
    stats = program_stats(compiled)
    return {
        "executed_ops_per_step": stats["executed_ops"] / STEPS,
        "data_dependent_loops": stats["data_dependent_loops"],
        "conditionals": stats["conditionals"],
        "ms_per_step": 1e3 * statistics.median(seconds) / STEPS,
        "compile_s": compile_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["ant", "hopper", "humanoid", "cartpole_swingup_sparse", "ball_in_cup_catch", "reacher_hard"])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--out", default="env_ops.json")
    args = parser.parse_args()
    report = {"device": device_description(), "steps_per_call": STEPS, "instances": 1, "rows": []}
    for name in args.envs:
        for variant in args.variants:
            overrides, wrapped = VARIANTS[variant]
            row = {"env": name, "variant": variant, **measure(name, overrides, wrapped)}
            report["rows"].append(row)
            print(json.dumps(row), flush=True)
            Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
