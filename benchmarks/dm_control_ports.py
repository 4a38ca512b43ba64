"""Our MJX ports of DM Control's three sparse tasks against MuJoCo Playground's (impl="jax"):
fidelity to DM Control and throughput on this device, written as JSON.

Fidelity: from the same starting states (a DM Control random rollout's states and states around
each reward region, `envs.tools.dm_control_fidelity`), one env step with the same action in DM Control
(C MuJoCo, `task.get_observation` / `get_reward`) and in each port; reported: max |observation
difference| and the fraction of steps whose reward differs. Throughput: env steps/s of the
jitted, vmapped step (a `lax.scan` of `--steps-per-call` steps, median of `--repeats` calls) and
the compile time, per instance count.

Playground is not a dependency of mjx-pbac; to run this, put it on the path, e.g.

    pip install --target .playground --no-deps "playground<1.0" ml_collections etils mediapy tqdm
    PYTHONPATH=.playground python benchmarks/dm_control_ports.py --out docs/evidence/data/dm-control/dm_control_ports_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import jax
import jax.numpy as jp
import numpy as np
from mujoco import mjx

import envs
from envs.tools.dm_control_fidelity import States, dm_rollout, flat_observation, make_dm_env, near_reward_states, set_dm_state

PLAYGROUND_NAMES = {
    "cartpole_swingup_sparse": "CartpoleSwingupSparse",
    "ball_in_cup_catch": "BallInCup",
    "reacher_hard": "ReacherHard",
}


def starting_states(name: str, count: int) -> States:
    rollout = dm_rollout(name, count, seed=0).states
    near = near_reward_states(name, count, seed=1)
    target = None if rollout.target is None else np.concatenate([rollout.target, near.target])
    return States(np.concatenate([rollout.qpos, near.qpos]), np.concatenate([rollout.qvel, near.qvel]), target)


def dm_next(name: str, states: States, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """DM Control's observation and reward one control step after each state."""
    env = make_dm_env(name)
    env.reset()
    substeps = round(env.control_timestep() / env.physics.model.opt.timestep)
    observations, rewards = [], []
    for i in range(len(states.qpos)):
        set_dm_state(env.physics, states, i)
        env.physics.set_control(actions[i])
        for _ in range(substeps):
            env.physics.step()
        observations.append(flat_observation(env.task.get_observation(env.physics)))
        rewards.append(float(env.task.get_reward(env.physics)))
    return np.array(observations), np.array(rewards)


# Playground's model files change the physics for speed: cartpole Euler instead of RK4, every
# task 1 solver iteration and 4-6 line-search iterations instead of 100 and 50 (and reacher a
# 0.005 s step). "ours_fast" is our port with the same solver shortcuts as env overrides.
FAST = {
    "cartpole_swingup_sparse": dict(integrator="euler", iterations=1, ls_iterations=4),
    "ball_in_cup_catch": dict(iterations=1, ls_iterations=4),
    "reacher_hard": dict(iterations=1, ls_iterations=6),
}


def make_ours(name: str, fast: bool = False):
    return envs.make(name, **(FAST[name] if fast else {}))


def ours_next(name: str, states: States, actions: np.ndarray, fast: bool = False):
    env = make_ours(name, fast)

    @jax.jit
    @jax.vmap
    def step(qpos, qvel, target, action):
        info = {} if target is None else {"target": target}
        state = env.reset(jax.random.PRNGKey(0))
        state = state.replace(pipeline_state=env.data_from_state(qpos, qvel), info=info)
        state = env.step(state, action)
        return state.obs, state.reward

    target = None if states.target is None else jp.asarray(states.target, jp.float32)
    obs, reward = step(jp.asarray(states.qpos, jp.float32), jp.asarray(states.qvel, jp.float32), target, jp.asarray(actions, jp.float32))
    return np.asarray(obs), np.asarray(reward)


def playground_env(name: str):
    from mujoco_playground import registry

    return registry.load(PLAYGROUND_NAMES[name], config_overrides={"impl": "jax"})


def playground_next(name: str, states: States, actions: np.ndarray):
    env = playground_env(name)
    template = env.reset(jax.random.PRNGKey(0))

    @jax.jit
    @jax.vmap
    def step(qpos, qvel, target, action):
        data = template.data.replace(qpos=qpos, qvel=qvel)
        if target is not None:
            mocap = env._target_mocap_body_id  # private: Playground keeps reacher's target in a mocap body
            data = data.replace(mocap_pos=data.mocap_pos.at[mocap, :2].set(target))
        data = mjx.forward(env.mjx_model, data)
        state = env.step(template.replace(data=data), action)
        return state.obs, state.reward

    target = None if states.target is None else jp.asarray(states.target, jp.float32)
    obs, reward = step(jp.asarray(states.qpos, jp.float32), jp.asarray(states.qvel, jp.float32), target, jp.asarray(actions, jp.float32))
    return np.asarray(obs), np.asarray(reward)


def throughput(reset, step, action_size: int, num_envs: int, steps_per_call: int, repeats: int) -> dict:
    reset = jax.jit(jax.vmap(reset))
    batched_step = jax.vmap(step)

    @jax.jit
    def run(state, key):
        def body(state, key):
            action = jax.random.uniform(key, (num_envs, action_size), minval=-1.0, maxval=1.0)
            return batched_step(state, action), None

        return jax.lax.scan(body, state, jax.random.split(key, steps_per_call))[0]

    state = reset(jax.random.split(jax.random.PRNGKey(0), num_envs))
    tick = time.perf_counter()
    state = jax.block_until_ready(run(state, jax.random.PRNGKey(1)))
    compile_s = time.perf_counter() - tick
    seconds = []
    for i in range(repeats):
        tick = time.perf_counter()
        state = jax.block_until_ready(run(state, jax.random.PRNGKey(2 + i)))
        seconds.append(time.perf_counter() - tick)
    return {"num_envs": num_envs, "env_steps_per_s": num_envs * steps_per_call / float(np.median(seconds)), "compile_s": compile_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", nargs="*", default=list(PLAYGROUND_NAMES))
    parser.add_argument("--num-envs", type=int, nargs="*", default=[1, 256])
    parser.add_argument("--steps-per-call", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--states", type=int, default=200, help="rollout states and near-reward states each")
    parser.add_argument("--ports", nargs="*", default=["ours", "ours_fast", "playground"])
    parser.add_argument("--out", default="dm_control_ports.json")
    parser.add_argument("--append", action="store_true", help="add these tasks to an existing --out report")
    args = parser.parse_args()

    device = jax.devices()[0]
    if args.append and os.path.exists(args.out):
        with open(args.out) as handle:
            report = json.load(handle)
    else:
        report = {
            "device": {"platform": device.platform, "device_kind": device.device_kind, "jax": jax.__version__},
            "host": {"machine": platform.machine()},
            "tasks": {},
        }
    for name in args.env:
        states = starting_states(name, args.states)
        actions = np.random.default_rng(2).uniform(-1.0, 1.0, (len(states.qpos), envs.make(name).action_size))
        expected_obs, expected_reward = dm_next(name, states, actions)
        row = {}
        ports = {
            "ours": (ours_next, lambda: make_ours(name)),  # noqa: B023 - called in this iteration
            "ours_fast": (lambda *a: ours_next(*a, fast=True), lambda: make_ours(name, fast=True)),  # noqa: B023 - called in this iteration
            "playground": (playground_next, lambda: playground_env(name)),  # noqa: B023 - called in this iteration
        }
        for port in args.ports:
            next_fn, make = ports[port]
            try:
                obs, reward = next_fn(name, states, actions)
            except Exception as error:  # noqa: BLE001 - e.g. a Playground task that no longer builds on this mujoco
                row[port] = {"error": f"{type(error).__name__}: {error}"}
                print(name, port, row[port], flush=True)
                continue
            fidelity = {
                "obs_shape_matches": obs.shape == expected_obs.shape,
                "obs_max_abs_error": float(np.max(np.abs(obs - expected_obs))) if obs.shape == expected_obs.shape else None,
                "reward_mismatch_fraction": float(np.mean(reward != expected_reward)),
                "dm_control_reward_mean": float(expected_reward.mean()),
            }
            env = make()
            speed = [
                throughput(env.reset, env.step, env.action_size, n, args.steps_per_call, args.repeats) for n in args.num_envs
            ]
            row[port] = {"fidelity": fidelity, "throughput": speed}
            print(name, port, fidelity, [(s["num_envs"], round(s["env_steps_per_s"]), round(s["compile_s"], 1)) for s in speed], flush=True)
        report["tasks"][name] = row
        with open(args.out, "w") as handle:
            json.dump(report, handle, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
