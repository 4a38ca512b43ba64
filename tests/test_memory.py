"""The memory estimate of a run and the check that refuses what cannot fit (`mjx_pbac.memory`):
the state's size is exact, huge settings are refused at once, without allocating, with a message
that names the part to blame, and the working-set estimates bound what XLA really uses."""

from __future__ import annotations

import dataclasses
import json
import resource

import jax
import numpy as np
import pytest

from mjx_pbac import build as build_module, checkpoint, config as config_module, loop, memory
from mjx_pbac.build import build
from mjx_pbac.config import config_to_dict, expand_members, load_profile

CHAIN = load_profile("chain")
GiB = 2**30

TRANSITION_BYTES = (1 + 1 + 1 + 1 + 1 + 1) * 4
"""The chain's transition in the replay buffer: obs (1), action (1), reward, next_obs (1),
terminated, truncated, all float32."""


def _config(algo: str = "pbac", section: dict | None = None, **train) -> config_module.RunConfig:
    config = dataclasses.replace(CHAIN, algo=algo, train=dataclasses.replace(CHAIN.train, **train))
    if section:
        config = dataclasses.replace(config, **{algo: dataclasses.replace(getattr(config, algo), **section)})
    return config


def _real_bytes(state) -> int:
    """Bytes of a really initialised state: every leaf's nbytes, a PRNG key's key data."""
    total = 0
    for leaf in jax.tree.leaves(state):
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        total += int(leaf.nbytes)
    return total


@pytest.mark.parametrize(
    "train, members",
    [
        ({}, 1),
        ({"num_seeds": 3}, 3),
        # prior_scale 0 in the profile: the sweep's nonzero values make PBAC build prior networks,
        # which the estimate's member configs must see.
        ({"sweep": ("prior_scale=0.0,0.5,1.0",)}, 3),
    ],
)
def test_state_bytes_are_exact(train, members):
    config = _config(**train)
    estimate = memory.estimate(config)
    state = build(config, donate=False).init_state()
    assert estimate.members == members
    assert estimate.state_bytes == _real_bytes(state) == members * estimate.state_bytes_per_member
    assert estimate.buffer_bytes == _real_bytes(state.buffer) == members * (CHAIN.train.buffer_size * TRANSITION_BYTES + 8)
    assert estimate.agent_bytes == _real_bytes(state.agent)
    assert estimate.env_bytes == _real_bytes(state.env_state)
    assert estimate.buffer_bytes + estimate.agent_bytes + estimate.env_bytes + estimate.other_bytes == estimate.state_bytes
    assert estimate.checkpoint_host_bytes == estimate.state_bytes


def test_kept_policies_of_a_batched_evaluation_are_counted():
    """eval_batch P keeps P copies of each member's agent on the device (exactly: the room
    `Trainer.init_snapshots` allocates), and evaluates P points' episodes at once."""
    one, batched = memory.estimate(_config(num_seeds=2)), memory.estimate(_config(num_seeds=2, eval_batch=4))
    built = build(_config(num_seeds=2, eval_batch=4), donate=False)
    room = built.trainer.init_snapshots(built.init_state())
    assert _real_bytes(room.agent) == 4 * one.agent_bytes
    parts = {part.name: part for part in batched.parts}
    assert parts["kept policies"].bytes == 4 * one.agent_bytes and "train.eval_batch" in parts["kept policies"].options
    assert batched.eval_bytes == 4 * one.eval_bytes
    assert batched.total_device_bytes >= one.total_device_bytes + 4 * one.agent_bytes
    assert "kept policies" not in {part.name for part in one.parts}


def test_member_count_is_arithmetic():
    config = _config(num_seeds=5, sweep=("bootstrap_rate=0.01,0.05,0.1", "tau=0.001,0.005,0.01,0.02"))
    assert memory.member_count(config) == len(expand_members(config)) == 60
    # One config per sweep value (1 + 2 + 3), not one per grid point (12).
    assert len(memory.member_configs(config)) == 6


def test_huge_buffer_is_refused_without_allocating():
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    config = _config(buffer_size=10**9, num_seeds=1000)  # 24 TB of replay: no machine holds it
    with pytest.raises(memory.MemoryBudgetError) as refused:
        memory.check(config)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("this run needs about ")
    assert "(replay buffer " in message and "buffer_size 1,000,000,000 x 1,000 members x 24 B per transition" in message
    assert "lower train.buffer_size, or train.num_seeds (1,000 members)" in message
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) * 1024 < GiB
    # One member's 24 GB, against a 16 GiB device: the buffer is still what is named.
    with pytest.raises(memory.MemoryBudgetError, match=r"\(replay buffer .*; 16.0 GiB is available \(test\)"):
        memory.check(_config(buffer_size=10**9), available=(16 * GiB, "test"))


def test_huge_width_is_refused_naming_the_agent():
    config = _config(section={"hidden_sizes": (100_000, 100_000)})
    estimate = memory.estimate(config)
    # Five critics and their targets of 200,000 x 100,000 kernels, Adam's two moments: > 1 TB.
    assert estimate.agent_bytes > 4 * 5 * 200_000 * 100_000 * 4
    with pytest.raises(memory.MemoryBudgetError) as refused:
        memory.check(config, estimate)
    message = str(refused.value)
    assert "(agent " in message and "pbac parameters, targets and optimiser moments" in message
    assert "lower pbac.hidden_sizes, pbac.num_critics" in message


def test_a_million_seeds_are_refused_without_building_members(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the member list must not be built")

    monkeypatch.setattr(config_module, "expand_members", refuse)
    monkeypatch.setattr(build_module, "expand_members", refuse)
    member_inputs = loop.member_inputs

    def one_member(members, tasks=None):
        assert len(members) == 1, "nothing may be stacked over the members"
        return member_inputs(members, tasks)

    monkeypatch.setattr(loop, "member_inputs", one_member)
    config = _config(num_seeds=10**6)
    estimate = memory.estimate(config)
    assert estimate.members == 10**6
    assert estimate.state_bytes == 10**6 * estimate.state_bytes_per_member
    with pytest.raises(memory.MemoryBudgetError) as refused:
        memory.check(config, estimate, available=(64 * GiB, "test"))
    assert "train.num_seeds (1,000,000 members)" in str(refused.value)


def test_huge_evaluation_is_refused_naming_it():
    config = _config(eval_episodes=10**9)
    with pytest.raises(memory.MemoryBudgetError) as refused:
        memory.check(config)
    message = str(refused.value)
    assert "(evaluation " in message and "eval_episodes 1,000,000,000 x 1 member x " in message
    assert message.endswith("lower train.eval_episodes")  # one member: no member options


def test_small_run_passes_with_the_real_memory():
    config = _config(num_seeds=2)
    estimate = memory.check(config)
    assert 0 < estimate.total_device_bytes < memory.available_bytes()[0]
    record = json.loads(json.dumps(estimate.as_record()))
    assert record["checkpoint_bytes"] >= record["state_bytes"] and record["members"] == 2
    lines = estimate.lines()
    assert lines[0].startswith("total about ")
    sizes = [part.bytes for part in estimate.breakdown()]
    assert sizes == sorted(sizes, reverse=True) and len(lines) == len(sizes) + 1
    assert any(line.startswith("replay buffer ") and "buffer_size 20,000 x 2 members x 24 B per transition" in line for line in lines)


def test_available_bytes():
    available, source = memory.available_bytes()
    assert available > 0 and isinstance(source, str) and source
    host, host_source = memory.host_available_bytes()
    assert host > 0 and host_source

    class Accelerator:
        platform, device_kind = "gpu", "NVIDIA H100"

        def memory_stats(self):
            return {"bytes_limit": 80 * GiB, "bytes_in_use": 2 * GiB}

    assert memory.available_bytes(Accelerator()) == (78 * GiB, "NVIDIA H100 bytes_limit - bytes_in_use")


def test_gpu_counts_the_checkpoint_copy_on_the_host():
    config = _config()
    on_cpu, on_gpu = memory.estimate(config, platform="cpu"), memory.estimate(config, platform="gpu")
    assert on_cpu.state_bytes == on_gpu.state_bytes
    assert on_gpu.total_device_bytes <= on_cpu.total_device_bytes
    memory.check(config, on_gpu, available=(GiB, "test"), host_available=(GiB, "test"))
    with pytest.raises(memory.MemoryBudgetError, match=r"on the host .*checkpoint host copy.*is available \(host test\)"):
        memory.check(config, on_gpu, available=(GiB, "test"), host_available=(on_gpu.state_bytes, "host test"))


def test_checkpoint_file_size_is_bounded(tmp_path):
    config = _config(num_seeds=2)
    estimate = memory.estimate(config)
    state = build(config, donate=False).init_state()
    record = {"chunk": 0, "elapsed_s": 0.0, "config": config_to_dict(config)}
    empty = checkpoint.save(tmp_path, state, 0, record).stat().st_size
    # The largest checkpoint is a full replay buffer's (a checkpoint stores only the rows written).
    full = state.buffer.replace(size=state.buffer.size.at[:].set(state.buffer.data.reward.shape[1]))
    size = checkpoint.save(tmp_path, state.replace(buffer=full), 1, record).stat().st_size
    assert estimate.state_bytes < size <= estimate.checkpoint_bytes < size + 64 * 1024
    replay_bytes = sum(leaf.nbytes for leaf in jax.tree.leaves(state.buffer.data))
    assert empty < size - replay_bytes + 64 * 1024


@pytest.mark.parametrize("algo", ["pbac", "drnd"])
@pytest.mark.slow
def test_working_sets_bound_what_xla_uses(algo):
    """The training chunk's and evaluation's estimates against XLA's own count of the compiled
    programs' temporaries (CPU)."""
    config = _config(algo, {"hidden_sizes": (128, 128)}, batch_size=128, updates_per_step=2, num_seeds=2)
    estimate = memory.estimate(config)
    built = build(config)
    state = jax.eval_shape(built.init_state)
    for name, estimated in [("train_chunk", estimate.step_bytes + estimate.update_bytes), ("evaluate", estimate.eval_bytes)]:
        analysis = getattr(built.trainer, name).lower(state).compile().memory_analysis()
        if analysis is None:
            pytest.skip("this backend reports no memory analysis")
        used = analysis.temp_size_in_bytes  # the chunk's state is donated: its outputs reuse it
        assert used <= estimated <= 8 * max(used, 1), (name, used, estimated)


@pytest.mark.slow
def test_state_bytes_are_exact_for_an_mjx_env():
    config = load_profile("quickstart")
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, num_envs=4, buffer_size=1000, num_seeds=2))
    estimate = memory.estimate(config)
    state = build(config, donate=False).init_state()
    assert estimate.state_bytes == _real_bytes(state)
    assert estimate.env_bytes == _real_bytes(state.env_state)
    memory.check(config, estimate)
    assert np.isfinite(estimate.eval_bytes) and estimate.eval_bytes > 0


def test_huge_num_envs_is_refused_naming_the_env_step():
    config = _config(num_envs=10**8, buffer_size=10**8, total_steps=10**9, warmup_steps=10**8)
    with pytest.raises(memory.MemoryBudgetError) as refused:
        memory.check(config, available=(16 * GiB, "test"))
    message = str(refused.value)
    assert "(env step " in message and "num_envs 100,000,000 x 1 member x " in message
    assert message.endswith("lower train.num_envs")


def test_on_several_accelerators_each_holds_its_share_of_the_members(monkeypatch):
    """4 members on 4 GPUs: each device needs a quarter of the run's device memory, and a budget
    between a quarter and the whole is enough; on one GPU the same budget refuses the run, and
    the refusal names the per-device need."""
    config = _config(num_seeds=4)
    on_gpu = memory.estimate(config, platform="gpu")
    quarter = on_gpu.total_device_bytes // 4
    budget = (int(2 * quarter / memory.SAFETY_FRACTION), "test")
    host = (100 * GiB, "host test")
    with pytest.raises(memory.MemoryBudgetError, match=r"needs about .* on gpu \("):
        memory.check(config, on_gpu, available=budget, host_available=host)
    monkeypatch.setattr(memory.jax, "device_count", lambda: 4)
    memory.check(config, on_gpu, available=budget, host_available=host)
    tight = (int(0.5 * quarter / memory.SAFETY_FRACTION), "test")
    with pytest.raises(memory.MemoryBudgetError, match=r"on each of 4 gpu devices \(1 member each\)"):
        memory.check(config, on_gpu, available=tight, host_available=host)
