"""Checkpoints of the whole training state (parameters, optimisers, replay buffer, env instances,
keys and counters), so a resumed run continues exactly where the saved one stood.

A checkpoint is one `.npz` holding the state's leaves in tree order plus a JSON metadata record.
Restoring needs a template state of the same structure (a freshly initialised one): every leaf's
shape and dtype is checked against it, so a checkpoint from another config is refused with a
message instead of being loaded wrongly. Files are written to a temporary name and renamed, so a
crash while saving never leaves a truncated checkpoint behind.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import jax
import numpy as np

_NAME = re.compile(r"^step_(\d+)\.npz$")


class CheckpointError(RuntimeError):
    pass


def _is_key(leaf: Any) -> bool:
    return hasattr(leaf, "dtype") and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def save(directory: str | os.PathLike, state: Any, env_steps: int, metadata: dict[str, Any], keep: int = 2) -> Path:
    """Writes `directory/step_<env_steps>.npz` and deletes all but the `keep` newest."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    leaves = jax.tree.leaves(jax.device_get(jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x, state)))
    arrays = {f"leaf_{i:05d}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
    record = dict(metadata, env_steps=int(env_steps), num_leaves=len(leaves))
    arrays["__metadata__"] = np.frombuffer(json.dumps(record).encode(), dtype=np.uint8)
    path = directory / f"step_{int(env_steps):09d}.npz"
    temporary = directory / f".{path.name}.tmp"
    with open(temporary, "wb") as handle:
        np.savez(handle, **arrays)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    for old in list_checkpoints(directory)[:-keep]:
        old.unlink()
    return path


def list_checkpoints(directory: str | os.PathLike) -> list[Path]:
    """Checkpoint files in `directory`, oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def latest(directory: str | os.PathLike) -> Path:
    found = list_checkpoints(directory)
    if not found:
        raise CheckpointError(f"no checkpoint in {directory} (files named step_<env steps>.npz)")
    return found[-1]


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    with np.load(path) as data:
        return json.loads(bytes(data["__metadata__"]).decode())


def restore(path: str | os.PathLike, template: Any) -> tuple[Any, dict[str, Any]]:
    """(state, metadata) with the leaves of `path` in the structure of `template`."""
    template_leaves, treedef = jax.tree.flatten(template)
    try:
        data = np.load(path)
    except (OSError, ValueError) as error:
        raise CheckpointError(f"cannot read checkpoint {path}: {error}") from None
    with data:
        metadata = json.loads(bytes(data["__metadata__"]).decode())
        if metadata["num_leaves"] != len(template_leaves):
            raise CheckpointError(
                f"checkpoint {path} holds {metadata['num_leaves']} arrays but this config's training "
                f"state has {len(template_leaves)}: it was written by a different configuration"
            )
        leaves = []
        for i, like in enumerate(template_leaves):
            stored = data[f"leaf_{i:05d}"]
            if _is_key(like):
                expected = jax.random.key_data(like)
                _check(path, i, stored, expected)
                leaves.append(jax.random.wrap_key_data(stored, impl=jax.random.key_impl(like)))
            else:
                _check(path, i, stored, like)
                leaves.append(jax.device_put(stored.astype(like.dtype)))
    return jax.tree.unflatten(treedef, leaves), metadata


def _check(path, index: int, stored: np.ndarray, like: Any) -> None:
    if stored.shape != like.shape or stored.dtype != np.dtype(like.dtype):
        raise CheckpointError(
            f"checkpoint {path}: array {index} has shape {stored.shape} dtype {stored.dtype}, the "
            f"training state expects {like.shape} {like.dtype}: written by a different configuration"
        )
