"""Members over devices and hosts, with JAX's own SPMD machinery.

A run's M members (seeds x sweep points x tasks) are independent, so the member axis is the one
to spread: `layout(M, devices)` lays it over a 1-D mesh (axis "members") of D devices, every
array of the training state sharded along its leading (member) axis with
`NamedSharding(mesh, P("members"))`. `loop.make_trainer(..., mesh=...)` wraps each vmapped
program in `jax.shard_map` over that axis, so each device runs the very program a one-device run
of M/D members runs, on its own members, with no communication between devices inside a chunk.

Members that do not divide over the devices are padded: the last member is repeated until each
device holds the same number (M = 10 on 4 devices trains 12, 3 per device). Padding members run
with their copy's seed, config and task, and everything the host reads back (metrics,
evaluations, checkpoints) is cut to the M real members, so logs, reports and checkpoints are
exactly those of the run without padding. When M < D only M devices are used (one per member).

Checkpoints hold the real members only, gathered to the host (`Layout.gather`): a checkpoint
written on D devices resumes on any number of devices, with the same files as a one-device run.

Several processes (hosts): `initialize_distributed` calls `jax.distributed.initialize` when the
environment says this process is one of several (JAX_COORDINATOR_ADDRESS with JAX_NUM_PROCESSES
and JAX_PROCESS_ID, or a SLURM / Open MPI job of several tasks, which JAX detects itself). The
mesh then spans every device of every process, each process runs the same host loop on the same
global arrays, and process 0 alone writes the run directory. What the host reads (metrics,
evaluation returns, checkpoints) is gathered with `multihost_utils.process_allgather`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import threading
import time
import typing
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from mjx_pbac.checkpoint import is_key
from mjx_pbac.config import Platform

AXIS = "members"
"""The mesh axis the member axis is sharded over."""

_DISTRIBUTED_ENV = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")


def _several_tasks(name: str) -> bool:
    try:
        return int(os.environ.get(name, "1")) > 1
    except ValueError:
        return False


def initialize_distributed(environ: dict[str, str] | None = None) -> bool:
    """`jax.distributed.initialize` when this process is one of several; returns whether it was
    called. Must run before anything touches a device.

    - JAX_COORDINATOR_ADDRESS=host:port, JAX_NUM_PROCESSES=P and JAX_PROCESS_ID=i (all three):
      a plain launch, e.g. two processes on one machine or one per host by hand;
    - a SLURM job step of several tasks (SLURM_NTASKS > 1) or an Open MPI run of several ranks
      (OMPI_COMM_WORLD_SIZE > 1): JAX reads the coordinator, count and rank itself.
    Raises ValueError for an incomplete or malformed set of the three variables."""
    environ = os.environ if environ is None else environ
    given = [name for name in _DISTRIBUTED_ENV if environ.get(name)]
    if given:
        missing = [name for name in _DISTRIBUTED_ENV if name not in given]
        if missing:
            raise ValueError(
                f"{', '.join(given)} set but not {', '.join(missing)}: a multi-process run needs all of "
                f"{', '.join(_DISTRIBUTED_ENV)} (coordinator host:port, number of processes, this process's index)"
            )
        try:
            count, index = int(environ["JAX_NUM_PROCESSES"]), int(environ["JAX_PROCESS_ID"])
        except ValueError:
            raise ValueError(
                f"JAX_NUM_PROCESSES={environ['JAX_NUM_PROCESSES']!r} and JAX_PROCESS_ID={environ['JAX_PROCESS_ID']!r} "
                "must be integers"
            ) from None
        if count < 1 or not 0 <= index < count:
            raise ValueError(f"JAX_PROCESS_ID must lie in [0, JAX_NUM_PROCESSES) = [0, {count}), got {index}")
        jax.distributed.initialize(environ["JAX_COORDINATOR_ADDRESS"], num_processes=count, process_id=index)
        return True
    if _several_tasks("SLURM_NTASKS") or _several_tasks("OMPI_COMM_WORLD_SIZE"):
        jax.distributed.initialize()
        return True
    return False


PLATFORMS: tuple[str, ...] = typing.get_args(Platform)
"""`TrainConfig.platform`'s choices: auto takes the backend JAX loads (its own order: TPU, GPU, CPU)."""

ACCELERATOR_PACKAGES = ("jax-cuda13-plugin", "jax-cuda12-plugin", "jax-rocm7-plugin", "libtpu")
"""The distributions that give JAX an accelerator backend: a CUDA (or ROCm) build, or libtpu."""

INSTALL_HINT = {
    "gpu": 'install JAX\'s CUDA build: pip install -e ".[cuda12]" (or ".[cuda13]"), on a machine with an NVIDIA GPU and driver',
    "tpu": 'install JAX\'s TPU build (pip install "jax[tpu]") on a TPU VM',
}


def accelerator_packages() -> list[str]:
    """The installed `ACCELERATOR_PACKAGES`, as "name version"."""
    from importlib import metadata

    found = []
    for name in ACCELERATOR_PACKAGES:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    return found


def describe_backend() -> str:
    """One line naming what this process computes on, e.g. "device: gpu (NVIDIA H200) x1, jax 0.11.0"."""
    device = jax.devices()[0]
    hosts = jax.process_count()
    spread = f" x{jax.local_device_count()} here, {jax.device_count()} over {hosts} processes" if hosts > 1 else f" x{jax.device_count()}"
    return f"device: {device.platform} ({device.device_kind}){spread}, jax {jax.__version__}"


def use_platform(platform: str, option: str = "--train.platform") -> tuple[str, str | None]:
    """Makes this process compute on `platform` (one of `PLATFORMS`) and returns (the
    `describe_backend` line, a one-line warning or None). Call it before anything touches a
    device: with "cpu" JAX then loads the CPU backend alone (no accelerator memory is taken).
    `option` names the setting in messages.

    Raises ValueError, in one line, when the platform asked for is not what JAX can use: "gpu"
    when JAX loaded only its CPU backend (no CUDA build installed, or a CUDA build that found no
    usable GPU: JAX falls back to the CPU with a warning, and a run would go on there unnoticed).
    "auto" keeps JAX's own choice, with the warning when an accelerator build is installed and yet
    the backend is the CPU."""
    from jax._src import xla_bridge

    if platform not in PLATFORMS:
        raise ValueError(f"unknown platform {platform!r}; valid: {', '.join(PLATFORMS)}")
    if platform == "cpu" and not xla_bridge.backends_are_initialized():
        jax.config.update("jax_platforms", "cpu")
    backend = jax.default_backend()
    installed = accelerator_packages()
    built = f"jax {jax.__version__}, jaxlib {_jaxlib_version()}"
    if platform != "auto" and backend != platform:
        if platform == "cpu":
            raise ValueError(
                f"{option} cpu, but JAX's {backend} backend was already loaded in this process; "
                "set JAX_PLATFORMS=cpu in the environment instead"
            )
        why = (
            f"{', '.join(installed)} installed, but JAX found no usable {platform.upper()} (driver or libraries: "
            f"JAX's warning above says which); run with JAX_PLATFORMS={'cuda' if platform == 'gpu' else platform} to see the error"
            if installed else f"no {platform.upper()} build of JAX is installed ({built}); {INSTALL_HINT[platform]}"
        )
        raise ValueError(f"{option} {platform}: JAX loaded its {backend} backend, not {platform}: {why}")
    warning = None
    if platform == "auto" and backend == "cpu" and installed:
        warning = (
            f"warning: {', '.join(installed)} installed, yet JAX found no accelerator and runs on the CPU; "
            f"{option} gpu makes this an error"
        )
    return describe_backend(), warning


def _jaxlib_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        return "not installed"


def host_description(cpuinfo: str | None = None) -> dict[str, Any]:
    """The host's CPU: its model, its core count and a short digest of its instruction-set flags.
    XLA compiles a CPU program for the host's instruction set, so two hosts may round the same
    program differently; the digest tells whether two runs' CPUs could compute alike. `cpuinfo`:
    /proc/cpuinfo's text (read when None; on a system without it, the model alone)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as file:
                cpuinfo = file.read()
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    import hashlib
    import platform

    flags = fields.get("flags", "")
    return {
        "cpu": fields.get("model name") or platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "cpu_flags": hashlib.sha256(" ".join(sorted(flags.split())).encode()).hexdigest()[:12] if flags else None,
    }


def device_description(layout: Layout | None = None) -> dict[str, Any]:
    """The device kind and count, the host's CPU (`host_description`), and (given a layout) how
    many of the devices the run uses."""
    device = jax.devices()[0]
    record = {
        "platform": device.platform,
        "device_kind": device.device_kind,
        "device_count": jax.device_count(),
        "process_count": jax.process_count(),
        "jax": jax.__version__,
        "host": host_description(),
    }
    if layout is not None:
        record.update(devices_used=layout.devices, padded_members=layout.padded)
    return record


def is_writer() -> bool:
    """Whether this process writes the run directory (process 0; the only one in a one-process run)."""
    return jax.process_index() == 0


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a run's members live: `members` real ones, padded to `padded` over the devices of
    `mesh` (None: one device, unsharded, the programs exactly as without a mesh)."""

    members: int
    mesh: Mesh | None = None

    @property
    def devices(self) -> int:
        return 1 if self.mesh is None else self.mesh.devices.size

    @property
    def padded(self) -> int:
        """The member count the programs run: `members` rounded up to a multiple of `devices`."""
        return -(-self.members // self.devices) * self.devices

    @property
    def per_device(self) -> int:
        return self.padded // self.devices

    @property
    def sharding(self) -> NamedSharding | None:
        return None if self.mesh is None else NamedSharding(self.mesh, PartitionSpec(AXIS))

    def describe(self) -> str:
        """e.g. "10 members over 4 devices (3 per device; 2 padding members, copies of the last, not logged)"."""
        plural = "s" if self.members != 1 else ""
        if self.mesh is None:
            return f"{self.members} member{plural} on one device"
        pad = self.padded - self.members
        padding = f"; {pad} padding member{'s' if pad != 1 else ''}, copies of the last, not logged" if pad else ""
        hosts = jax.process_count()
        where = f"{self.devices} devices" + (f" of {hosts} processes" if hosts > 1 else "")
        return f"{self.members} member{plural} over {where} ({self.per_device} per device{padding})"

    def pad(self, items: list[Any]) -> list[Any]:
        """`items` (one per real member) with the last repeated up to `padded`."""
        return list(items) + [items[-1]] * (self.padded - len(items))

    def put(self, tree: Any) -> Any:
        """Host arrays with the padded member axis first -> device arrays laid out over the mesh
        (every process passes the same values)."""
        if self.mesh is None:
            return jax.device_put(tree)
        sharding = self.sharding

        def place(leaf):
            host = np.asarray(leaf)
            return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

        return jax.tree.map(place, tree)

    def gather(self, tree: Any) -> Any:
        """Device arrays with the (padded) member axis first -> numpy arrays of the real members,
        on every process; PRNG keys become their key data (uint32)."""
        def fetch(leaf):
            if leaf is None:
                return None
            if is_key(leaf):
                leaf = jax.random.key_data(leaf)
            if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
                from jax.experimental import multihost_utils

                host = multihost_utils.process_allgather(leaf, tiled=True)
            else:
                host = np.asarray(jax.device_get(leaf))
            return host[: self.members] if host.ndim and self.padded != self.members else host

        return jax.tree.map(fetch, tree)

    def host_template(self, state: Any) -> Any:
        """Shapes and dtypes of `gather(state)` (nothing moves): what a checkpoint of the real
        members holds."""
        def shape(leaf):
            if is_key(leaf):
                leaf = jax.eval_shape(jax.random.key_data, leaf)
            return jax.ShapeDtypeStruct((self.members, *leaf.shape[1:]), leaf.dtype)

        return jax.tree.map(shape, state)

    def restore(self, host: Any, like: Any) -> Any:
        """The inverse of `gather`: host arrays of the real members -> device arrays of the padded
        members laid out like `like` (a state of this layout; keys wrapped again)."""
        def pad(stored):
            stored = np.asarray(stored)
            extra = self.padded - self.members
            return np.concatenate([stored, np.repeat(stored[-1:], extra, axis=0)]) if extra else stored

        placed = self.put(jax.tree.map(pad, host))
        return jax.tree.map(
            lambda leaf, template: jax.random.wrap_key_data(leaf, impl=jax.random.key_impl(template)) if is_key(template) else leaf,
            placed,
            like,
        )


def agree(requested: int | None, seconds: float) -> tuple[int | None, float]:
    """(the stop signal any process received, the longest of the processes' `seconds`), the same
    on every process: each process of a multi-process run then stops after the same chunk and
    sizes its next chunks from the same time (`runner`), so their chunk programs and collectives
    stay in step. One `process_allgather` per call; the inputs themselves in a one-process run."""
    if jax.process_count() == 1:
        return requested, seconds
    from jax.experimental import multihost_utils

    every = np.asarray(multihost_utils.process_allgather(np.asarray([requested or 0, seconds], np.float64)))
    signal_number = int(np.max(every[..., 0]))
    return signal_number or None, float(np.max(every[..., 1]))


STOP_NOW_KEY = "mjx_pbac/stop_now"


STOP_NOW_POLL_SECONDS = 0.5
"""How often each process of a multi-process run looks for a stop at once (`watch_stop_now`)."""


def publish_stop_now(text: str) -> None:
    """Tells every process of a multi-process run to stop at once (`watch_stop_now`), through
    jax.distributed's key-value store, and waits until each has looked for it (the caller then
    ends this process: were it to end at once, a peer waiting on it in a collective would fail
    first, with an error instead of the stop); nothing in a one-process run."""
    client = _distributed_client()
    if client is None:
        return
    with contextlib.suppress(Exception):  # the store may be gone already (process 0 ended)
        client.key_value_set(STOP_NOW_KEY, text)
        time.sleep(3 * STOP_NOW_POLL_SECONDS)


def watch_stop_now(on_stop: Callable[[str], None], every: float = STOP_NOW_POLL_SECONDS) -> Callable[[], None]:
    """In a multi-process run, a thread that looks for `publish_stop_now` from any process every
    `every` seconds and then calls `on_stop(text)` (which ends the process); returns the function
    that ends the watch (call it before the process exits: a thread left waiting inside the store's
    client would abort the interpreter's exit). Nothing in a one-process run."""
    client = _distributed_client()
    if client is None:
        return lambda: None
    done = threading.Event()

    def watch() -> None:
        while not done.wait(every):
            try:
                text = client.key_value_try_get(STOP_NOW_KEY)
            except Exception:  # noqa: BLE001 - not set (NOT_FOUND), or the store is gone: look again or end
                continue
            on_stop(text)
            return

    thread = threading.Thread(target=watch, name="stop-now", daemon=True)
    thread.start()

    def end() -> None:
        done.set()
        thread.join(timeout=5)

    return end


BARRIER_SECONDS = 1800.0
"""How long `barrier` waits for the slowest process (a cold compile of every program takes minutes)."""

_barriers = itertools.count()


def barrier(what: str) -> None:
    """Waits until every process of a multi-process run reaches this call (jax.distributed's
    coordination service, not a collective); nothing in a one-process run. The runner calls it
    after compiling, before the compiled programs' first collective: on the CPU that collective
    sets up a Gloo context, whose handshake gives the peers 30 s, and a process still compiling
    (under load, minutes later than its peer) made the run fail at its first evaluation
    ("Gloo context initialization failed: DEADLINE_EXCEEDED")."""
    client = _distributed_client()
    if client is None:
        return
    client.wait_at_barrier(f"mjx_pbac/{what}/{next(_barriers)}", int(BARRIER_SECONDS * 1000))


def _distributed_client():
    if jax.process_count() == 1:
        return None
    from jax._src import distributed  # the client jax.distributed.initialize made

    return distributed.global_state.client


_TEXT_BYTES = 4096


def broadcast_text(text: str) -> str:
    """Process 0's `text` on every process (at most 4,096 bytes of UTF-8); `text` itself in a
    one-process run."""
    if jax.process_count() == 1:
        return text
    from jax.experimental import multihost_utils

    raw = text.encode()[: _TEXT_BYTES - 4]
    data = np.zeros(_TEXT_BYTES, np.uint8)
    data[:4] = np.frombuffer(np.uint32(len(raw)).tobytes(), np.uint8)
    data[4 : 4 + len(raw)] = np.frombuffer(raw, np.uint8)
    received = np.asarray(multihost_utils.broadcast_one_to_all(data))
    length = int(np.frombuffer(received[:4].tobytes(), np.uint32)[0])
    return received[4 : 4 + length].tobytes().decode(errors="replace")


def devices_used(members: int, devices: int, available: int, processes: int = 1) -> int:
    """How many devices a run of `members` members asked for `devices` (0: all) uses: every
    device of every process in a multi-process run, else at most one per member."""
    if processes > 1:
        return available
    return max(1, min(devices or available, available, members))


def layout(members: int, devices: int = 0) -> Layout:
    """The layout of `members` members over `devices` devices (0: every visible device; in a
    multi-process run every device of every process). Raises ValueError for a device count that
    is not available."""
    available = jax.device_count()
    if devices < 0:
        raise ValueError(f"train.devices must be >= 0 (0 uses all {available}), got {devices}")
    if devices > available:
        raise ValueError(
            f"train.devices is {devices} but {available} device{'s are' if available != 1 else ' is'} visible "
            f"({jax.devices()[0].platform}); use at most {available}, or 0 for all"
        )
    if jax.process_count() > 1 and devices not in (0, available):
        raise ValueError(
            f"a run of {jax.process_count()} processes uses every device of every process ({available}); "
            f"train.devices must be 0 or {available}, got {devices}"
        )
    count = devices_used(members, devices, available, jax.process_count())
    if count == 1:
        return Layout(members)
    return Layout(members, Mesh(np.asarray(jax.devices()[:count]), (AXIS,)))
