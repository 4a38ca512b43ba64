"""How PBAC's per-instance posterior sampling behaves with many instances (docs/evidence/posterior-sampling.md).

Takes one trained member of a finished run (its newest checkpoint) and rolls its policy out as
training acts (`algorithm.acting`: each instance follows one head, redrawn at episode starts and
every PSR of its steps; actions sampled from that head) for one episode of N instances, for each
N given; before that, each head alone (no redraws) and the evaluation policy (the mean over heads)
on 256 instances. Reports per N: the instances' returns, each head's share of the instance-steps
(overall and at any one step) and its reward per step, how long an instance stays on one head,
and the time per vector step.

    python benchmarks/posterior_sampling_scale.py runs/fast_cpu/pbac_cartpole_swingup_sparse \
        --member 0 --num-envs 64 1024 4096 --out docs/evidence/data/posterior-sampling/posterior_sampling_cpu.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import jax.numpy as jp
import numpy as np

from mjx_pbac import checkpoint, rundir, stats
from mjx_pbac.build import build
from mjx_pbac.devices import device_description


def _agent(run_dir: Path, member: int):
    config, _ = rundir.load_run_config(run_dir)
    built = build(config, donate=False)
    template = built.init_state()
    found = checkpoint.restore_newest(run_dir / rundir.CHECKPOINTS, built.layout.host_template(template))
    if found is None:
        raise SystemExit(f"error: {run_dir} has no usable checkpoint")
    host, metadata, path = found
    if not 0 <= member < len(built.members):  # an index past the end would be clamped, silently
        raise SystemExit(f"error: --member {member}: the run has members 0..{len(built.members) - 1}")
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
    def write() -> None:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")

    key = jax.random.key(args.seed)
    # What each head does alone (no redraws) and the evaluation policy, on 256 instances: a
    # head's policy does not depend on how many instances follow it.
    alone = []
    for head in range(heads):
        rollout = jax.jit(lambda key, h=head: _rollout(env, algorithm, agent, 256, key, h)[0])
        alone.append(_summary(np.asarray(rollout(jax.random.fold_in(key, 2 + head)))))
    greedy = jax.jit(lambda key: _rollout(env, algorithm, agent, 256, key, 0, greedy=True)[0])
    report["each_head_alone_256"] = alone
    report["evaluation_policy_256"] = _summary(np.asarray(greedy(jax.random.fold_in(key, 99))))
    print(
        f"each head alone (256 instances, no redraws): return IQM {' '.join(str(round(h['iqm'])) for h in alone)}; "
        f"evaluation policy (mean over heads) IQM {report['evaluation_policy_256']['iqm']:.0f}",
        flush=True,
    )
    write()
    for num_envs in args.num_envs:
        sampled = jax.jit(lambda key, n=num_envs: _rollout(env, algorithm, agent, n, key, None))
        sampled.lower(key).compile()
        tick = time.perf_counter()
        returns, active, rewards = jax.block_until_ready(sampled(jax.random.fold_in(key, 1)))
        seconds = time.perf_counter() - tick
        returns, active, rewards = np.asarray(returns), np.asarray(active), np.asarray(rewards)
        share = np.bincount(active.ravel(), minlength=heads) / active.size
        per_step = np.stack([np.bincount(a, minlength=heads) for a in active]) / num_envs  # [T, K]
        reward_per_step = [float(rewards[active == k].mean()) if (active == k).any() else None for k in range(heads)]
        switches = (active[1:] != active[:-1]).sum(axis=0)  # per instance, over the episode
        row = {
            "num_envs": num_envs,
            "posterior_sampling": _summary(returns),
            "head_share": share.tolist(),
            "head_share_per_step_range": [float(per_step.min()), float(per_step.max())],
            "head_reward_per_step": reward_per_step,
            "steps_per_head_segment": float(active.shape[0] / (switches.mean() + 1)),
            "seconds_per_vector_step": seconds / env.episode_length,
        }
        report["rows"].append(row)
        print(
            f"N = {num_envs:5d}: posterior sampling return IQM {row['posterior_sampling']['iqm']:.0f} "
            f"(rewarded {100 * row['posterior_sampling']['rewarded']:.0f} %); each head's share of the instance-steps "
            f"{' '.join(f'{x:.3f}' for x in share)} (at any one step {row['head_share_per_step_range'][0]:.3f}-"
            f"{row['head_share_per_step_range'][1]:.3f}); reward per step by head "
            f"{' '.join(f'{x:.3f}' for x in reward_per_step)}; {row['steps_per_head_segment']:.1f} steps per head segment; "
            f"{1e3 * row['seconds_per_vector_step']:.2f} ms per vector step",
            flush=True,
        )
        write()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
