"""Checkpoints of the whole training state (parameters, optimisers, replay buffer, env instances,
keys and counters), so a resumed run continues exactly where the saved one stood.

A checkpoint is one `.npz` holding the state's leaves in tree order plus a JSON metadata record
that names each leaf by its path in the state (`jax.tree_util.keystr`, e.g. ".agent.config.tau").
Restoring needs a template state of the same structure (a freshly initialised one): leaves are
matched by path and every leaf's shape and dtype is checked, so a checkpoint from another config
is refused with a message instead of being loaded wrongly. Leaves added to the state since a
checkpoint's format (`ADDED_SINCE`: knobs that entered the configs) take the template's values,
which are the run's config: an older run resumes as it was. Files are written to a temporary name and renamed, so a
crash while saving never leaves a truncated checkpoint behind; a CRC-32 of every array in the
metadata catches a file damaged afterwards (truncated, overwritten, flipped bits). A replay
buffer's rows that were never written (`REPLAY`: past its fill, still the zeros it was made with)
are left out of the file and restored as zeros, so a checkpoint's size follows the transitions
stored, not the buffer's capacity.

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

FORMAT = 4
"""The layout of the training state a checkpoint holds. 4: as 3, with a replay buffer's unwritten
rows left out (`trimmed` in the metadata). 3: as 2, with each leaf's path in the metadata. 2:
algorithms in `mjx_pbac.algos` (each member's config in its agent state, learning rates in the
optimiser states, the algorithm's acting state). Checkpoints without a format are 1 (written
before that change)."""

ADDED_SINCE = {2: (".config.gamma", ".config.weight_decay"), 3: ()}
"""Format -> endings of the paths of leaves its checkpoints lack: the discount became a knob and
AdamW's weight decay was added (docs/design.md "Recipe options beyond the paper"). Their values
come from the template, i.e. the run's config (which a resume checks against the checkpoint's)."""

REPLAY = ".buffer"
"""Where a replay buffer lies in the training state (`loop.TrainState.buffer`, a
`replay.ReplayBuffer`): `REPLAY + ".size"` counts the rows written (per member), and every
`REPLAY + ".data."` leaf holds the rows on the axis after the size's own axes."""

NORMALIZATION_PATH = ".obs_moments"
"""Where the observation-normalisation statistics lie in the training state (`loop.TrainState`)."""

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
    paths = leaf_paths(state)
    leaves, trimmed = _trim_replay([np.asarray(leaf) for leaf in leaves], paths)
    arrays = {f"leaf_{i:05d}": leaf for i, leaf in enumerate(leaves)}
    record = dict(
        metadata,
        env_steps=int(env_steps),
        num_leaves=len(leaves),
        crc32=[_crc(a) for a in arrays.values()],
        paths=paths,
        trimmed=trimmed,
        format=FORMAT,
    )
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


def _trim_replay(leaves: list[np.ndarray], paths: list[str]) -> tuple[list[np.ndarray], dict[str, list[int]]]:
    """`leaves` with each replay data leaf cut to the rows written (the largest `size` of any
    member), and {leaf index: [axis, full length]} of the cut ones. A leaf is cut only where every
    row past the cut is zero, as the buffer was made (`replay.init`), so that padding with zeros
    restores it exactly; a full buffer is kept whole."""
    where = {path: i for i, path in enumerate(paths)}
    size = where.get(REPLAY + ".size")
    if size is None:
        return leaves, {}
    axis, rows = leaves[size].ndim, int(np.max(leaves[size], initial=0))
    trimmed = {}
    for i, path in enumerate(paths):
        leaf = leaves[i]
        if not path.startswith(REPLAY + ".data.") or leaf.ndim <= axis or rows >= leaf.shape[axis]:
            continue
        cut = (slice(None),) * axis
        if leaf[(*cut, slice(rows, None))].any():
            continue
        leaves[i] = np.ascontiguousarray(leaf[(*cut, slice(0, rows))])
        trimmed[str(i)] = [axis, leaf.shape[axis]]
    return leaves, trimmed


def _untrim(stored: np.ndarray, cut: list[int] | None) -> np.ndarray:
    """A stored leaf at its full length: the rows `_trim_replay` left out, as zeros."""
    if cut is None:
        return stored
    axis, full = cut
    if stored.ndim <= axis or stored.shape[axis] > full:
        raise CheckpointDamaged(f"a trimmed replay array has shape {stored.shape}, not at most {full} rows on axis {axis}")
    padding = [(0, 0)] * stored.ndim
    padding[axis] = (0, full - stored.shape[axis])
    return np.pad(stored, padding)


def leaf_paths(tree: Any) -> list[str]:
    """Each leaf's path in `tree`, in leaf order (`jax.tree_util.keystr`)."""
    return [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]


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


def restore(path: str | os.PathLike, template: Any, fill: Callable[[int], Any] | None = None) -> tuple[Any, dict[str, Any]]:
    """(state, metadata) with the leaves of `path` in the structure of `template` (a state on the
    device, or shapes: `jax.ShapeDtypeStruct` leaves give numpy arrays, e.g.
    `devices.Layout.host_template`, whose keys are key data); raises
    CheckpointDamaged for a file that cannot be read back as written, CheckpointMismatch for a
    sound checkpoint of another configuration.

    A leaf the checkpoint's format predates (`ADDED_SINCE`) takes `fill(i)` for the template's
    i-th leaf, or the template's own leaf where it holds a value."""
    template_leaves, treedef = jax.tree.flatten(template)
    template_paths = leaf_paths(template)
    metadata = read_metadata(path)
    match = _NAME.match(Path(path).name)
    if match and metadata.get("env_steps") != int(match.group(1)):
        raise CheckpointDamaged(f"checkpoint {path} records {metadata.get('env_steps')} env steps, its name another")
    written = metadata.get("format", 1)
    if written not in (*ADDED_SINCE, FORMAT):
        raise CheckpointMismatch(
            f"checkpoint {path} has format {written} and this version reads format {FORMAT}: it was written before "
            "the algorithms moved to mjx_pbac/algos, which changed how the training state is laid out (each member's "
            "config in its agent state, learning rates in the optimiser states, acting state owned by the algorithm). "
            f"Resume it with the version that wrote it (git checkout {FORMAT_1_WRITER}), or start a new run"
            if written == 1 else
            f"checkpoint {path} has format {written}, which this version (format {FORMAT}) cannot read; "
            "resume it with the version that wrote it, or start a new run"
        )
    added = ADDED_SINCE.get(written, ())
    if written >= 3:
        stored_paths = metadata.get("paths")
    else:  # the template's paths less those added since (normalisation statistics included: newer still)
        stored_paths = [p for p in template_paths if not p.endswith(added) and not p.startswith(NORMALIZATION_PATH)]
    if written >= 3 and not (isinstance(stored_paths, list) and len(stored_paths) == metadata.get("num_leaves")):
        raise CheckpointDamaged(f"checkpoint {path}: its record of the arrays' paths does not match the arrays it holds")
    _check_normalization(path, stored_paths, template_paths)
    where = {name: i for i, name in enumerate(stored_paths)}
    missing = [name for name in template_paths if name not in where and not name.endswith(added)]
    known = set(template_paths)
    if missing or len(stored_paths) != metadata.get("num_leaves") or any(name not in known for name in stored_paths):
        raise CheckpointMismatch(
            f"checkpoint {path} holds {metadata.get('num_leaves')} arrays but this config's training "
            f"state has {len(template_leaves)}: it was written by a different configuration"
            + (f" (the state's {missing[0]} is not in it)" if missing and written >= 3 else "")
        )
    crcs = metadata.get("crc32")  # absent in checkpoints written before it was recorded
    try:
        with np.load(path) as data:
            stored_leaves = [data[f"leaf_{i:05d}"] for i in range(len(stored_paths))]
    except _READ_ERRORS as error:
        raise CheckpointDamaged(f"cannot read checkpoint {path}: {type(error).__name__}: {error}") from None
    if crcs is not None:
        for i, stored in enumerate(stored_leaves):
            if i >= len(crcs) or _crc(stored) != crcs[i]:
                raise CheckpointDamaged(f"checkpoint {path}: array {i} fails its CRC-32 check (the file was damaged)")
    trimmed = (metadata.get("trimmed") or {}) if written >= 4 else {}
    leaves = []
    for j, (name, like) in enumerate(zip(template_paths, template_leaves)):
        if name not in where:  # added since the checkpoint's format: the run's own value
            leaves.append(_filled(path, name, like, fill(j) if fill is not None else None))
            continue
        i = where[name]
        try:
            stored = _untrim(stored_leaves[i], trimmed.get(str(i)))
        except CheckpointDamaged as error:
            raise CheckpointDamaged(f"checkpoint {path}: {error}") from None
        if is_key(like):
            _check(path, i, stored, jax.random.key_data(like))
            leaves.append(jax.random.wrap_key_data(stored, impl=jax.random.key_impl(like)))
        else:
            _check(path, i, stored, like)
            stored = stored.astype(like.dtype)
            leaves.append(stored if isinstance(like, jax.ShapeDtypeStruct) else jax.device_put(stored))
    return jax.tree.unflatten(treedef, leaves), metadata


def _check_normalization(path, stored_paths: list[str], template_paths: list[str]) -> None:
    """A one-line refusal when the checkpoint and the run disagree on observation normalisation."""
    stored = any(name.startswith(NORMALIZATION_PATH) for name in stored_paths)
    expected = any(name.startswith(NORMALIZATION_PATH) for name in template_paths)
    if expected and not stored:
        raise CheckpointMismatch(
            f"checkpoint {path} holds no observation-normalisation statistics, which this run expects "
            "(train.normalize_observations is on): it was written by a run without them; resume it with "
            "--train.normalize-observations False as written, or start a new run"
        )
    if stored and not expected:
        raise CheckpointMismatch(
            f"checkpoint {path} holds observation-normalisation statistics but this run does not normalise "
            "observations (train.normalize_observations is off): it was written by a run with them"
        )


def _filled(path, name: str, like: Any, value: Any) -> Any:
    """The value of a leaf the checkpoint predates: `value`, else the template's own leaf."""
    if value is None:
        if isinstance(like, jax.ShapeDtypeStruct):
            raise CheckpointMismatch(f"checkpoint {path} predates {name} and nothing gives its value")
        return like
    value = np.asarray(value)
    if value.shape != like.shape:
        raise CheckpointMismatch(f"checkpoint {path}: the value given for {name} has shape {value.shape}, the state {like.shape}")
    value = value.astype(like.dtype)
    return value if isinstance(like, jax.ShapeDtypeStruct) else jax.device_put(value)


def restore_newest(
    directory: str | os.PathLike, template: Any, warn: Callable[[str], None] = print, fill: Callable[[int], Any] | None = None
) -> tuple[Any, dict[str, Any], Path] | None:
    """(state, metadata, path) of the newest checkpoint in `directory` that loads and verifies,
    or None when there is none. Each damaged newer one is reported through `warn` and renamed to
    `<name>.damaged`; a CheckpointMismatch (another configuration's state) is raised, not passed by."""
    for path in reversed(list_checkpoints(directory)):
        try:
            state, metadata = restore(path, template, fill)
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
