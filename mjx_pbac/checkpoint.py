"""Checkpoints of the whole training state (parameters, optimisers, replay buffer, env instances,
keys and counters), so a resumed run continues exactly where the saved one stood.

A checkpoint is one `.npz` holding the state's leaves in tree order plus a JSON metadata record.
Restoring needs a template state of the same structure (a freshly initialised one): every leaf's
shape and dtype is checked against it, so a checkpoint from another config is refused with a
message instead of being loaded wrongly. Files are written to a temporary name and renamed, so a
crash while saving never leaves a truncated checkpoint behind; a CRC-32 of every array in the
metadata catches a file damaged afterwards (truncated, overwritten, flipped bits).

`restore_newest` falls back, with a warning, to the newest checkpoint that loads and verifies,
renaming each damaged one to `<name>.damaged` (kept, never deleted) so that later saves and
resumes pass it by.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

_NAME = re.compile(r"^step_(\d+)\.npz$")

FORMAT = 2
"""The layout of the training state a checkpoint holds. 2: algorithms in `mjx_pbac.algos` (each
member's config in its agent state, learning rates in the optimiser states, the algorithm's
acting state). Checkpoints without a format are 1 (written before that change)."""

FORMAT_1_WRITER = "2482bc7"
"""The last commit that wrote format 1 (what reads those checkpoints)."""


class CheckpointError(RuntimeError):
    exit_code = 2  # lifecycle.ExitCode.USAGE: the run was refused, nothing ran


class CheckpointDamaged(CheckpointError):
    """The file cannot be read back as it was written (truncated, corrupted, empty)."""


class CheckpointMismatch(CheckpointError):
    """A sound checkpoint of a different training state (another configuration)."""


def _crc(array: np.ndarray) -> int:
    return zlib.crc32(np.ascontiguousarray(array).view(np.uint8).reshape(-1).data)


def is_key(leaf: Any) -> bool:
    """Whether `leaf` is a typed PRNG key array (stored as its key data)."""
    return hasattr(leaf, "dtype") and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def save(directory: str | os.PathLike, state: Any, env_steps: int, metadata: dict[str, Any], keep: int = 2) -> Path:
    """Writes `directory/step_<env_steps>.npz` and deletes all but the `keep` newest."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    leaves = jax.tree.leaves(jax.device_get(jax.tree.map(lambda x: jax.random.key_data(x) if is_key(x) else x, state)))
    arrays = {f"leaf_{i:05d}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
    record = dict(metadata, env_steps=int(env_steps), num_leaves=len(leaves), crc32=[_crc(a) for a in arrays.values()], format=FORMAT)
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


_READ_ERRORS = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error, UnicodeDecodeError)


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    try:
        with np.load(path) as data:
            metadata = json.loads(bytes(data["__metadata__"]).decode())
    except _READ_ERRORS as error:
        raise CheckpointDamaged(f"cannot read checkpoint {path}: {type(error).__name__}: {error}") from None
    if not isinstance(metadata, dict):
        raise CheckpointDamaged(f"checkpoint {path}: its metadata is not a record")
    return metadata


def restore(path: str | os.PathLike, template: Any) -> tuple[Any, dict[str, Any]]:
    """(state, metadata) with the leaves of `path` in the structure of `template` (a state on the
    device, or shapes: `jax.ShapeDtypeStruct` leaves give numpy arrays, e.g.
    `devices.Layout.host_template`, whose keys are key data); raises
    CheckpointDamaged for a file that cannot be read back as written, CheckpointMismatch for a
    sound checkpoint of another configuration."""
    template_leaves, treedef = jax.tree.flatten(template)
    metadata = read_metadata(path)
    match = _NAME.match(Path(path).name)
    if match and metadata.get("env_steps") != int(match.group(1)):
        raise CheckpointDamaged(f"checkpoint {path} records {metadata.get('env_steps')} env steps, its name another")
    written = metadata.get("format", 1)
    if written != FORMAT:
        raise CheckpointMismatch(
            f"checkpoint {path} has format {written} and this version reads format {FORMAT}: it was written before "
            "the algorithms moved to mjx_pbac/algos, which changed how the training state is laid out (each member's "
            "config in its agent state, learning rates in the optimiser states, acting state owned by the algorithm). "
            f"Resume it with the version that wrote it (git checkout {FORMAT_1_WRITER}), or start a new run"
            if written == 1 else
            f"checkpoint {path} has format {written}, which this version (format {FORMAT}) cannot read; "
            "resume it with the version that wrote it, or start a new run"
        )
    if metadata.get("num_leaves") != len(template_leaves):
        raise CheckpointMismatch(
            f"checkpoint {path} holds {metadata.get('num_leaves')} arrays but this config's training "
            f"state has {len(template_leaves)}: it was written by a different configuration"
        )
    crcs = metadata.get("crc32")  # absent in checkpoints written before it was recorded
    try:
        with np.load(path) as data:
            stored_leaves = [data[f"leaf_{i:05d}"] for i in range(len(template_leaves))]
    except _READ_ERRORS as error:
        raise CheckpointDamaged(f"cannot read checkpoint {path}: {type(error).__name__}: {error}") from None
    leaves = []
    for i, (like, stored) in enumerate(zip(template_leaves, stored_leaves)):
        if crcs is not None and (i >= len(crcs) or _crc(stored) != crcs[i]):
            raise CheckpointDamaged(f"checkpoint {path}: array {i} fails its CRC-32 check (the file was damaged)")
        if is_key(like):
            _check(path, i, stored, jax.random.key_data(like))
            leaves.append(jax.random.wrap_key_data(stored, impl=jax.random.key_impl(like)))
        else:
            _check(path, i, stored, like)
            stored = stored.astype(like.dtype)
            leaves.append(stored if isinstance(like, jax.ShapeDtypeStruct) else jax.device_put(stored))
    return jax.tree.unflatten(treedef, leaves), metadata


def restore_newest(
    directory: str | os.PathLike, template: Any, warn: Callable[[str], None] = print
) -> tuple[Any, dict[str, Any], Path] | None:
    """(state, metadata, path) of the newest checkpoint in `directory` that loads and verifies,
    or None when there is none. Each damaged newer one is reported through `warn` and renamed to
    `<name>.damaged`; a CheckpointMismatch (another configuration's state) is raised, not passed by."""
    for path in reversed(list_checkpoints(directory)):
        try:
            state, metadata = restore(path, template)
        except CheckpointDamaged as error:
            aside = path.with_name(path.name + ".damaged")
            try:
                os.replace(path, aside)
                kept = f"kept as {aside.name}"
            except OSError as rename_error:
                kept = f"left in place ({rename_error.strerror})"
            warn(f"warning: {error}; {kept}, trying the one before it")
            continue
        return state, metadata, path
    return None


def _check(path, index: int, stored: np.ndarray, like: Any) -> None:
    if stored.shape != like.shape or stored.dtype != np.dtype(like.dtype):
        raise CheckpointMismatch(
            f"checkpoint {path}: array {index} has shape {stored.shape} dtype {stored.dtype}, the "
            f"training state expects {like.shape} {like.dtype}: written by a different configuration"
        )
