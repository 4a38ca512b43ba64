"""The shared loop (`mjx_pbac.loop`): what gets stored (truncation vs termination), counters, no
retracing and no host transfers inside a chunk, the matmul precision of its programs."""

from __future__ import annotations

import dataclasses
import functools

import chex
import jax
import numpy as np
import pytest

import envs
from mjx_pbac import algos
from mjx_pbac.algos import pbac
from mjx_pbac.build import build
from mjx_pbac.config import TrainConfig, load_profile
from mjx_pbac.hlo import program_stats
from mjx_pbac.loop import make_trainer, member_inputs
from tests.probe_envs import CountingEnv

SMALL = pbac.Config(num_critics=3, hidden_sizes=(8,))


def _one_member(trainer, config=SMALL, seed=0):
    """The initial state of a one-member run (leading member axis of size 1)."""
    return trainer.init(*member_inputs([(seed, config)]))


def _member(tree, index=0):
    return jax.tree.map(lambda leaf: leaf[index], jax.device_get(tree))


# -- what the loop stores -------------------------------------------------------------------


@functools.cache
def _counting_trainer_of(terminate_at, num_envs, chunk_steps):
    env = CountingEnv(episode_length=5, terminate_at=terminate_at)
    train = TrainConfig(
        env="probe", total_steps=4 * chunk_steps, num_envs=num_envs, batch_size=4, updates_per_step=1,
        buffer_size=64, warmup_steps=chunk_steps, chunk_steps=chunk_steps, eval_interval=chunk_steps,
        eval_episodes=2, checkpoint_interval=chunk_steps,
    )
    algorithm = pbac.make(SMALL, env.observation_size, env.action_size)
    return make_trainer(train, env, algorithm)


def _counting_trainer(terminate_at, num_envs=2, chunk_steps=16):
    """A PBAC trainer on the counting env and a fresh one-member state; the trainer (and so its
    compiled program) is shared by the tests that ask for the same sizes."""
    trainer = _counting_trainer_of(terminate_at, num_envs, chunk_steps)
    return trainer, _one_member(trainer, dataclasses.replace(SMALL, posterior_sampling_rate=2))


def test_truncation_stores_final_obs_and_is_not_termination():
    trainer, state = _counting_trainer(terminate_at=None, num_envs=2, chunk_steps=16)
    state, metrics = _member(trainer.warmup_chunk(state))
    data = state.buffer.data
    # Two instances interleaved per vector step: rows (2t, 2t+1) hold step t of instances 0, 1.
    # Instance 0 steps t = 0..4 then a reset: obs = 0,1,2,3,4,0,1,2 ; next_obs = 1..5,1,2,3.
    first = slice(0, 16, 2)
    np.testing.assert_array_equal(data.obs[first, 0], [0, 1, 2, 3, 4, 0, 1, 2])
    np.testing.assert_array_equal(data.next_obs[first, 0], [1, 2, 3, 4, 5, 1, 2, 3])
    np.testing.assert_array_equal(data.truncated[first], [0, 0, 0, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(data.terminated[:16], 0)
    np.testing.assert_array_equal(data.reward[first], [1, 2, 3, 4, 5, 1, 2, 3])
    np.testing.assert_array_equal(data.next_obs[:16, 1], data.action[:16, 0])  # the action taken
    assert int(metrics["episodes"]) == 2 and float(metrics["return_sum"]) == 30.0  # 2 x (1+...+5)


def test_termination_is_stored_as_terminated_with_its_final_obs():
    trainer, state = _counting_trainer(terminate_at=3, num_envs=2, chunk_steps=8)
    state, metrics = _member(trainer.warmup_chunk(state))
    data = state.buffer.data
    # Two instances interleaved per vector step: rows (2t, 2t+1) hold step t of instances 0, 1.
    obs = data.obs[:8, 0].reshape(4, 2)[:, 0]
    next_obs = data.next_obs[:8, 0].reshape(4, 2)[:, 0]
    np.testing.assert_array_equal(obs, [0, 1, 2, 0])
    np.testing.assert_array_equal(next_obs, [1, 2, 3, 1])
    np.testing.assert_array_equal(data.terminated[:8].reshape(4, 2)[:, 0], [0, 0, 1, 0])
    np.testing.assert_array_equal(data.truncated[:8], 0)
    assert int(metrics["episodes"]) == 2 and float(metrics["return_sum"]) == 12.0  # 2 x (1+2+3)


def test_evaluation_stops_once_every_episode_has_ended_with_the_same_returns():
    """The counting env pays 1, 2, 3, ... per step: episodes that end at step 3 return 6 after 3
    of the 5 steps an episode may last, and the evaluation stops there; untruncated ones run all 5
    (return 15). Both as one program and as the batched snapshots' program (slots vmapped)."""
    for terminate_at, steps, total in ((None, 5, 15.0), (3, 3, 6.0)):
        trainer, state = _counting_trainer(terminate_at=terminate_at, num_envs=2, chunk_steps=8)
        result = _member(trainer.evaluate(state))
        assert result["lengths"].tolist() == [steps, steps] and result["returns"].tolist() == [total, total]
        assert int(result["steps"]) == steps, terminate_at
    batched = _member(trainer.evaluate_snapshots(trainer.init_snapshots(state)))  # [P, E]: one slot here
    assert batched["lengths"].tolist() == [[3, 3]] and batched["returns"].tolist() == [[6.0, 6.0]] and batched["steps"].tolist() == [3]


def test_sampling_counter_and_env_steps_advance_per_vector_step():
    trainer, state = _counting_trainer(terminate_at=None, num_envs=2, chunk_steps=16)
    state, _ = trainer.warmup_chunk(state)
    state, _ = _member(trainer.train_chunk(state))
    np.testing.assert_array_equal(state.acting.sampling_counter, [16, 16])
    assert int(state.env_steps) == 32 and int(state.updates) == 8
    assert int(state.buffer.size) == 32


# -- compiled once, nothing crosses to the host --------------------------------------------


def test_matmul_precision_reaches_every_matrix_product_of_the_chunk():
    """float32 (the default) is written into the program's dot products; "default" leaves XLA's
    choice (TF32 on recent NVIDIA GPUs), so the programs differ."""
    env = envs.make("chain")
    algorithm = pbac.make(SMALL, env.observation_size, env.action_size)
    texts = {}
    for precision in ("float32", "default"):
        train = TrainConfig(
            env="chain", total_steps=8, num_envs=1, batch_size=4, updates_per_step=1, buffer_size=16,
            warmup_steps=4, chunk_steps=4, eval_interval=4, eval_episodes=1, checkpoint_interval=4,
            matmul_precision=precision,
        )
        trainer = make_trainer(train, env, algorithm)
        texts[precision] = trainer.train_chunk.lower(_one_member(trainer)).as_text()
    dots = [line for line in texts["float32"].splitlines() if "dot_general" in line]
    assert dots and all("HIGHEST" in line for line in dots)
    assert "HIGHEST" not in texts["default"]


@pytest.mark.parametrize(
    "name", [name if name == "pbac" else pytest.param(name, marks=pytest.mark.slow) for name in algos.NAMES]
)
def test_every_algorithms_chunk_compiles_once_stays_on_device_and_never_branches(name):
    """The loop's guarantees, whatever the algorithm brings (its acting state, TD3's delayed
    update selected with `where`): on a CPU one program for warm-up and training, compiled once
    whatever the chunk's length (its loop takes the length as an argument, one branch skips the
    warm-up's gradient steps), nothing crossing to the host in a chunk or an evaluation, and no
    other data-dependent loop or branch (the GPU form, which has neither: test_preemption). The
    run is test_algos.py's chain run through the command (the chain profile, 2 seeds), whose
    programs are also test_runner's chain run's, so the compile cache holds them from there."""
    config = load_profile("chain")
    config = dataclasses.replace(
        config, algo=name, train=dataclasses.replace(config.train, num_seeds=2, total_steps=2000, eval_interval=1000)
    )
    built = build(config)
    trainer = built.trainer
    state, _ = trainer.warmup_chunk(built.init_state())
    with jax.transfer_guard("disallow"):
        state, metrics = trainer.train_chunk(state)
        for length in (1, 7):  # shorter chunks, as a run's first (its probe) and its last
            state, _ = trainer.chunk_program("train", length)(state)
        result = trainer.evaluate(state)
    assert trainer.any_length == (jax.devices()[0].platform == "cpu")
    assert trainer.warmup_chunk.program is trainer.train_chunk.program  # one-chunk warm-up: fused on a GPU
    assert trainer.train_chunk._cache_size() == 1
    stats = program_stats(trainer.train_chunk.lower(state).compile())
    assert stats["data_dependent_loops"] == stats["conditionals"] == trainer.any_length, (name, stats)
    assert np.all(np.isfinite(np.asarray(metrics["critic_loss"]))) and np.asarray(state.updates).tolist() == [1008, 1008]
    assert np.asarray(state.env_steps).tolist() == [2008, 2008]
    chex.assert_shape(result["returns"], (2, config.train.eval_episodes))


def _two_env_run(updates_per_step: int):
    """(env, train config, PBAC) of a counting-env run with two envs per member and a warm-up of
    one 16-step chunk."""
    env = CountingEnv(episode_length=5)
    train = TrainConfig(
        env="probe", total_steps=64, num_envs=2, batch_size=4, updates_per_step=updates_per_step, buffer_size=64,
        warmup_steps=16, chunk_steps=16, eval_interval=16, eval_episodes=2, checkpoint_interval=16,
    )
    return env, train, pbac.make(SMALL, env.observation_size, env.action_size)


def test_the_chunk_loop_option_chooses_the_programs_form():
    """`train.chunk_loop` picks the chunk programs' form (`make_trainer`'s `any_length`): auto
    follows the platform (any length on a CPU), the other two hold on any platform, and an
    explicit `any_length` argument (the tests') wins. Building compiles nothing."""
    env, train, algorithm = _two_env_run(updates_per_step=1)
    form = {
        loop: make_trainer(dataclasses.replace(train, chunk_loop=loop), env, algorithm).any_length
        for loop in ("auto", "any_length", "fixed_trip")
    }
    assert form == {"auto": jax.devices()[0].platform == "cpu", "any_length": True, "fixed_trip": False}
    fixed = make_trainer(dataclasses.replace(train, chunk_loop="fixed_trip"), env, algorithm, any_length=True)
    assert fixed.any_length and fixed.warmup_chunk.program is fixed.train_chunk.program
    with pytest.raises(ValueError, match="chunk_loop must be one of auto, any_length, fixed_trip, got 'fixed'"):
        dataclasses.replace(train, chunk_loop="fixed")


def test_a_chunk_traces_its_iteration_once(monkeypatch):
    """The loop's carry takes its shapes from the body's own trace (`jax.jit(..., inline=True)`),
    so lowering a chunk program traces the env step once, not twice. Lowering compiles nothing."""
    env, train, algorithm = _two_env_run(updates_per_step=1)
    traces = []
    step = type(env).step
    monkeypatch.setattr(type(env), "step", lambda self, *args: traces.append(1) or step(self, *args))
    trainer = make_trainer(train, env, algorithm, donate=False, any_length=False)
    trainer.train_chunk.lower(_one_member(trainer))
    assert len(traces) == 1


def test_gradient_steps_unrolled_or_looped_train_alike():
    """With many envs per member the vector step's gradient steps run under a loop (one copy of
    the update in the program), with one env they are unrolled (no loop on the latency-bound
    path); either way the training is the same."""
    env, train, algorithm = _two_env_run(updates_per_step=2)  # the looped program is the next test's any-length one
    states = {}
    for unrolled in (True, False):
        trainer = make_trainer(train, env, algorithm, donate=False, unroll_updates=unrolled)
        state, _ = trainer.warmup_chunk(_one_member(trainer))
        states[unrolled], _ = trainer.train_chunk(state)
        states[unrolled, "size"] = program_stats(trainer.train_chunk.lower(state).compile())["instructions"]
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
        jax.device_get(states[True].agent), jax.device_get(states[False].agent),
    )
    assert states[False, "size"] < 0.8 * states[True, "size"]  # one update in the program, not two


def test_a_one_chunk_warmup_runs_in_the_training_program_with_the_same_result():
    """The GPU form: a warm-up of one chunk (every fast recipe's) runs in the training program,
    sparing a compile: uniform actions and its gradient steps' results discarded, so the state
    after it, and after the training that follows, is the separate warm-up program's, bit for
    bit. A longer warm-up keeps its own program. The CPU form's one program, its learning
    switched off by a flag, leaves the same state after the warm-up too."""
    env, train, algorithm = _two_env_run(updates_per_step=2)
    states = {}
    for fused in (None, False):
        trainer = make_trainer(train, env, algorithm, donate=False, fuse_warmup=fused, any_length=False)
        assert (trainer.warmup_chunk is trainer.train_chunk) == (fused is None)
        warm, metrics = trainer.warmup_chunk(_one_member(trainer))
        trained, _ = trainer.train_chunk(warm)
        plain = jax.tree.map(lambda x: jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x, (warm, trained))
        states[fused] = jax.device_get((*plain, metrics["return_sum"]))
    assert int(states[None][0].updates[0]) == 0 and int(states[None][1].updates[0]) == 16
    jax.tree.map(np.testing.assert_array_equal, states[None], states[False])
    longer = make_trainer(dataclasses.replace(train, warmup_steps=32), env, algorithm, any_length=False)
    assert longer.warmup_chunk is not longer.train_chunk
    one = make_trainer(dataclasses.replace(train, warmup_steps=32), env, algorithm, donate=False, any_length=True)
    assert one.warmup_chunk.program is one.train_chunk.program  # whatever the warm-up's length
    warm, _ = one.warmup_chunk(_one_member(one))
    plain = jax.tree.map(lambda x: jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x, warm)
    jax.tree.map(np.testing.assert_array_equal, jax.device_get(plain), states[False][0])
