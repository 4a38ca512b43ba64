"""One env step's cost with MJX's quaternion math and the compact one: a jitted lax.scan of 50
auto-resetting steps of N instances, each form compiled in one process, then called in turn.

    python docs/evidence/data/compact-math/step_cost.py TASK N REPEATS OUT.json
"""

import json
import sys
import time

import jax
import numpy as np

import envs
from mjx_pbac.hlo import program_stats

STEPS = 50


def main(task: str, num_envs: int, repeats: int, out: str) -> None:
    forms = {}
    for math in ("mjx", "compact"):
        env = envs.make(task, math=math)
        batched = envs.wrap_for_training(env, num_envs)
        state = jax.jit(batched.reset)(jax.random.PRNGKey(0))
        actions = jax.random.uniform(jax.random.PRNGKey(1), (STEPS, num_envs, env.action_size), minval=-1, maxval=1)

        def roll(state, actions, batched=batched):
            return jax.lax.scan(lambda s, a: (batched.step(s, a), s.obs), state, actions)

        start = time.time()
        lowered = jax.jit(roll).lower(state, actions)
        lowered_at = time.time()
        program = lowered.compile()
        forms[math] = {
            "program": program, "lower_s": lowered_at - start, "compile_s": time.time() - lowered_at,
            "instructions": program_stats(program)["instructions"], "run_s": [],
        }
    for _ in range(repeats):
        for form in forms.values():
            start = time.time()
            jax.block_until_ready(form["program"](state, actions))
            form["run_s"].append(time.time() - start)
    report = {math: {key: value for key, value in form.items() if key != "program"} for math, form in forms.items()}
    for math, form in report.items():
        print(
            f"{task} {math}: lower {form['lower_s']:.1f} s, compile {form['compile_s']:.1f} s, {form['instructions']} instructions, "
            f"{STEPS} steps min {min(form['run_s']):.3f} s, median {float(np.median(form['run_s'])):.3f} s"
        )
    with open(out, "w") as handle:
        json.dump({"task": task, "num_envs": num_envs, "steps_per_call": STEPS, **report}, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
