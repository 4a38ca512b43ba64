"""How PBAC's per-instance posterior sampling behaves with many instances (README "Fast training").

Takes one trained member of a finished run (its newest checkpoint) and rolls its policy out as
training acts (`algorithm.acting`: each instance follows one head, redrawn at episode starts and
every PSR of its steps; actions sampled from that head) for one episode of N instances, for each
N given; beside it, each head alone on N instances (no redraws) and the evaluation policy (the
mean over heads). Reports per N: the instances' returns, each head's share of the instance-steps
and its reward per step, how long an instance stays on one head, and the time per vector step.

    python benchmarks/posterior_sampling_scale.py runs/fast_cpu/pbac_cartpole_swingup_sparse \
        --member 0 --num-envs 16 256 4096 --out docs/fast/posterior_sampling_cpu.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import jax.numpy as jp
import numpy as np

from mjx_pbac import checkpoint, runner, stats
from mjx_pbac.runner import device_description


def _agent(run_dir: Path, member: int):
    config, _ = runner.load_run_config(run_dir)
    built = runner.build(config, donate=False)
    template = built.init_state()
    found = checkpoint.restore_newest(run_dir / "checkpoints", built.layout.host_template(template))
    if found is None:
        raise SystemExit(f"error: {run_dir} has no usable checkpoint")
    host, metadata, path = found
    state = built.layout.restore(host, like=template)
    agent = jax.tree.map(lambda leaf: leaf[member], state.agent)
    return config, built, agent, path, int(metadata["chunk"]) * built.trainer.schedule.chunk_env_steps


def _rollout(env, algorithm, agent, num_envs: int, key: jax.Array, head: int | None, greedy: bool = False):
    """One episode of `num_envs` instances: returns [N], heads [T, N] and rewards [T, N]."""
    reset_key, acting_key, key = jax.random.split(key, 3)
    states = jax.vmap(env.reset)(jax.random.split(reset_key, num_envs))
    acting = algorithm.acting.init(acting_key, agent.config, num_envs)
    if head is not None:  # one head throughout: no redraw ever fires again
        acting = acting.replace(active_head=jp.full((num_envs,), head, jp.int32), posterior_sampling_rate=jp.asarray(2**30, jp.int32))

    def step(carry, step_key):
        states, acting, t = carry
        draw_key, action_key = jax.random.split(step_key)
        if head is None:
            acting = algorithm.acting.step(acting, jp.full((num_envs,), t, jp.int32), draw_key)
        else:
            acting = acting.replace(sampling_counter=acting.sampling_counter + 1)
        if greedy:
            action = algorithm.eval_act(agent, states.obs)
        else:
            action = algorithm.act(agent, acting, states.obs, action_key)
        states = jax.vmap(env.step)(states, action)
        return (states, acting, t + 1), (acting.active_head, states.reward)

    keys = jax.random.split(key, env.episode_length)
    _, (heads, rewards) = jax.lax.scan(step, (states, acting, jp.zeros((), jp.int32)), keys)
    return rewards.sum(axis=0), heads, rewards


def _summary(returns: np.ndarray) -> dict:
    middle, lower, upper = stats.iqm(returns)
    return {"mean": float(returns.mean()), "iqm": middle, "q25": lower, "q75": upper, "rewarded": float((returns > 0).mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--member", type=int, default=0)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[16, 256, 4096])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="posterior_sampling.json")
    args = parser.parse_args()

    config, built, agent, path, env_steps = _agent(args.run_dir, args.member)
    env, algorithm = built.env, built.algorithm
    heads = int(config.algorithm_config.num_critics)
    report = {
        "run_dir": str(args.run_dir), "checkpoint": path.name, "env_steps": env_steps, "member": args.member,
        "task": config.train.env, "num_heads": heads, "posterior_sampling_rate": int(config.algorithm_config.posterior_sampling_rate),
        "device": device_description(), "rows": [],
    }
    for num_envs in args.num_envs:
        key = jax.random.key(args.seed)
        sampled = jax.jit(lambda key, n=num_envs: _rollout(env, algorithm, agent, n, key, None))
        jax.block_until_ready(sampled(key))  # compile
        tick = time.perf_counter()
        returns, active, rewards = jax.block_until_ready(sampled(jax.random.fold_in(key, 1)))
        seconds = time.perf_counter() - tick
        returns, active, rewards = np.asarray(returns), np.asarray(active), np.asarray(rewards)
        share = np.bincount(active.ravel(), minlength=heads) / active.size
        reward_per_step = [float(rewards[active == k].mean()) if (active == k).any() else None for k in range(heads)]
        switches = (active[1:] != active[:-1]).sum(axis=0)  # per instance, over the episode
        row = {
            "num_envs": num_envs,
            "posterior_sampling": _summary(returns),
            "head_share": share.tolist(),
            "head_reward_per_step": reward_per_step,
            "steps_per_head_segment": float(active.shape[0] / (switches.mean() + 1)),
            "seconds_per_vector_step": seconds / env.episode_length,
            "each_head_alone": [],
        }
        for head in range(heads):
            alone = jax.jit(lambda key, n=num_envs, h=head: _rollout(env, algorithm, agent, n, key, h)[0])
            row["each_head_alone"].append(_summary(np.asarray(alone(jax.random.fold_in(key, 2 + head)))))
        greedy = jax.jit(lambda key, n=num_envs: _rollout(env, algorithm, agent, n, key, 0, greedy=True)[0])
        row["evaluation_policy"] = _summary(np.asarray(greedy(jax.random.fold_in(key, 99))))
        report["rows"].append(row)
        alone_iqms = " ".join(f"{h['iqm']:.0f}" for h in row["each_head_alone"])
        print(
            f"N = {num_envs:5d}: posterior sampling return IQM {row['posterior_sampling']['iqm']:.0f} "
            f"(rewarded {100 * row['posterior_sampling']['rewarded']:.0f} %), head shares "
            f"{' '.join(f'{s:.3f}' for s in share)}, {row['steps_per_head_segment']:.1f} steps per head segment; "
            f"heads alone IQM {alone_iqms}; "
            f"evaluation policy IQM {row['evaluation_policy']['iqm']:.0f}; {1e3 * row['seconds_per_vector_step']:.2f} ms per vector step",
            flush=True,
        )
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
