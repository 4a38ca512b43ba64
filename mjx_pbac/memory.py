"""How much memory a run needs, computed before anything is allocated, and a check that refuses
a run that cannot fit on its device.

Without it a huge `buffer_size`, hidden width, `eval_episodes`, `num_envs` or seed count ends
in an out-of-memory traceback, an XLA abort (exit 134) or a hang, sometimes minutes into the
run. `check(config)` instead refuses it at once with one line that names the part that does not
fit and the options that shrink it:

    this run needs about 43.7 TiB on cpu (replay buffer 43.7 TiB: buffer_size 1,000,000,000 x
    1,000 members x 24 B per transition; a checkpoint's host copy doubles it); 22.8 GiB is
    available (MemAvailable) and a run may use 90% of it: lower train.buffer_size, or
    train.num_seeds (1,000 members)

What is counted (`estimate`):

- the training state (`loop.TrainState`), EXACT: `jax.eval_shape` of the trainer's init for one
  member (nothing is allocated) times the member count, which is computed arithmetically
  (tasks x sweep grid points x seeds; the member list is never built). Split into the replay
  buffer, the agent (parameters, targets, optimiser moments), the env instances and the rest
  (heads, counters, keys, task constants).
- the working set of a training chunk, a documented rough UPPER estimate: the "env step"
  (`step_bytes`: the next env state beside the current one, the N transitions, the policy's
  activations on N observations) and the "gradient steps" of one vector step (`update_bytes`):
  the `updates_per_step x batch_size` transitions sampled in one gather, the activations of one
  gradient step and one agent state's worth of gradients and updated parameters/moments. The
  activations are counted from the agent's Dense kernels (optimiser moments excluded; targets,
  priors and DRND's random targets included): every output unit of every kernel holds, per
  sample, ACTIVATION_FLOATS floats (the Dense output, LayerNorm's output and CReLU's doubled
  width), and as many again for the backward pass. Against XLA's own count on a CPU (the
  compiled chunk's temp_size_in_bytes; chain env, widths 32-1024, batch 64-1024, 1-5 updates,
  pbac, drnd, ben) this is 1.3 to 3.4 times what the program really uses; evaluation's
  estimate about twice.
- evaluation (`eval_bytes`): `eval_episodes` env states per member (`jax.eval_shape` of the
  env's reset), twice (the scan's state and the stepped one), plus the actor's activations on
  `eval_episodes` observations and the per-episode returns, lengths and flags.
- the host copy of a checkpoint (`checkpoint_host_bytes` = the state's bytes): on a CPU it
  shares the device's memory, so it is counted there; on a GPU it is checked against the
  host's memory. `checkpoint_bytes` is the size of the largest checkpoint file on disk (its replay
  buffers full: a checkpoint stores only the rows written).

Training chunks, evaluation and checkpoints run one at a time between chunks, so the device
total is the state plus the largest of these working sets. XLA's own scratch and fragmentation
are not modelled; the check keeps SAFETY_FRACTION of what is available for them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import typing
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from mjx_pbac.config import RunConfig, config_to_dict, parse_sweep, parse_task_overrides
from mjx_pbac.devices import devices_used

SAFETY_FRACTION = 0.9
"""A run may use at most this share of the available memory (the rest for XLA's scratch space,
fragmentation and what the estimate leaves out)."""

ACTIVATION_FLOATS = 4
"""Floats held per Dense output unit per sample in the forward pass: the Dense output, the
LayerNorm output and the CReLU output (twice the width)."""

BACKWARD_FACTOR = 2
"""A gradient step also holds the activations' gradients (about as many again). A network's
second pass in a step (the target critics, the actor at s') needs no gradient and is not
counted again: XLA frees its activations before the backward pass peaks."""

CHECKPOINT_LEAF_OVERHEAD = 512
"""Bytes per array of a checkpoint file beyond its data: zip headers, central directory entry,
the .npy header and the array's CRC in the metadata (measured about 300)."""

CHECKPOINT_FIXED_OVERHEAD = 16 * 1024
"""Bytes of a checkpoint file beyond its arrays and the config's JSON: the metadata record."""


STATE_PARTS = ("replay buffer", "agent", "env instances", "heads, counters and keys")
"""The parts of the training state, as `MemoryEstimate.parts` names them."""

COPY = "checkpoint host copy"
ENV_STEP = "env step"
GRADIENT_STEPS = "gradient steps"


class MemoryBudgetError(ValueError):
    """The run cannot fit in the memory available to it; the one-line message says how much it
    needs, what dominates and which options shrink it."""


class Part(NamedTuple):
    """One part of a run's memory."""

    name: str
    """e.g. "replay buffer"."""
    bytes: int
    detail: str
    """How the number comes about, e.g. "buffer_size 100,000 x 10 members x 48 B per transition"."""
    options: tuple[str, ...]
    """The options that shrink it (before the member count's)."""
    counted: bool = True
    """Whether it adds to the device total (a working set that runs apart from a larger one, or
    a host copy on a GPU, does not)."""


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """A run's memory in bytes (Python ints: no overflow); see the module docstring."""

    platform: str
    """The device platform the estimate is for ("cpu", "gpu", ...)."""
    members: int
    member_options: tuple[str, ...]
    """The options that lower the member count (train.num_seeds, train.sweep, train.tasks)."""
    state_bytes_per_member: int
    state_bytes: int
    """The training state of all members (exact)."""
    buffer_bytes: int
    agent_bytes: int
    env_bytes: int
    other_bytes: int
    step_bytes: int
    """One env step's working set, all members (rough upper estimate)."""
    update_bytes: int
    """One vector step's gradient steps' working set, all members (rough upper estimate)."""
    eval_bytes: int
    """Evaluation's working set, all members (rough upper estimate)."""
    checkpoint_host_bytes: int
    """The host copy of the state a checkpoint makes."""
    checkpoint_bytes: int
    """One checkpoint file on disk (an upper estimate)."""
    total_device_bytes: int
    """The state plus the largest working set (and on a CPU the checkpoint's host copy)."""
    parts: tuple[Part, ...]

    def breakdown(self) -> list[Part]:
        """The parts, largest first."""
        return sorted(self.parts, key=lambda part: part.bytes, reverse=True)

    def dominant(self) -> Part:
        """The part to blame for the device total, with the bytes it causes: the largest counted
        part, where the copies a state part causes are added to it (a checkpoint's host copy of
        the state on a CPU; the gradients and updated copy of the agent in a gradient step, taken
        out of the gradient steps), so that e.g. a huge width blames the agent, not the gradient
        steps, and a huge buffer the replay buffer, not the checkpoint."""
        counted = {part.name: part for part in self.parts if part.counted}
        copy = COPY in counted
        gradients = self.agent_bytes if GRADIENT_STEPS in counted and self.update_bytes > 0 else 0
        blamed = []
        for part in self.parts:
            if part.name in STATE_PARTS:
                notes = []
                extra = part.bytes if copy else 0
                if copy:
                    notes.append("a checkpoint's host copy doubles it")
                if part.name == "agent" and gradients:
                    extra += gradients
                    notes.append("a gradient step's gradients and updated copy add as much again")
                detail = "; ".join([part.detail, *notes])
                blamed.append(part._replace(bytes=part.bytes + extra, detail=detail))
            elif part.name == GRADIENT_STEPS and part.counted:
                blamed.append(part._replace(bytes=part.bytes - gradients))
            elif part.counted and part.name != COPY:
                blamed.append(part)
        return max(blamed, key=lambda part: part.bytes)

    def summary(self) -> str:
        """e.g. "about 3.3 GiB on cpu for 10 members"."""
        plural = "s" if self.members != 1 else ""
        return f"about {format_bytes(self.total_device_bytes)} on {self.platform} for {self.members:,} member{plural}"

    def lines(self) -> list[str]:
        """Human-readable lines, the total first, then every part, largest first, e.g.
        "replay buffer 3.2 GiB (buffer_size 100,000 x 10 members x 812 B per transition)"."""
        lines = [f"total {self.summary()}"]
        for part in self.breakdown():
            note = "" if part.counted else " [not added: runs apart from a larger part or lives on the host]"
            lines.append(f"{part.name} {format_bytes(part.bytes)} ({part.detail}){note}")
        return lines

    def as_record(self) -> dict[str, Any]:
        """A JSON-ready record for config.json (every size in bytes, and the lines)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("parts", "member_options")}
        return {**fields, "lines": self.lines()}


def format_bytes(count: int | float) -> str:
    """812 -> "812 B", 3.4e9 -> "3.2 GiB" (binary units, one decimal)."""
    count = float(count)
    if count < 1024:
        return f"{int(count)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        count /= 1024
        if count < 1024 or unit == "PiB":
            return f"{count:,.1f} {unit}"
    raise AssertionError("unreachable")


def tree_bytes(tree: Any) -> int:
    """Bytes of a pytree of arrays or `jax.ShapeDtypeStruct`s, as Python ints; a PRNG key leaf
    counts its key data (as a checkpoint stores it)."""
    total = 0
    for leaf in jax.tree.leaves(tree):
        dtype = leaf.dtype
        if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
            data = jax.eval_shape(jax.random.key_data, jax.ShapeDtypeStruct(leaf.shape, dtype))
            total += math.prod(data.shape) * data.dtype.itemsize
        else:
            total += math.prod(leaf.shape) * np.dtype(dtype).itemsize
    return total


# -- members ----------------------------------------------------------------------------------


def member_count(config: RunConfig) -> int:
    """tasks x sweep grid points x seeds, without building the member list."""
    train = config.train
    grid = parse_sweep(train.sweep, config.algo)
    return len(train.task_names) * math.prod(len(values) for _, values in grid) * train.num_seeds


def _coerce(value: Any, annotation: Any) -> Any:
    """A sweep value as its field holds it (an int for a float knob becomes a float); anything
    invalid is refused by the config's own checks in `dataclasses.replace`."""
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def member_configs(config: RunConfig) -> list[Any]:
    """A handful of algorithm configs in which every value any member gives a field appears, and
    no other: per task, the first grid point, and that point with one knob changed to each of its
    values (tasks x (1 + sum of grid lengths) configs, never the product). Enough for
    `algos.make`, whose build decisions look at one field at a time (e.g. any prior_scale != 0)."""
    train, base = config.train, config.algorithm_config
    hints = typing.get_type_hints(type(base))
    grid = parse_sweep(train.sweep, config.algo)
    per_task = parse_task_overrides(train.task_overrides, train.task_names, config.algo)
    configs = []
    for task in train.task_names:
        task_values = {name: _coerce(value, hints[name]) for name, value in per_task.get(task, {}).items()}
        first = {name: _coerce(values[0], hints[name]) for name, values in grid}
        configs.append(dataclasses.replace(base, **{**task_values, **first}))
        for name, values in grid:
            for value in values[1:]:
                configs.append(dataclasses.replace(base, **{**task_values, **first, name: _coerce(value, hints[name])}))
    return configs


def _member_options(config: RunConfig) -> tuple[str, ...]:
    train = config.train
    options = ["train.num_seeds"]
    if train.sweep:
        options.append("train.sweep")
    if train.tasks:
        options.append("train.tasks")
    return tuple(options)


# -- the estimate -----------------------------------------------------------------------------


def _kernel_outputs(agent: Any, within: str | None = None) -> int:
    """Output units of the agent's Dense kernels (an ensemble's counted once per member network),
    optimiser moments excluded; with `within`, only kernels whose path names it (e.g. "actor")."""
    outputs = 0
    leaves = jax.tree_util.tree_flatten_with_path(agent)[0]
    for path, leaf in leaves:
        text = jax.tree_util.keystr(path)
        if "opt_state" in text or (within is not None and within not in text):
            continue
        last = path[-1]
        name = getattr(last, "key", getattr(last, "name", None))
        if name == "kernel" and len(leaf.shape) >= 2:
            outputs += math.prod(leaf.shape[:-2]) * leaf.shape[-1]
    return outputs


def _algorithm_options(config: RunConfig) -> tuple[str, ...]:
    section = config.algorithm_config
    names = [f.name for f in dataclasses.fields(section)]
    wanted = ("hidden_sizes", "num_critics", "predictor_hidden_sizes", "num_targets")
    return tuple(f"{config.algo}.{name}" for name in wanted if name in names)


def estimate(config: RunConfig, platform: str | None = None) -> MemoryEstimate:
    """The memory of `config`'s run on `platform` (default: the first device's), computed with
    `jax.eval_shape` (nothing is allocated) and an arithmetic member count. Builds the env and
    the algorithm (for a handful of member configs); raises ValueError/TypeError for a config
    they refuse."""
    from mjx_pbac.build import assemble
    from mjx_pbac.loop import member_inputs

    platform = platform or jax.devices()[0].platform
    train = config.train
    members = member_count(config)
    configs = member_configs(config)
    env, task_params, _, trainer = assemble(config, configs, donate=False)
    inputs = member_inputs([(train.seed, configs[0])], [task_params[0]])
    state = jax.eval_shape(trainer.init, *inputs)  # one member, leading axis 1
    one_episode = jax.eval_shape(env.reset, jax.random.key(0))

    per_member = tree_bytes(state)
    buffer = tree_bytes(state.buffer)
    agent = tree_bytes(state.agent)
    env_state = tree_bytes(state.env_state)
    other = per_member - buffer - agent - env_state
    capacity = train.buffer_size
    transition = tree_bytes(state.buffer.data) // capacity
    num_envs, batch, updates = train.num_envs, train.batch_size, train.updates_per_step

    all_outputs = _kernel_outputs(state.agent)
    actor_outputs = _kernel_outputs(state.agent, "actor") or all_outputs
    forward = ACTIVATION_FLOATS * 4  # bytes per kernel output unit per sample, forward only
    step = env_state + num_envs * transition + num_envs * actor_outputs * forward
    update = 0
    if updates > 0:
        activations = batch * all_outputs * forward * BACKWARD_FACTOR
        update = updates * batch * transition + activations + agent
    episode = 2 * tree_bytes(one_episode) + actor_outputs * forward + 12
    evaluation = train.eval_batch * train.eval_episodes * episode  # eval_batch points evaluated at once
    kept = train.eval_batch * agent if train.eval_batch > 1 else 0  # their policies, kept on the device

    state_total = members * per_member
    on_cpu = platform == "cpu"
    member_note = f"{members:,} member{'s' if members != 1 else ''}"
    algo_options = _algorithm_options(config)
    state_parts = [
        Part("replay buffer", members * buffer, f"buffer_size {capacity:,} x {member_note} x {transition:,} B per transition", ("train.buffer_size",)),
        Part(
            "agent",
            members * agent,
            f"{member_note} x {format_bytes(agent)}: {config.algo} parameters, targets and optimiser moments",
            algo_options,
        ),
        Part(
            "env instances",
            members * env_state,
            f"num_envs {num_envs:,} x {member_note} x {format_bytes(env_state / num_envs)}",
            ("train.num_envs",),
        ),
        Part("heads, counters and keys", members * other, f"{member_note} x {format_bytes(other)}", ("train.num_envs",)),
    ]
    if kept:
        state_parts.append(
            Part(
                "kept policies",
                members * kept,
                f"eval_batch {train.eval_batch} x {member_note} x {format_bytes(agent)}: the policies of the evaluation "
                "points awaiting their batched evaluation",
                ("train.eval_batch",),
            )
        )
    plural = "s" if num_envs != 1 else ""
    training = [
        Part(
            ENV_STEP,
            members * step,
            f"num_envs {num_envs:,} x {member_note} x {format_bytes(step / num_envs)}: the next env state, the "
            f"transition{plural} and the policy's activations of one vector step",
            ("train.num_envs",),
        ),
        Part(
            GRADIENT_STEPS,
            members * update,
            f"{member_note} x (updates_per_step {updates} x batch_size {batch:,} sampled transitions, the activations "
            "of one gradient step and the agent's gradients and updated copy)",
            ("train.batch_size", "train.updates_per_step", *algo_options),
        ),
    ]
    others = [
        Part(
            "evaluation",
            members * evaluation,
            f"eval_episodes {train.eval_episodes:,}{f' x eval_batch {train.eval_batch}' if train.eval_batch > 1 else ''} x "
            f"{member_note} x {format_bytes(episode)}: env states and the policy's activations",
            ("train.eval_episodes", *(("train.eval_batch",) if train.eval_batch > 1 else ())),
        ),
        Part(
            COPY,
            state_total,
            "a checkpoint copies the whole training state to host memory" + ("" if on_cpu else " (host, not device)"),
            max(state_parts, key=lambda part: part.bytes).options,
        ),
    ]
    # The training chunk, evaluation and a checkpoint's host copy (on a CPU) run one at a time:
    # only the largest adds to the state.
    sets = [training, others[:1]] + ([others[1:]] if on_cpu else [])
    largest = max(sets, key=lambda parts: sum(part.bytes for part in parts))
    working = [part._replace(counted=any(part is chosen for chosen in largest)) for part in training + others]
    leaves = len(jax.tree.leaves(state))
    config_json = len(json.dumps(config_to_dict(config)))
    checkpoint_file = state_total + leaves * CHECKPOINT_LEAF_OVERHEAD + config_json + CHECKPOINT_FIXED_OVERHEAD
    return MemoryEstimate(
        platform=platform,
        members=members,
        member_options=_member_options(config),
        state_bytes_per_member=per_member,
        state_bytes=state_total,
        buffer_bytes=members * buffer,
        agent_bytes=members * agent,
        env_bytes=members * env_state,
        other_bytes=members * other,
        step_bytes=members * step,
        update_bytes=members * update,
        eval_bytes=members * evaluation,
        checkpoint_host_bytes=state_total,
        checkpoint_bytes=checkpoint_file,
        total_device_bytes=state_total + members * kept + sum(part.bytes for part in largest),
        parts=tuple(state_parts + working),
    )


_estimate = estimate  # `check` has an argument of that name


# -- what is available ------------------------------------------------------------------------


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                value, *unit = line.split(":", 1)[1].split()
                return int(value) * (1024 if unit and unit[0].lower() == "kb" else 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_available() -> int | None:
    """What the process's cgroup still allows (v2 memory.max - memory.current, or v1's limit -
    usage), None without a limit."""
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            limit = Path(limit_file).read_text().strip()
            usage = int(Path(usage_file).read_text().strip())
        except (OSError, ValueError):
            continue
        if limit == "max" or not limit.isdigit() or int(limit) >= 2**60:
            return None
        return max(0, int(limit) - usage)
    return None


def host_available_bytes() -> tuple[int, str]:
    """(bytes, source) of the host memory a new allocation can use: MemAvailable of /proc/meminfo
    (else the free pages from os.sysconf), capped by the cgroup's limit where one is set."""
    available, source = _meminfo_available(), "MemAvailable"
    if available is None:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        source = "free pages (sysconf)"
    cgroup = _cgroup_available()
    if cgroup is not None and cgroup < available:
        available, source = cgroup, "cgroup memory limit"
    return int(available), source


def available_bytes(device: Any = None) -> tuple[int, str]:
    """(bytes, source) of the memory a run on `device` (default: the first) can use: on an
    accelerator the allocator's bytes_limit minus bytes_in_use (`device.memory_stats()`); on a
    CPU (or a device without memory stats) the host's available memory."""
    device = device if device is not None else jax.devices()[0]
    if device.platform != "cpu":
        try:
            stats = device.memory_stats()
        except Exception:  # noqa: BLE001 (a backend without the query)
            stats = None
        if stats and "bytes_limit" in stats:
            limit, used = int(stats["bytes_limit"]), int(stats.get("bytes_in_use", 0))
            return limit - used, f"{device.device_kind} bytes_limit - bytes_in_use"
        available, source = host_available_bytes()
        return available, f"{source}; {device.platform} reports no memory stats"
    return host_available_bytes()


# -- the check --------------------------------------------------------------------------------


def _refusal(needed: int, where: str, part: Part, estimate: MemoryEstimate, available: tuple[int, str]) -> str:
    count, source = available
    options = ", ".join(part.options)
    members = ""
    if estimate.members > 1:
        members = f", or {' / '.join(estimate.member_options)} ({estimate.members:,} members)"
    what = f"{part.name} {format_bytes(part.bytes)}: {part.detail}"
    return (
        f"this run needs about {format_bytes(needed)} on {where} ({what}); "
        f"{format_bytes(max(count, 0))} is available ({source}) and a run may use {SAFETY_FRACTION:.0%} of it: "
        f"lower {options}{members}"
    )


def check(
    config: RunConfig,
    estimate: MemoryEstimate | None = None,
    available: tuple[int, str] | None = None,
    host_available: tuple[int, str] | None = None,
) -> MemoryEstimate:
    """The estimate of `config` (computed unless given), after refusing with a one-line
    `MemoryBudgetError` a run whose device total exceeds SAFETY_FRACTION of `available` (default
    `available_bytes()`), or, off a CPU, whose checkpoint host copy exceeds that share of
    `host_available` (default `host_available_bytes()`). The message names the dominant part and
    the options that shrink it."""
    estimate = estimate if estimate is not None else _estimate(config)
    available = available if available is not None else available_bytes()
    needed, where = estimate.total_device_bytes, estimate.platform
    spread = 1
    if estimate.platform != "cpu":
        spread = devices_used(estimate.members, config.train.devices, jax.device_count(), jax.process_count())
    if spread > 1:  # each accelerator holds its share of the members (CPU devices share the host's memory)
        per_device = -(-estimate.members // spread)
        needed = estimate.total_device_bytes * per_device // estimate.members
        where = f"each of {spread} {estimate.platform} devices ({per_device:,} member{'s' if per_device != 1 else ''} each)"
    if needed > SAFETY_FRACTION * available[0]:
        raise MemoryBudgetError(_refusal(needed, where, estimate.dominant(), estimate, available))
    if estimate.platform != "cpu":
        host = host_available if host_available is not None else host_available_bytes()
        if estimate.checkpoint_host_bytes > SAFETY_FRACTION * host[0]:
            copy = next(part for part in estimate.parts if part.name == COPY)
            raise MemoryBudgetError(_refusal(estimate.checkpoint_host_bytes, "the host", copy, estimate, host))
    return estimate
