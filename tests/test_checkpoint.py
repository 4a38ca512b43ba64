"""Checkpoints (`mjx_pbac.checkpoint`) as files: a round trip keeps every leaf (keys included), only
the newest are kept, a damaged newest file is passed by for the one before it, and a checkpoint of
another layout or configuration is refused with a message that says why. Resume through a run is
tested in test_runner.py and test_lifecycle.py."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import jax
import jax.numpy as jp
import numpy as np
import pytest
from flax import struct

from mjx_pbac import checkpoint
from mjx_pbac.build import build
from mjx_pbac.config import load_profile
from tests.test_runner import _tiny_chain


def _state():
    return {"key": jax.random.key(7), "params": {"w": jp.arange(6.0).reshape(2, 3)}, "step": jp.int32(5)}


def test_round_trip_keeps_every_leaf_and_only_the_newest_files(tmp_path):
    state = _state()
    for steps in (100, 200, 300):
        checkpoint.save(tmp_path, state, env_steps=steps, metadata={"chunk": steps // 100}, keep=2)
    assert [p.name for p in checkpoint.list_checkpoints(tmp_path)] == ["step_000000200.npz", "step_000000300.npz"]
    restored, metadata = checkpoint.restore(checkpoint.latest(tmp_path), _state())
    assert metadata["chunk"] == 3 and metadata["env_steps"] == 300 and metadata["format"] == checkpoint.FORMAT
    np.testing.assert_array_equal(restored["params"]["w"], state["params"]["w"])
    np.testing.assert_array_equal(jax.random.key_data(restored["key"]), jax.random.key_data(state["key"]))
    assert int(restored["step"]) == 5


def _rewrite_metadata(path, change):
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    record = json.loads(bytes(arrays["__metadata__"]).decode())
    change(record)
    arrays["__metadata__"] = np.frombuffer(json.dumps(record).encode(), dtype=np.uint8)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


def test_a_checkpoint_from_before_the_algos_layout_is_refused_with_the_reason(tmp_path):
    path = checkpoint.save(tmp_path, _state(), env_steps=100, metadata={})
    _rewrite_metadata(path, lambda record: record.pop("format"))  # as every checkpoint before format 2
    with pytest.raises(checkpoint.CheckpointMismatch) as refused:
        checkpoint.restore(path, _state())
    message = str(refused.value)
    assert f"has format 1 and this version reads format {checkpoint.FORMAT}" in message
    assert f"git checkout {checkpoint.FORMAT_1_WRITER}" in message and "start a new run" in message
    # restore_newest raises it rather than passing the file by as damaged
    with pytest.raises(checkpoint.CheckpointMismatch):
        checkpoint.restore_newest(tmp_path, _state(), warn=lambda message: None)
    assert path.exists()
    _rewrite_metadata(path, lambda record: record.update(format=9))
    with pytest.raises(checkpoint.CheckpointMismatch, match="has format 9, which this version"):
        checkpoint.restore(path, _state())


def test_a_state_of_another_shape_is_refused(tmp_path):
    path = checkpoint.save(tmp_path, _state(), env_steps=100, metadata={})
    other = _state()
    other["params"]["w"] = jp.zeros((3, 3))
    with pytest.raises(checkpoint.CheckpointMismatch, match=r"array \d has shape \(2, 3\).*expects \(3, 3\)"):
        checkpoint.restore(path, other)
    fewer = {"key": jax.random.key(0)}
    with pytest.raises(checkpoint.CheckpointMismatch, match="holds 3 arrays but this config's training state has 1"):
        checkpoint.restore(path, fewer)


@struct.dataclass
class _Config:
    tau: jax.Array
    gamma: jax.Array
    weight_decay: jax.Array


@struct.dataclass
class _Agent:
    config: _Config
    w: jax.Array


@struct.dataclass
class _Train:
    agent: _Agent
    obs_moments: object
    step: jax.Array


def _train_state(gamma=0.99, weight_decay=0.0, moments=None):
    config = _Config(tau=jp.float32(0.005), gamma=jp.float32(gamma), weight_decay=jp.float32(weight_decay))
    return _Train(agent=_Agent(config=config, w=jp.arange(4.0)), obs_moments=moments, step=jp.int32(3))


def _as_format_2(path):
    """Rewrites a checkpoint as format 2 wrote it: no paths, and none of the leaves added since."""
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    record = json.loads(bytes(arrays.pop("__metadata__")).decode())
    for i, cut in record.pop("trimmed", {}).items():  # format 2 stored every array whole
        arrays[f"leaf_{int(i):05d}"] = checkpoint._untrim(arrays[f"leaf_{int(i):05d}"], cut)
        record["crc32"][int(i)] = checkpoint._crc(arrays[f"leaf_{int(i):05d}"])
    kept = [i for i, name in enumerate(record.pop("paths")) if not name.endswith(checkpoint.ADDED_SINCE[2])]
    leaves = {f"leaf_{j:05d}": arrays[f"leaf_{i:05d}"] for j, i in enumerate(kept)}
    record.update(format=2, num_leaves=len(kept), crc32=[record["crc32"][i] for i in kept])
    leaves["__metadata__"] = np.frombuffer(json.dumps(record).encode(), dtype=np.uint8)
    with open(path, "wb") as handle:
        np.savez(handle, **leaves)


def test_a_checkpoint_names_its_leaves_and_one_from_before_the_new_knobs_restores_with_the_runs_values(tmp_path):
    saved = _train_state(gamma=0.97)
    path = checkpoint.save(tmp_path, saved, env_steps=100, metadata={})
    assert checkpoint.read_metadata(path)["paths"] == [
        ".agent.config.tau", ".agent.config.gamma", ".agent.config.weight_decay", ".agent.w", ".step"
    ]
    _as_format_2(path)
    # The run's own values (its config) fill what the checkpoint predates; the rest is the file's.
    template = _train_state(gamma=0.95, weight_decay=0.0)
    restored, metadata = checkpoint.restore(path, template)
    assert metadata["format"] == 2
    assert float(restored.agent.config.gamma) == np.float32(0.95) and float(restored.agent.config.weight_decay) == 0.0
    np.testing.assert_array_equal(restored.agent.w, saved.agent.w)
    # Shapes only (as a resume restores): the values come from `fill`, by the template's leaf index.
    shapes = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), template)
    restored, _ = checkpoint.restore(path, shapes, fill=lambda i: np.float32(0.5 + i))
    assert float(restored.agent.config.gamma) == 1.5 and float(restored.agent.config.weight_decay) == 2.5
    with pytest.raises(checkpoint.CheckpointMismatch, match=r"predates \.agent\.config\.gamma and nothing gives its value"):
        checkpoint.restore(path, shapes)


def test_normalisation_statistics_missing_or_unexpected_are_refused_in_one_line(tmp_path):
    from mjx_pbac import normalization

    plain = checkpoint.save(tmp_path / "plain", _train_state(), env_steps=100, metadata={})
    normalised = _train_state(moments=normalization.init(3))
    with pytest.raises(checkpoint.CheckpointMismatch) as refused:
        checkpoint.restore(plain, normalised)
    assert "holds no observation-normalisation statistics, which this run expects" in str(refused.value)
    assert "\n" not in str(refused.value)
    _as_format_2(plain)  # an older run's checkpoint: the same refusal
    with pytest.raises(checkpoint.CheckpointMismatch, match="holds no observation-normalisation statistics"):
        checkpoint.restore(plain, normalised)
    with_moments = checkpoint.save(tmp_path / "normalised", normalised, env_steps=100, metadata={})
    with pytest.raises(checkpoint.CheckpointMismatch, match="holds observation-normalisation statistics but this run does not"):
        checkpoint.restore(with_moments, _train_state())
    restored, _ = checkpoint.restore(with_moments, _train_state(moments=normalization.init(3)))
    assert float(restored.obs_moments.count) == 0.0


@pytest.mark.slow
def test_checkpoint_from_another_config_is_refused(tmp_path):
    """A whole training state (the chain profile's) saved, then restored into the state of wider
    networks: refused, naming the cause."""
    state = build(_tiny_chain(tmp_path / "a")).init_state()
    path = checkpoint.save(tmp_path / "checkpoints", state, env_steps=0, metadata={})
    other = dataclasses.replace(load_profile("chain").pbac, hidden_sizes=(16, 16))
    template = build(dataclasses.replace(_tiny_chain(tmp_path / "b"), pbac=other)).init_state()
    with pytest.raises(checkpoint.CheckpointError, match="different configuration"):
        checkpoint.restore(path, template)
    restored, _ = checkpoint.restore(path, state)  # the same configuration's state restores
    assert jax.tree.structure(restored) == jax.tree.structure(state)


# -- damaged files ----------------------------------------------------------------------------


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(os.urandom(len(data)))
    elif how == "flipped":  # one byte inside the arrays: the zip still opens, the CRC-32 catches it
        with np.load(path) as npz:
            biggest = max((name for name in npz.files if name != "__metadata__"), key=lambda n: npz[n].nbytes)
            raw = npz[biggest].tobytes()
        at = data.find(raw)
        assert at > 0
        flipped = bytearray(data)
        flipped[at + len(raw) // 2] ^= 0xFF
        path.write_bytes(bytes(flipped))


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage", "flipped"])
def test_restore_falls_back_to_the_newest_checkpoint_that_verifies(tmp_path, how):
    state = {"w": np.arange(1000, dtype=np.float32), "n": np.int32(3)}
    for step in (1, 2, 3):
        checkpoint.save(tmp_path, {"w": state["w"] * step, "n": np.int32(step)}, env_steps=step, metadata={"chunk": step}, keep=5)
    newest = tmp_path / "step_000000003.npz"
    _damage(newest, how)
    warnings = []
    restored, metadata, path = checkpoint.restore_newest(tmp_path, state, warn=warnings.append)
    assert path.name == "step_000000002.npz" and metadata["chunk"] == 2
    np.testing.assert_array_equal(restored["w"], state["w"] * 2)
    assert len(warnings) == 1 and "step_000000003.npz" in warnings[0] and "kept as step_000000003.npz.damaged" in warnings[0]
    assert (tmp_path / "step_000000003.npz.damaged").is_file() and not newest.exists()
    for path in checkpoint.list_checkpoints(tmp_path):
        _damage(path, "truncated")
    assert checkpoint.restore_newest(tmp_path, state, warn=warnings.append) is None


@struct.dataclass
class _WithReplay:
    buffer: object
    step: jax.Array


def _replay_state(rows_written: int, capacity: int = 10):
    """Two members' buffers of `capacity` rows, the first `rows_written` of each filled."""
    from mjx_pbac import replay

    def member(seed):
        buffer = replay.init(capacity, obs_size=3, action_size=2)
        if rows_written == 0:
            return buffer
        values = jax.random.normal(jax.random.key(seed), (rows_written, 3)) + 1.0
        batch = replay.Transition(
            obs=values, action=values[:, :2], reward=values[:, 0], next_obs=-values,
            terminated=jp.zeros(rows_written), truncated=jp.ones(rows_written),
        )
        return replay.insert(buffer, batch)

    buffers = jax.tree.map(lambda *xs: jp.stack(xs), member(1), member(2))
    return _WithReplay(buffer=buffers, step=jp.int32(rows_written))


@pytest.mark.parametrize("rows_written", [0, 4, 10])
def test_a_checkpoint_keeps_only_the_replay_rows_written_and_restores_the_buffer_exactly(tmp_path, rows_written):
    """The unwritten rows of a replay buffer are not stored (a stop early in a run writes a small
    file) and come back as the zeros they were; a full buffer is stored whole."""
    state = _replay_state(rows_written)
    path = checkpoint.save(tmp_path, state, env_steps=100, metadata={})
    metadata = checkpoint.read_metadata(path)
    paths = metadata["paths"]
    with np.load(path) as data:
        stored = {name: data[f"leaf_{i:05d}"].shape for i, name in enumerate(paths)}
    assert stored[".buffer.data.obs"] == (2, rows_written, 3) and stored[".buffer.data.reward"] == (2, rows_written)
    assert stored[".buffer.size"] == (2,) and stored[".step"] == ()
    expected = {str(paths.index(f".buffer.data.{field}")): [1, 10] for field in ("obs", "action", "reward", "next_obs", "terminated", "truncated")}
    assert metadata["trimmed"] == ({} if rows_written == 10 else expected)
    restored, _ = checkpoint.restore(path, _replay_state(0))
    for want, got in zip(jax.tree.leaves(state), jax.tree.leaves(restored)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_replay_rows_past_the_fill_that_are_not_zero_are_kept(tmp_path):
    """The cut is made only where padding with zeros gives the buffer back: a buffer whose rows
    past its size hold data (not one `replay.insert` made) is stored whole."""
    state = _replay_state(4)
    obs = state.buffer.data.obs.at[:, 7].set(5.0)
    state = state.replace(buffer=state.buffer.replace(data=state.buffer.data.replace(obs=obs)))
    path = checkpoint.save(tmp_path, state, env_steps=100, metadata={})
    metadata = checkpoint.read_metadata(path)
    assert str(metadata["paths"].index(".buffer.data.obs")) not in metadata["trimmed"] and len(metadata["trimmed"]) == 5
    restored, _ = checkpoint.restore(path, _replay_state(0))
    np.testing.assert_array_equal(np.asarray(restored.buffer.data.obs), np.asarray(obs))


def test_a_format_3_checkpoint_still_restores_and_a_trimmed_array_that_does_not_fit_is_damaged(tmp_path):
    """Format 3 (every leaf whole) is read as it was written; a trimmed array that does not fit
    its buffer is a damaged file, not a silent pad."""
    state = _replay_state(4)
    path = checkpoint.save(tmp_path, state, env_steps=100, metadata={})
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    record = json.loads(bytes(arrays["__metadata__"]).decode())
    full = jax.tree.leaves(jax.device_get(state))
    for i in map(int, record.pop("trimmed")):
        arrays[f"leaf_{i:05d}"] = np.asarray(full[i])
        record["crc32"][i] = checkpoint._crc(arrays[f"leaf_{i:05d}"])
    record["format"] = 3
    arrays["__metadata__"] = np.frombuffer(json.dumps(record).encode(), dtype=np.uint8)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)
    restored, metadata = checkpoint.restore(path, _replay_state(0))
    assert metadata["format"] == 3
    np.testing.assert_array_equal(np.asarray(restored.buffer.data.next_obs), np.asarray(state.buffer.data.next_obs))
    # A trimmed record whose array has more rows than the buffer holds.
    path = checkpoint.save(tmp_path, state, env_steps=200, metadata={})
    _rewrite_metadata(path, lambda record: record.update(trimmed={key: [1, 3] for key in record["trimmed"]}))
    with pytest.raises(checkpoint.CheckpointDamaged, match=r"trimmed replay array has shape \(2, 4, 3\), not at most 3 rows"):
        checkpoint.restore(path, _replay_state(0))
