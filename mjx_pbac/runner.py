"""A training run on the host: run directory, jitted chunks, evaluation, logging, checkpoints,
interrupts, divergence and resume.

RUN_DIR/
  config.json       the resolved config (and the env's) with its digest, memory estimate,
                    versions, device, and any change made on resume
  metrics.jsonl     one record per chunk run (`TrainConfig.chunk_seconds` may split a chunk of the
                    schedule into shorter ones): losses, alpha, ensemble spread, returns, env steps/s
                    (and, for an env that reports success, the episodes' success rate)
  eval.jsonl        one record per evaluation: every episode's return and length (and, for an
                    env that reports success, `success_rate`: the fraction of the episodes
                    with return > 0, Meta-World's success of an episode), and the run's two
                    clocks when that policy existed (`Clocks`): `wall_s` and `train_s`
  tb/               TensorBoard scalars (tensorboardX)
  checkpoints/      step_<env steps>.npz, the newest `keep_checkpoints` (damaged ones found on
                    resume are renamed step_<env steps>.npz.damaged)
  summary.json      status (running, finished, interrupted, diverged, failed: see
                    `mjx_pbac.lifecycle`), exit code, error, final evaluation, timings
  error.log         the traceback of a failed run
  attempts/N/       the logs of an attempt that ended before its first checkpoint
  .lock             held by the process running the run (`lifecycle.RunLock`)

A run directory is never overwritten: starting a run in an existing one is an error; `resume`
continues it from its newest checkpoint that loads and verifies, cutting the logs back to that
step, so the resumed run produces exactly what the uninterrupted one would have. A run that
ended before its first checkpoint is started again from step 0 by `resume`, its earlier logs set
aside. Resume refuses a config.json that was edited by hand (its digest) or that differs from
what the checkpoint was written with; the settings in CHANGEABLE_ON_RESUME change only through
`resume`'s own options, recorded in config.json's "changes".
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import sys
import threading
import time
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

import envs
from mjx_pbac import algos, checkpoint, devices
from mjx_pbac.algos import Algorithm
from mjx_pbac.checkpoint import CheckpointError
from mjx_pbac.compiling import compile_together
from mjx_pbac.config import (
    Member,
    RunConfig,
    Schedule,
    config_from_dict,
    config_to_dict,
    edge_warnings,
    expand_members,
    parse_overrides,
)
from mjx_pbac.devices import Layout
from mjx_pbac.lifecycle import LOCK_NAME, SAME_REQUEST_SECONDS, ExitCode, RunLock, StopSignals, signal_name, write_json
from mjx_pbac.logger import NullLogger, Progress, RunLogger, truncate_jsonl
from mjx_pbac.loop import VISIT_PREFIX, Trainer, make_trainer, member_inputs, non_finite_metrics

RUNS_ROOT = Path("runs")

CHANGEABLE_ON_RESUME = (
    "total_steps", "eval_interval", "checkpoint_interval", "keep_checkpoints", "progress", "tensorboard", "devices", "platform",
    "chunk_seconds", "stop_grace_seconds", "eval_batch",
)
"""Train settings `--resume` may change (`python train.py --resume DIR --train.total-steps N`):
they change neither the state's shapes nor what the steps already taken did (a checkpoint holds
the members, not how they were laid out over devices)."""

MAX_EPISODE_LENGTH = 1_000_000
"""The longest time limit a run accepts: an evaluation steps its episodes to the time limit in
sequence, so a longer one would hold the device for hours per evaluation (the paper's is 1,000)."""

_OUTPUTS = ("metrics.jsonl", "eval.jsonl", "visits.jsonl", "tb", "summary.json", "error.log")
"""What a run writes besides config.json and checkpoints (set aside when it starts again)."""


class RunError(RuntimeError):
    """A run could not start or continue; the message says why and what to do."""

    exit_code = ExitCode.USAGE


class TrainingDiverged(RunError):
    exit_code = ExitCode.DIVERGED


class RunInterrupted(RunError):
    """A stop signal ended the run (status interrupted)."""

    label = "stopped"  # what the command line prints before the message (not an error)

    def __init__(self, message: str, exit_code: int = ExitCode.INTERRUPTED):
        super().__init__(message)
        self.exit_code = exit_code


class RunFailed(RunError):
    """An error ended the run (status failed); raised from that error."""

    exit_code = ExitCode.FAILED


# Keys of the log rows (metrics.jsonl, eval.jsonl) that record when and how fast the process ran
# (clocks, rates, whether the chunk compiled): they differ between two runs that are otherwise
# bit-identical (a resumed run against an uninterrupted one, say).
TIMING_KEYS = frozenset({"chunk_seconds", "compiled", "env_steps_per_s", "updates_per_s", "wall_s", "train_s"})


class Clocks:
    """A run's two clocks, in seconds, continued across resumes (checkpoints carry both).

    - `wall_s`: since the run began, everything included: setting up the state, compiling,
      training, evaluating, checkpointing (the wall-clock a user waits; time to score reads it).
      A resumed run continues from the value at its checkpoint, plus its own set-up; the time
      between the processes (the run not running) is not counted.
    - `train_s`: the training chunks alone: compiles (timed apart, `compile_s`), evaluations and
      checkpoints excluded (the training throughput's clock).

    and the parts `compile_s` (every program's compile, timed apart) and `eval_s` (evaluations,
    keeping policies for a batched one included), which summary.json reports.
    """

    def __init__(self) -> None:
        self._origin = time.perf_counter()
        self.train_s = 0.0
        self.compile_s = 0.0
        self.eval_s = 0.0

    def continue_from(self, wall_s: float, train_s: float, compile_s: float = 0.0, eval_s: float = 0.0) -> None:
        """Adds the clocks of the checkpoint a run resumes from."""
        self._origin -= wall_s
        self.train_s += train_s
        self.compile_s += compile_s
        self.eval_s += eval_s

    @property
    def wall_s(self) -> float:
        return time.perf_counter() - self._origin

    def record(self) -> dict[str, float]:
        return {"wall_s": self.wall_s, "train_s": self.train_s}


class Built(NamedTuple):
    env: Any
    algorithm: Algorithm
    trainer: Trainer
    members: list[Member]
    task_params: dict[str, Any]
    """Task name -> its constants (`env.task_params()`, None for envs without them)."""
    layout: Layout
    """How the members lie over the devices (`mjx_pbac.devices`)."""

    def init_state(self):
        """The members' initial training state (leading axis: the layout's padded member count,
        laid out over its devices)."""
        members = self.layout.pad(self.members)
        pairs = [(m.seed, m.config) for m in members]
        tasks = [self.task_params[m.task] for m in members]
        return self.trainer.init(*self.layout.put(member_inputs(pairs, tasks)))


def build(config: RunConfig, donate: bool = True, fuse_warmup: bool | None = None) -> Built:
    """Env, algorithm, jitted trainer, members and their layout over the devices of `config`;
    raises ValueError/TypeError for a bad env name, override, task, sweep or device count.
    `fuse_warmup` as `loop.make_trainer`'s (None: a warm-up of one chunk runs in the training
    program)."""
    names = config.train.task_names
    env, params = envs.make_family(names, **parse_overrides(config.train.env_overrides))
    members = expand_members(config)
    layout = devices.layout(len(members), config.train.devices)
    algorithm = algos.make(config.algo, [m.config for m in members], env.observation_size, env.action_size)
    trainer = make_trainer(config.train, env, algorithm, donate=donate, mesh=layout.mesh, fuse_warmup=fuse_warmup)
    return Built(env, algorithm, trainer, members, dict(zip(names, params)), layout)


def success_rates(returns: np.ndarray) -> np.ndarray:
    """[M, E] evaluation returns of an env whose reward is its success at each step (Meta-World,
    `reports_success`) -> [M] the fraction of each member's episodes that succeeded. Meta-World
    counts an episode as a success if it succeeds at any step (its evaluation ends an episode at
    the first success), i.e. iff the episode's return is > 0."""
    return (np.asarray(returns) > 0).mean(axis=-1)


def _build(config: RunConfig) -> Built:
    """`build`, its refusals of the config (a device count not available) as RunError."""
    try:
        return build(config)
    except ValueError as error:
        raise RunError(str(error)) from None


def device_description(layout: Layout | None = None) -> dict[str, Any]:
    """The device kind and count, and (given a layout) how many of them the run uses."""
    device = jax.devices()[0]
    record = {
        "platform": device.platform,
        "device_kind": device.device_kind,
        "device_count": jax.device_count(),
        "process_count": jax.process_count(),
        "jax": jax.__version__,
    }
    if layout is not None:
        record.update(devices_used=layout.devices, padded_members=layout.padded)
    return record


def config_digest(config_record: dict[str, Any]) -> str:
    """SHA-256 of a config as stored in config.json (canonical JSON), to tell a hand edit."""
    return hashlib.sha256(json.dumps(config_record, sort_keys=True).encode()).hexdigest()


def _has_outputs(run_dir: Path) -> bool:
    """Whether `run_dir` holds anything but the lock and temporary files."""
    return any(p.name != LOCK_NAME and not (p.name.startswith(".") and p.name.endswith(".tmp")) for p in run_dir.iterdir())


def _os_error(what: str, path: Path, error: OSError) -> RunError:
    return RunError(f"{what} {path}: {error.strerror or error}")


def _lock(run_dir: Path) -> RunLock:
    try:
        return RunLock(run_dir).acquire()
    except OSError as error:
        raise _os_error("cannot lock the run directory", run_dir, error) from None


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._") or "run"


def new_run_dir(config: RunConfig, profile: str) -> tuple[Path, RunLock]:
    """Creates and locks the run directory: `train.run_dir` (which must not exist or be empty),
    or runs/<profile>-<algo>-<env>-s<seed>-<time>."""
    if config.train.run_dir:
        run_dir = Path(config.train.run_dir)
        try:
            if run_dir.exists() and not run_dir.is_dir():
                raise RunError(f"run directory {run_dir} is an existing file, not a directory; choose another --train.run-dir")
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise _os_error("cannot create the run directory", run_dir, error) from None
        lock = _lock(run_dir)
        try:
            if _has_outputs(run_dir):
                raise RunError(
                    f"run directory {run_dir} already exists and is not empty; continue it with "
                    f"`python train.py --resume {run_dir}` or choose another --train.run-dir"
                )
        except BaseException:
            lock.release()
            raise
        return run_dir, lock
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    algo = "" if config.algo == "pbac" else f"{config.algo}-"
    base = RUNS_ROOT / _safe_name(f"{profile}-{algo}{config.train.env}-s{config.train.seed}-{stamp}")
    run_dir, suffix = base, 1
    while True:
        try:
            run_dir.mkdir(parents=True)
            break
        except FileExistsError:
            suffix += 1
            run_dir = base.with_name(f"{base.name}-{suffix}")
        except OSError as error:
            raise _os_error("cannot create the run directory", run_dir, error) from None
    return run_dir, _lock(run_dir)


def read_run_record(run_dir: Path) -> dict[str, Any]:
    """config.json of `run_dir`, parsed; a RunError says what is wrong with it."""
    path = run_dir / "config.json"
    try:
        if not run_dir.exists():
            raise RunError(f"no run directory {run_dir}")
        if not run_dir.is_dir():
            raise RunError(f"{run_dir} is a file, not a run directory")
        if not path.is_file():
            raise RunError(f"{run_dir} is not a run directory (no config.json)")
    except OSError as error:
        raise _os_error("cannot read the run directory", run_dir, error) from None
    try:
        record = json.loads(path.read_text())
    except OSError as error:
        raise _os_error("cannot read", path, error) from None
    except (ValueError, UnicodeDecodeError) as error:
        raise RunError(
            f"{path} is damaged ({error}); a run cannot continue without its config: restore the file "
            "or start a new run"
        ) from None
    if not isinstance(record, dict) or not isinstance(record.get("config"), dict):
        raise RunError(f"{path} has no config record; restore the file or start a new run")
    return record


def load_run_config(run_dir: Path) -> tuple[RunConfig, str]:
    """(config, profile) of a run directory, validated as a new config is; a RunError names a
    damaged, invalid or hand-edited config.json."""
    record = read_run_record(Path(run_dir))
    path = Path(run_dir) / "config.json"
    try:
        config = config_from_dict(record["config"])
        Schedule.of(config.train)
        expand_members(dataclasses.replace(config, train=dataclasses.replace(config.train, num_seeds=1)))
    except (ValueError, TypeError) as error:
        raise RunError(f"{path} holds an invalid config: {error}; restore the file or start a new run") from None
    stored = record.get("config_sha256")
    if stored is not None and stored != config_digest(record["config"]):
        changeable = ", ".join("--train." + name.replace("_", "-") for name in CHANGEABLE_ON_RESUME)
        raise RunError(
            f"{path} was edited since the run started (its config no longer matches its recorded digest); "
            "a resumed run must train what its checkpoints hold. Undo the edit, or make an allowed change "
            f"explicitly: `python train.py --resume {run_dir} --train.total-steps N` (changeable: {changeable})"
        )
    return config, str(record.get("profile", "custom"))


def config_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The "section.field" names whose values differ between two configs as stored in JSON."""
    differing = []
    for section in sorted(set(a) | set(b)):
        x, y = a.get(section), b.get(section)
        if isinstance(x, dict) and isinstance(y, dict):
            differing += [f"{section}.{k}" for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)]
        elif x != y:
            differing.append(section)
    return differing


def _with_defaults(stored: dict[str, Any]) -> dict[str, Any]:
    """A config record as this version writes it: options added since it was written take their
    defaults (the options' "off"); a record this version cannot read is returned as it is."""
    try:
        return json.loads(json.dumps(config_to_dict(config_from_dict(stored))))
    except (ValueError, TypeError):
        return stored


def _preflight(config: RunConfig) -> dict[str, Any]:
    """Refuses, before anything is written, a run that cannot fit the device's memory; returns
    the estimate for config.json."""
    from mjx_pbac import memory

    try:
        estimate = memory.check(config)
    except ValueError as error:
        raise RunError(str(error)) from None
    return estimate.as_record()


def _check_episode_length(env: Any) -> None:
    length = int(getattr(env, "episode_length", 0))
    if length > MAX_EPISODE_LENGTH:
        raise RunError(
            f"the env's time limit is {length:,} steps; a run accepts at most {MAX_EPISODE_LENGTH:,} (every "
            "evaluation steps its episodes to the time limit in sequence); lower the horizon / episode_length override"
        )


def _check_disk(run_dir: Path, config: RunConfig, estimate: dict[str, Any]) -> None:
    """Refuses a run whose checkpoints (keep_checkpoints + the one being written) cannot fit on
    the run directory's disk."""
    need = int(estimate.get("checkpoint_bytes", 0)) * (config.train.keep_checkpoints + 1)
    try:
        where = run_dir.absolute()
        while not where.exists() and where != where.parent:  # the disk it will be made on
            where = where.parent
        free = shutil.disk_usage(where).free
    except OSError:
        return
    if need > free:
        raise RunError(
            f"the checkpoints of this run need about {need / 2**30:.2f} GiB ({config.train.keep_checkpoints} kept + "
            f"1 being written, {int(estimate['checkpoint_bytes']) / 2**30:.2f} GiB each) but {run_dir} has "
            f"{free / 2**30:.2f} GiB free; free space, lower train.keep_checkpoints, or choose another --train.run-dir"
        )


def train(
    config: RunConfig | None,
    profile: str = "custom",
    resume_dir: str | Path | None = None,
    changes: dict[str, Any] | None = None,
) -> Path:
    """Runs `config` in a new run directory, or (config None) resumes `resume_dir` with its saved
    config and the allowed `changes` (CHANGEABLE_ON_RESUME); returns the run directory. Raises
    RunError (refused before running), lifecycle.RunLocked, TrainingDiverged, RunInterrupted or RunFailed.
    See the module docstring."""
    if resume_dir is not None:
        return _resume(Path(resume_dir), dict(changes or {}))
    if changes:
        raise ValueError("changes apply to a resumed run only")
    estimate = _preflight(config)
    built = _build(config)
    _check_episode_length(built.env)
    run_dir, lock = _writer_makes_run_dir(config, profile, estimate)
    try:
        env = built.env
        config_record = config_to_dict(config)
        record = {
            "profile": profile,
            "algorithm": config.algo,
            "config": config_record,
            "config_sha256": config_digest(json.loads(json.dumps(config_record))),
            "members": [
                {"index": m.index, "seed": m.seed, "label": m.label, "task": m.task, "overrides": m.overrides}
                for m in built.members
            ],
            "env_config": dataclasses.asdict(env.config) if dataclasses.is_dataclass(getattr(env, "config", None)) else {},
            "effective_steps": built.trainer.schedule.as_steps(),
            "memory_estimate": estimate,
            "device": device_description(built.layout),
            "created": datetime.now().isoformat(timespec="seconds"),
        }
        return _Run(config, run_dir, built, resume=False, record=record).execute()
    finally:
        if lock is not None:
            lock.release()


def _writer_makes_run_dir(config: RunConfig, profile: str, estimate: dict[str, Any]) -> tuple[Path, RunLock | None]:
    """(run directory, its lock): made and locked by process 0, its name passed to the others of
    a multi-process run (which hold no lock and write nothing)."""
    if devices.is_writer():
        try:
            _check_disk(Path(config.train.run_dir) if config.train.run_dir else RUNS_ROOT, config, estimate)
            run_dir, lock = new_run_dir(config, profile)
        except BaseException as error:
            devices.broadcast_text("\0" + str(error))  # the others stop too, with the reason
            raise
        devices.broadcast_text(str(run_dir))
        return run_dir, lock
    told = devices.broadcast_text("")
    if told.startswith("\0"):
        raise RunError(f"process 0 could not start the run: {told[1:]}")
    return Path(told), None


def _resume(run_dir: Path, changes: dict[str, Any]) -> Path:
    read_run_record(run_dir)  # a clear error for a missing or damaged directory before locking it
    lock = _lock(run_dir) if devices.is_writer() else None  # process 0 holds it for all
    try:
        config, _ = load_run_config(run_dir)
        unknown = sorted(set(changes) - set(CHANGEABLE_ON_RESUME))
        if unknown:
            raise RunError(f"cannot change {', '.join(unknown)} on resume; changeable: {', '.join(CHANGEABLE_ON_RESUME)}")
        if changes:
            try:
                config = dataclasses.replace(config, train=dataclasses.replace(config.train, **changes))
                Schedule.of(config.train)
            except (ValueError, TypeError) as error:
                raise RunError(f"invalid change on resume: {error}") from None
        estimate = _preflight(config)
        built = _build(config)
        _check_episode_length(built.env)
        _check_disk(run_dir, config, estimate)
        return _Run(config, run_dir, built, resume=True, changes=changes).execute()
    finally:
        if lock is not None:
            lock.release()


class _Run:
    def __init__(self, config: RunConfig, run_dir: Path, built: Built, resume: bool, record: dict | None = None, changes: dict | None = None):
        self.config, self.run_dir, self.built, self.resume = config, run_dir, built, resume
        self.record, self.changes = record, changes or {}
        self.trainer, self.members, self.layout = built.trainer, built.members, built.layout
        self.writer = devices.is_writer()
        """Whether this process writes the run directory (process 0 of a multi-process run)."""
        self.train = config.train
        self.schedule = self.trainer.schedule
        self.checkpoint_dir = run_dir / "checkpoints"
        self.last_eval: float | None = None
        self.last_success: float | None = None
        self.reports_success = bool(getattr(built.env, "reports_success", False))
        """Whether the env's reward is its success at each step (Meta-World): an episode then
        succeeded iff its return > 0, and evaluations log the success rate."""
        self.called: set[str] = set()  # programs run by this process: a first call includes its compile
        self.env_steps = 0  # reached so far (the end of the last chunk run)
        self.clocks = Clocks()
        self.progress: Progress | None = None
        self.seconds_per_iteration: dict[str, float] = {}
        """Measured per chunk program kind ("warmup", "train"), agreed over the processes: how
        long the chunks to come are expected to take (`TrainConfig.chunk_seconds`). Carried in
        checkpoints, so a resumed run sizes its first chunks from them."""
        self.lengths: dict[str, int] = {}
        """The iterations per chunk each kind runs at now (`Schedule.split`)."""
        self.activity: tuple[str, float, float | None] = ("setting up", time.perf_counter(), None)
        """(what the main thread is doing, since when, its expected seconds or None if unknown),
        read by the signal watcher to decide whether a stop fits the grace period."""
        self.saved_env_steps = 0
        """Env steps of the newest checkpoint this run has (what a stop at once keeps)."""
        self.unsaved_s = 0.0
        """Seconds of training chunks since the newest checkpoint, agreed over the processes (so
        all decide alike whether to checkpoint before a compile)."""
        self.save_seconds: float | None = None
        """How long the last checkpoint took to write."""
        self.eval_seconds: float | None = None
        """How long the last evaluation took (the first includes its compile)."""
        self.snapshots = None
        """With `eval_batch` > 1: the kept policies on the device (`Trainer.init_snapshots`)."""
        self.precompiled: set[str] = set()
        """Programs compiled together before the first chunk (`_precompile`)."""
        self.logger: RunLogger | NullLogger = NullLogger()
        self.pending: list[tuple[int, dict]] = []
        """(env steps, clocks) of the kept policies not evaluated yet, in slot order."""
        self._summary_lock = threading.Lock()
        self.stopped = threading.Event()
        """Set once the training loop has returned (or raised): a stop's grace is no longer needed."""

    # -- status ---------------------------------------------------------------------------

    def _say(self, text: str) -> None:
        if not self.writer:
            return
        if self.progress is not None and self.train.progress:
            self.progress.message(text)
        else:
            print(text, file=sys.stderr, flush=True)

    def _newest_checkpoint(self) -> str:
        saved = checkpoint.list_checkpoints(self.checkpoint_dir)
        return saved[-1].name if saved else "none"

    def _seconds_to_stop(self) -> float | None:
        """Seconds until the run could stop with a checkpoint if asked now: the rest of what the
        main thread is doing and a checkpoint's write; None when that is not known (a compile, a
        program's first chunk, setting up, or a chunk running over twice its expected time)."""
        what, since, expected = self.activity
        if what == "writing a checkpoint":
            return 0.0
        elapsed = time.perf_counter() - since
        if expected is None or elapsed > 2 * expected + 5.0:  # not timed yet, or far overdue: not known
            return None
        write = self.save_seconds if self.save_seconds is not None else 0.0  # a stop evaluates kept policies after it
        return max(0.0, expected - elapsed) + write

    def _lost(self) -> str:
        """What a stop at once loses, in words."""
        newest = self._newest_checkpoint()
        unsaved = self.env_steps - self.saved_env_steps
        keep = f"checkpoint {newest} is kept" if newest != "none" else "there is no checkpoint"
        if unsaved <= 0 and self.activity[0] != "running a chunk":
            return f"nothing was lost ({keep})"
        if unsaved > 0:
            return f"the {unsaved:,} env steps since it and the chunk in progress were lost ({keep})"
        return f"the chunk in progress was lost ({keep})"

    def _on_first_signal(self, signum: int) -> bool:
        """Stop after the current chunk with a checkpoint, or (returns True) at once when that is
        expected to take longer than the grace period. When the chunk's end is not known (a
        compile, a program's first chunk) the run waits for it, up to the grace
        (`_on_grace_over`)."""
        name, grace = signal_name(signum), self.train.stop_grace_seconds
        left = self._seconds_to_stop()
        if grace > 0 and (left is None or left <= grace):  # a grace of 0: none, the first signal stops at once
            what = self.activity[0].removeprefix("running a ")
            where = {
                "chunk": "after the current chunk", "between chunks": "before the next chunk",
                "writing a checkpoint": "once the checkpoint being written is done", "evaluating": "after the evaluation in progress",
            }.get(what, f"once {what} is done")
            when = (
                f"in about {left:.0f} s, within the {grace:g} s grace" if left is not None
                else f"its end is not known yet: waiting for it up to the {grace:g} s grace (--train.stop-grace-seconds), then stopping at once"
            )
            self._say(f"{name} received: stopping with a checkpoint {where} ({when}; send it again to stop at once)")
            timer = threading.Timer(grace, self._on_grace_over, args=(signum, what))
            timer.daemon = True
            timer.start()
            return False
        if grace > 0:
            why = f"it came while {self.activity[0]} and it needs about {left:.0f} s more, beyond the {grace:g} s grace (--train.stop-grace-seconds)"
        else:
            why = "the run has no grace (--train.stop-grace-seconds 0)"
        message = (
            f"stopped at once by {name} after {self.env_steps:,} env steps: {why}; {self._lost()}. "
            f"Continue with `python train.py --resume {self.run_dir}`"
        )
        self._stop_at_once(message, 128 + signum)
        return True

    def _on_grace_over(self, signum: int, what: str) -> None:
        """The grace after the first stop signal is over: unless the run has stopped, or is past
        its chunk (evaluating the kept policies or writing the stop's checkpoint, which end on
        their own), it stops at once, losing the chunk in progress."""
        while not self.stopped.is_set() and not self.activity[0].startswith(("running", "compiling", "setting up")):
            self.stopped.wait(0.1)
        if self.stopped.is_set():
            return
        message = (
            f"stopped at once by {signal_name(signum)} after {self.env_steps:,} env steps: the {what} it came during "
            f"did not end within the {self.train.stop_grace_seconds:g} s grace (--train.stop-grace-seconds); {self._lost()}. "
            f"Continue with `python train.py --resume {self.run_dir}`"
            + (f", which starts from {newest}" if (newest := self._newest_checkpoint()) != "none" else ", which starts it again from step 0")
        )
        self._stop_at_once(message, 128 + signum)
        sys.stderr.flush()
        os._exit(128 + signum)

    def _on_repeat_signal(self, signum: int, after: float) -> None:
        self._say(
            f"{signal_name(signum)} {after:.2f} s after the first: the same stop request (signals within "
            f"{SAME_REQUEST_SECONDS:g} s count once, as `timeout`, SLURM and shells send one to a process and its group); "
            "send it again later to stop at once"
        )

    def _on_stop_now(self, signum: int) -> None:
        message = (
            f"stopped at once by a second {signal_name(signum)} after {self.env_steps:,} env steps; {self._lost()}. "
            f"Continue with `python train.py --resume {self.run_dir}`"
        )
        self._stop_at_once(message, 128 + signum)

    def _stop_at_once(self, message: str, exit_code: int) -> None:
        """Records the status, tells the other processes of a multi-process run to stop too
        (`devices.publish_stop_now`), and says why; the caller ends the process."""
        self._summary("interrupted", message, self.clocks.wall_s, exit_code=exit_code)
        self._say(message)
        devices.publish_stop_now(json.dumps({"process": jax.process_index(), "exit_code": exit_code, "message": message}))

    def _on_stop_told(self, text: str) -> None:
        """Another process stopped at once (`_stop_at_once`): this one records it and ends too."""
        try:
            told = json.loads(text)
            exit_code, message = int(told["exit_code"]), str(told["message"])
            process = told.get("process")
        except (ValueError, KeyError, TypeError):
            exit_code, message, process = 128 + signal.SIGTERM, text, "?"
        if process == jax.process_index():  # its own word: it is ending already
            return
        message = f"process {process} {message[0].lower()}{message[1:]}" if message else f"process {process} stopped at once"
        self._summary("interrupted", message, self.clocks.wall_s, exit_code=exit_code)
        self._say(message)
        sys.stderr.flush()
        if jax.process_index() == 0:  # it holds the store: the others must end first, or they abort on losing it
            time.sleep(5 * devices.STOP_NOW_POLL_SECONDS)
        os._exit(exit_code)

    def execute(self) -> Path:
        status, message, exit_code, error_text = "failed", "", ExitCode.FAILED, None
        logger, record_status = None, True
        self.progress = Progress(self.schedule.total_env_steps, self.train.progress and self.writer)
        with StopSignals(on_first=self._on_first_signal, on_stop_now=self._on_stop_now, on_repeat=self._on_repeat_signal) as stop:
            end_watch = devices.watch_stop_now(self._on_stop_told)
            try:
                if self.record is not None and self.writer:
                    write_json(self.run_dir / "config.json", self.record)
                    self._summary("running", "", 0.0)
                self.clocks = Clocks()  # from here: building the state counts as the run's time
                state = self.built.init_state()
                iteration, evaluated = 0, False
                if self.resume:
                    state, iteration, evaluated = self._restore(state)
                    self._summary("running", "", self.clocks.wall_s)
                self.env_steps = self.saved_env_steps = iteration * self.schedule.num_envs
                logger = (
                    RunLogger(self.run_dir, self.members, self.train.tensorboard, purge_step=(self.env_steps + 1) if iteration else None)
                    if self.writer else NullLogger()
                )
                self.logger = logger
                if not self.resume or iteration == 0:
                    self.progress.message(f"run directory: {self.run_dir} ({self.layout.describe()}, one program)")
                    for line in self.schedule.adjustments(self.train):
                        self.progress.message(f"note: {line}")
                    for line in edge_warnings(self.train, self.schedule):
                        self._say(f"warning: {line}")
                status, message = self._loop(state, iteration, evaluated, logger, stop)
                self.stopped.set()
                exit_code = ExitCode.FINISHED if status == "finished" else ExitCode.INTERRUPTED
            except TrainingDiverged as error:
                status, message, exit_code = "diverged", str(error), ExitCode.DIVERGED
                raise
            except KeyboardInterrupt:  # outside the main thread, or before the handlers were set
                status, exit_code = "interrupted", 128 + signal.SIGINT
                message = (
                    f"interrupted after {self.env_steps:,} env steps; newest checkpoint {self._newest_checkpoint()}. "
                    f"Continue with `python train.py --resume {self.run_dir}`"
                )
                raise RunInterrupted(message, exit_code) from None
            except (RunError, CheckpointError):  # a resume refused (a checkpoint of other settings)
                record_status = logger is not None  # a refusal leaves the run's status as it was
                raise
            except Exception as error:
                status, exit_code = "failed", ExitCode.FAILED
                error_text = f"{type(error).__name__}: {error}"
                log = self._write_error_log()
                message = (
                    f"run failed after {self.env_steps:,} env steps: {error_text}"
                    f"{f' (traceback in {log})' if log else ''}; newest checkpoint {self._newest_checkpoint()}. "
                    f"Continue with `python train.py --resume {self.run_dir}` once the cause is fixed"
                )
                raise RunFailed(message) from error
            finally:
                self.stopped.set()  # a stop's grace timer, if any, has nothing left to end
                end_watch()
                self.progress.close()
                if logger is not None:
                    with contextlib.suppress(Exception):
                        logger.close()
                if record_status:
                    self._summary(status, message, self.clocks.wall_s, exit_code=exit_code, error=error_text)
        if status == "interrupted":
            raise RunInterrupted(message, exit_code)
        return self.run_dir

    def _write_error_log(self) -> Path | None:
        if not self.writer:
            return None
        path = self.run_dir / "error.log"
        try:
            with open(path, "a") as handle:
                handle.write(f"-- {datetime.now().isoformat(timespec='seconds')} after {self.env_steps} env steps\n")
                handle.write(traceback.format_exc())
            return path
        except OSError:
            return None

    def _restore(self, template) -> tuple[Any, int, bool]:
        """(state, iterations done, whether the evaluation due there was run) from the newest
        usable checkpoint, its clocks continued in `self.clocks`; with none, the run starts
        again from step 0 with its earlier outputs set aside in RUN_DIR/attempts/N."""
        template_leaves = jax.tree.leaves(template)
        found = checkpoint.restore_newest(
            self.checkpoint_dir,
            self.layout.host_template(template),
            warn=self._say,
            fill=lambda i: self.layout.gather(template_leaves[i]),  # leaves newer than the checkpoint: this run's values
        )
        if found is None:
            aside = self._set_aside_outputs()
            where = f" (the earlier attempt's logs are kept in {aside})" if aside else ""
            self._say(f"no usable checkpoint in {self.checkpoint_dir}: starting {self.run_dir} again from step 0{where}")
            self._record_changes(0)
            self.resume = False
            return template, 0, False
        host_state, metadata, path = found
        stored = metadata.get("config")
        if stored is not None:
            stored = _with_defaults(stored)  # options added since it was written read as their defaults
            current = json.loads(json.dumps(config_to_dict(self.config)))
            # Only what this run trains: sections of other algorithms (or ones added since) do not count.
            trained = ("train", "algo", self.config.algo)
            differing = [
                name for name in config_differences(
                    {k: stored.get(k) for k in trained}, {k: current.get(k) for k in trained}
                )
                if name.removeprefix("train.") not in (*CHANGEABLE_ON_RESUME, "run_dir")
            ]
            if differing:
                raise RunError(
                    f"checkpoint {path} was written with other settings than {self.run_dir}/config.json "
                    f"({', '.join(differing)}): it belongs to another run; move it away or start a new run"
                )
        # Checkpoints written before chunks could be split count whole chunks only.
        iteration = int(metadata.get("iterations", int(metadata["chunk"]) * self.schedule.iterations_per_chunk))
        env_steps = iteration * self.schedule.num_envs
        if env_steps != metadata["env_steps"] or iteration > self.schedule.num_chunks * self.schedule.iterations_per_chunk:
            raise RunError(
                f"checkpoint {path} is at {metadata['env_steps']:,} env steps, beyond this run's "
                f"{self.schedule.total_env_steps:,}; raise --train.total-steps to continue it"
            )
        self._record_changes(env_steps)
        if self.writer:
            for name in ("metrics.jsonl", "eval.jsonl", "visits.jsonl"):
                truncate_jsonl(self.run_dir / name, env_steps)
        self._say(f"resuming {self.run_dir} from {path.name} ({env_steps:,} env steps, {self.layout.describe()})")
        wall_s = float(metadata["elapsed_s"])
        # Checkpoints written before train_s existed: its clock continues from the wall-clock's.
        self.clocks.continue_from(
            wall_s, float(metadata.get("train_s", wall_s)), float(metadata.get("compile_s", 0.0)), float(metadata.get("eval_s", 0.0))
        )
        if metadata.get("timing_device") == jax.devices()[0].device_kind:  # timed on this kind of device
            self.seconds_per_iteration.update(
                {kind: float(value) for kind, value in dict(metadata.get("seconds_per_iteration") or {}).items()}
            )
        return self.layout.restore(host_state, like=template), iteration, not metadata.get("evaluation_pending", False)

    def _record_changes(self, env_steps: int) -> None:
        """Writes the resume's allowed changes into config.json (config, digest, a history entry)."""
        if not self.changes or not self.writer:
            return
        record = read_run_record(self.run_dir)
        before = record["config"]["train"]
        entry = {"at_env_steps": env_steps, "time": datetime.now().isoformat(timespec="seconds")}
        entry.update({f"train.{k}": [before.get(k), v] for k, v in self.changes.items() if before.get(k) != v})
        config_record = config_to_dict(self.config)
        record["config"] = config_record
        record["config_sha256"] = config_digest(json.loads(json.dumps(config_record)))
        record["effective_steps"] = self.schedule.as_steps()
        record.setdefault("changes", []).append(entry)
        write_json(self.run_dir / "config.json", record)
        self._say("changed on resume: " + ", ".join(f"{k} {v[0]} -> {v[1]}" for k, v in entry.items() if k.startswith("train.")))

    def _set_aside_outputs(self) -> Path | None:
        if not self.writer:
            return None
        present = [self.run_dir / name for name in _OUTPUTS if (self.run_dir / name).exists()]
        if not present:
            return None
        attempts = self.run_dir / "attempts"
        number = 1 + sum(1 for _ in attempts.iterdir()) if attempts.is_dir() else 1
        aside = attempts / str(number)
        aside.mkdir(parents=True)
        for path in present:
            os.replace(path, aside / path.name)
        return aside

    def _loop(self, state, iteration: int, evaluated: bool, logger: RunLogger, stop: StopSignals) -> tuple[str, str]:
        """Trains from `iteration` (vector steps done) to the end or a stop request; returns
        (status, message). Warm-up, evaluations and checkpoints fall on the boundaries of the
        schedule's chunks; each of its chunks runs whole or split (`_next_length`); a stop is
        honoured after any chunk run, with a checkpoint (an evaluation due there is left to the
        resumed run)."""
        schedule = self.schedule
        whole = schedule.iterations_per_chunk
        total = schedule.num_chunks * whole
        self._precompile(state, iteration)
        if iteration == 0 or (not evaluated and self._evaluation_due(iteration)):
            self._evaluate(state, iteration * schedule.num_envs, logger)
        requested = None
        while iteration < total:
            requested = devices.agree(stop.requested, 0.0)[0]  # also one that came while evaluating or saving
            if requested is not None:
                break
            kind = "warmup" if iteration < schedule.warmup_chunks * whole else "train"
            length = self._next_length(kind, iteration)
            state, iteration, seconds = self._chunk(state, iteration, kind, length, logger, self.progress)
            self.env_steps = env_steps = iteration * schedule.num_envs
            requested, seconds = devices.agree(stop.requested, seconds)  # every process: same stop, same sizes
            self._timed(kind, length, seconds)
            self.unsaved_s += seconds
            last = iteration == total
            pending = self._evaluation_due(iteration) and requested is not None and not last
            if self._evaluation_due(iteration) and not pending:
                self._evaluate(state, env_steps, logger)
            checkpoint_due = iteration % whole == 0 and (iteration // whole) % schedule.checkpoint_every_chunks == 0
            if requested is not None and not last:  # the checkpoint first, then the kept policies' evaluations
                self._save(state, iteration, evaluation_pending=pending, flush=False)
                self._flush(logger)
            elif checkpoint_due or last:
                self._save(state, iteration, evaluation_pending=pending)
        if iteration == total:
            return "finished", ""
        if self.saved_env_steps != self.env_steps:  # stopped before the first chunk of this process: nothing new to keep
            self._save(state, iteration)
        name = signal_name(requested)
        if iteration == 0:
            return "interrupted", (
                f"interrupted by {name} before the first chunk; nothing to keep. "
                f"`python train.py --resume {self.run_dir}` starts it from step 0"
            )
        return "interrupted", (
            f"interrupted by {name} at {self.env_steps:,} env steps; checkpoint {self._newest_checkpoint()} saved. "
            f"Continue with `python train.py --resume {self.run_dir}`"
        )

    def _precompile(self, state, iteration: int) -> None:
        """Compiles together (`compiling.compile_together`) the programs the run calls from
        `iteration` on: evaluation (or, with `eval_batch` > 1, the policy copies and their
        batched evaluation), the warm-up chunk while warm-up remains, the training chunk. A
        trainer whose programs are plain functions (tests wrap them) compiles nothing here."""
        trainer, schedule = self.trainer, self.schedule
        whole = schedule.iterations_per_chunk
        programs = {}
        if iteration < schedule.warmup_chunks * whole:
            programs["warmup_chunk"] = (trainer.warmup_chunk, (state,))
        if iteration < schedule.num_chunks * whole:
            programs["train_chunk"] = (trainer.train_chunk, (state,))
        tick = time.perf_counter()
        self.activity = ("compiling the run's programs", tick, None)
        if self.train.eval_batch == 1:
            programs["evaluate"] = (trainer.evaluate, (state,))
        else:
            self.snapshots = trainer.init_snapshots(state)  # a small program; the room every kept policy goes to
            programs["snapshot"] = (trainer.snapshot, (self.snapshots, state, np.int32(0)))
            programs["evaluate_snapshots"] = (trainer.evaluate_snapshots, (self.snapshots,))
        programs = {name: program for name, program in programs.items() if hasattr(program[0], "lower")}
        fused = trainer.warmup_chunk is trainer.train_chunk  # the warm-up runs in the training program
        if fused and "train_chunk" in programs:
            programs.pop("warmup_chunk", None)
        if not programs:
            return
        seconds, _ = compile_together(programs)
        devices.barrier("compiled")  # every process compiled before the first collective (`devices.barrier`)
        self.clocks.compile_s += time.perf_counter() - tick
        self.precompiled.update(programs)
        if fused and "train_chunk" in programs:
            self.precompiled.add("warmup_chunk")
        self.activity = ("between chunks", time.perf_counter(), 0.0)
        each = ", ".join(f"{name.removesuffix('_chunk')} {seconds[name]:.1f} s" for name in programs)
        how = "in turn" if seconds["threads"] == 1 else f"{seconds['threads']} at a time"
        self.progress.message(
            f"compiled the run's {len(programs)} programs {how} in {seconds['all']:.1f} s ({each}; tracing {seconds['lower']:.1f} s)"
        )

    def _evaluation_due(self, iteration: int) -> bool:
        whole, schedule = self.schedule.iterations_per_chunk, self.schedule
        if iteration % whole:
            return False
        chunk = iteration // whole
        return chunk % schedule.eval_every_chunks == 0 or chunk == schedule.num_chunks

    def _next_length(self, kind: str, iteration: int) -> int:
        """Iterations of the next chunk of `kind`: the length it runs at now, while that still
        fits before the next boundary of the schedule's grid; otherwise (and for its first chunk)
        chosen by `Schedule.split` from its time per iteration, or from the warm-up's for the
        first training chunk when even the warm-up's pace makes a whole chunk outlast the target."""
        whole = self.schedule.iterations_per_chunk
        distance = whole - iteration % whole
        current = self.lengths.get(kind)
        if current is not None and distance % current == 0:
            return current
        pace = self.seconds_per_iteration.get(kind)
        if pace is None and kind == "train":  # a training iteration does all a warm-up one does, and more
            warmup = self.seconds_per_iteration.get("warmup")
            if warmup is not None and warmup * whole > self.train.chunk_seconds > 0:
                pace = warmup
        self.lengths[kind] = length = self.schedule.split(distance, pace, self.train.chunk_seconds)
        return length

    def _timed(self, kind: str, length: int, seconds: float) -> None:
        """Learns the pace of `kind` from a chunk of `length` iterations that took `seconds`
        (agreed over the processes): its first chunk sets the length its chunks run at; later,
        a chunk that took over twice the target makes them shorter (never longer: each new length
        is a compile)."""
        pace = seconds / length
        known = self.seconds_per_iteration.get(kind)
        self.seconds_per_iteration[kind] = pace
        target = self.train.chunk_seconds
        if known is None or (target > 0 and seconds > 2 * target):
            shorter = self.schedule.split(length, pace, target) if target > 0 else length
            if known is None or shorter < length:
                self.lengths.pop(kind, None)  # chosen again at the next chunk, from this pace

    def _chunk(self, state, iteration: int, kind: str, length: int, logger: RunLogger, progress: Progress):
        """Runs one chunk of `length` iterations of `kind` from `iteration`; returns (state,
        iterations done, seconds it ran)."""
        warmup = kind == "warmup"
        whole = length == self.schedule.iterations_per_chunk
        name = f"{kind}_chunk" if whole else f"{kind}_chunk/{length}"
        function = getattr(self.trainer, f"{kind}_chunk") if whole else self.trainer.chunk_program(kind, length)
        first_call = name not in self.called
        compile_seconds = 0.0
        if first_call and name not in self.precompiled:  # compiled ahead, timed apart, so that train_s holds no compile
            self._checkpoint_before_the_unknown(state, iteration)
            self.activity = (f"compiling the {kind} chunk", time.perf_counter(), None)
            tick = time.perf_counter()
            self._compile(function, state)
            devices.barrier("compiled")
            compile_seconds = time.perf_counter() - tick
            self.clocks.compile_s += compile_seconds
        pace = self.seconds_per_iteration.get(kind)
        expected = None if first_call or pace is None else pace * length
        tick = time.perf_counter()
        self.activity = ("running a chunk", tick, expected)
        state, metrics = function(state)
        metrics = self.layout.gather(metrics)  # the one host transfer per chunk (it also waits for it)
        seconds = time.perf_counter() - tick
        self.activity = ("between chunks", time.perf_counter(), 0.0)
        self.clocks.train_s += seconds
        self.called.add(name)
        start_steps = iteration * self.schedule.num_envs
        iteration += length
        env_steps = iteration * self.schedule.num_envs
        chunk_env_steps = length * self.schedule.num_envs
        bad = non_finite_metrics(metrics)
        if bad:
            raise self._diverged(bad, env_steps)
        visits = {name.removeprefix(VISIT_PREFIX): metrics.pop(name) for name in list(metrics) if name.startswith(VISIT_PREFIX)}
        logger.log_visits(self._visit_records(visits, start_steps, length))
        updates = 0 if warmup else length * self.train.updates_per_step
        timing = {
            "chunk_seconds": seconds,
            "compiled": first_call,
            "env_steps_per_s": chunk_env_steps * len(self.members) / seconds,
            "updates_per_s": updates * len(self.members) / seconds,
        }
        records = [{**record, **timing} for record in self._member_records(metrics, start_steps, env_steps, warmup)]
        logger.log_chunk(records)
        if not first_call:
            progress.update(
                env_steps,
                chunk_env_steps,
                seconds,
                timing["updates_per_s"],
                self.last_eval,
                members=len(self.members),
                eval_success=self.last_success,
                phase="warmup" if warmup else "train",
            )
        else:
            what = "warm-up" if warmup else "training"
            split = "" if whole else f" of {length} of the schedule's {self.schedule.iterations_per_chunk} iterations (--train.chunk-seconds)"
            compiled = "" if name in self.precompiled else f"compiled the {what} chunk{split} in {compile_seconds:.1f} s and "
            ran = f"ran its first {what} chunk{split}" if name in self.precompiled else "ran its first"
            progress.message(f"{compiled}{ran} in {seconds:.1f} s")
        return state, iteration, seconds

    def _diverged(self, bad: dict[str, list[int]], env_steps: int) -> TrainingDiverged:
        """The error of a chunk whose metrics `bad` ({metric: member indices}) are not finite."""
        saved = checkpoint.list_checkpoints(self.checkpoint_dir)
        keep = f"the last good checkpoint is {saved[-1]}" if saved else "no checkpoint was written before it"
        where = "; ".join(
            f"{name} in " + ", ".join(self._member_name(self.members[i]) for i in members)
            for name, members in sorted(bad.items())
        )
        return TrainingDiverged(
            f"training diverged in the chunk ending at {env_steps:,} env steps: non-finite {where}. "
            f"Nothing after the previous checkpoint was saved; {keep}. "
            "Lower the learning rates or check the env overrides."
        )

    def _member_records(self, metrics: dict, start_steps: int, env_steps: int, warmup: bool) -> list[dict]:
        """One metrics.jsonl row per member from a chunk's gathered metrics ([M] arrays): episodes,
        returns, goal visits and success counted in the chunk, and (after warm-up) the update metrics."""
        records = []
        for member in self.members:
            i = member.index
            record = {"env_steps": env_steps, "member": i, "seed": member.seed, "label": member.label, "task": member.task}
            record["phase"] = "warmup" if warmup else "train"
            episodes = int(metrics["episodes"][i])
            record["episodes"] = episodes
            if "goal_steps" in metrics:
                record["goal_steps"] = int(metrics["goal_steps"][i])
                first = int(metrics["goal_first_iteration"][i])
                if first >= 0:  # the env step at the end of that iteration
                    record["first_goal_step"] = start_steps + self.schedule.num_envs * (first + 1)
            if episodes:
                record["episode_return"] = float(metrics["return_sum"][i]) / episodes
                record["episode_length"] = float(metrics["length_sum"][i]) / episodes
                if "success_sum" in metrics:
                    record["episode_success"] = int(metrics["success_sum"][i]) / episodes
            if not warmup:  # during warm-up the update metrics are placeholders
                record.update(
                    {
                        name: float(value[i])
                        for name, value in metrics.items()
                        if name not in ("episodes", "return_sum", "length_sum", "success_sum", "goal_steps", "goal_first_iteration")
                    }
                )
            records.append(record)
        return records

    def _checkpoint_before_the_unknown(self, state, iteration: int) -> None:
        """Before a compile and a first chunk, whose length no one knows, a checkpoint when the
        training since the newest one took longer than the grace period: a signal meanwhile stops
        the run at once (`_on_first_signal`), and loses no more than that."""
        if self.env_steps == self.saved_env_steps or iteration == 0:
            return
        if self.unsaved_s > self.train.stop_grace_seconds:
            self._save(state, iteration, evaluation_pending=False)

    @staticmethod
    def _compile(function, state) -> None:
        """Compiles a chunk program for `state` without running it (the jitted function's own
        cache keeps the executable, so its first call runs without compiling). A trainer whose
        chunks are plain functions (tests wrap them) has nothing to compile ahead."""
        lower = getattr(function, "lower", None)
        if lower is not None:
            lower(state).compile()

    def _member_name(self, member: Member) -> str:
        """"pbac seed 3", or "ant_delayed pbac seed 3" when the run trains several tasks."""
        task = f"{member.task} " if len(self.train.task_names) > 1 else ""
        return f"{task}{member.label} seed {member.seed}"

    def _visit_records(self, visits: dict[str, np.ndarray], start_steps: int, length: int) -> list[dict]:
        """Records for the vector steps of this chunk that cross a multiple of visit_interval."""
        interval = self.train.visit_interval
        if not interval or not visits:
            return []
        steps = start_steps + self.schedule.num_envs * np.arange(1, length + 1)
        crossed = np.flatnonzero(steps // interval > (steps - self.schedule.num_envs) // interval)
        return [
            {
                "env_steps": int(steps[j]),
                "member": m.index,
                "seed": m.seed,
                "label": m.label,
                "task": m.task,
                "state": {name: float(value[m.index, j]) for name, value in visits.items()},
            }
            for j in crossed
            for m in self.members
        ]

    def _evaluate(self, state, env_steps: int, logger: RunLogger) -> None:
        """The evaluation at `env_steps`: at once (`eval_batch` 1), or the policy kept on the
        device for the next batch (`_flush`), run when `eval_batch` are pending."""
        clocks = self.clocks.record()  # when this policy existed, before its evaluation runs
        batch = self.train.eval_batch
        if batch == 1:
            self._run_evaluation(lambda: self.trainer.evaluate(state), [(env_steps, clocks)], logger)
            return
        tick = time.perf_counter()
        if self.snapshots is None:
            self.snapshots = self.trainer.init_snapshots(state)
        self.snapshots = self.trainer.snapshot(self.snapshots, state, np.int32(len(self.pending)))
        self.clocks.eval_s += time.perf_counter() - tick  # dispatched: the copy itself overlaps what follows
        self.pending.append((env_steps, clocks))
        if len(self.pending) == batch:
            self._flush(logger)

    def _flush(self, logger: RunLogger) -> None:
        """Evaluates the pending policies (`eval_batch` > 1) in one program and logs their rows."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        self._run_evaluation(lambda: self.trainer.evaluate_snapshots(self.snapshots), pending, logger)

    def _run_evaluation(self, evaluate, points: list[tuple[int, dict]], logger: RunLogger) -> None:
        """Runs `evaluate()` (returns [M, E], or [M, P, E] for P points) and logs one row per
        member and point, with that point's env steps and clocks."""
        tick = time.perf_counter()
        self.activity = ("evaluating", tick, self.eval_seconds)
        result = self.layout.gather(evaluate())
        self.eval_seconds = time.perf_counter() - tick
        self.clocks.eval_s += self.eval_seconds
        self.activity = ("between chunks", time.perf_counter(), 0.0)
        returns = np.asarray(result["returns"], dtype=float)
        lengths = np.asarray(result["lengths"])
        if returns.ndim == 2:  # one point: [M, E]
            returns, lengths = returns[:, None], lengths[:, None]
        records = []
        for slot, (env_steps, clocks) in enumerate(points):
            records += self._eval_records(returns[:, slot], lengths[:, slot], env_steps, clocks)
        logger.log_eval(records)

    def _eval_records(self, returns: np.ndarray, lengths: np.ndarray, env_steps: int, clocks: dict) -> list[dict]:
        """eval.jsonl rows of one evaluation point: returns and lengths [M, E]."""
        self.last_eval = float(returns.mean())
        success = success_rates(returns) if self.reports_success else None
        if success is not None:
            self.last_success = float(success[[m.index for m in self.members]].mean())
        records = []
        for m in self.members:
            record = {
                "env_steps": env_steps,
                "member": m.index,
                "seed": m.seed,
                "label": m.label,
                "task": m.task,
                "return_mean": float(returns[m.index].mean()),
                "return_std": float(returns[m.index].std()),
                "length_mean": float(lengths[m.index].mean()),
                **clocks,
            }
            if success is not None:
                record["success_rate"] = float(success[m.index])
            record.update(returns=returns[m.index].tolist(), lengths=lengths[m.index].tolist())
            records.append(record)
        return records

    def _save(self, state, iteration: int, evaluation_pending: bool = False, flush: bool = True) -> None:
        """A checkpoint after `iteration` vector steps; `evaluation_pending`: the evaluation due
        there was left to the resumed run (a stop came first). Kept policies are evaluated
        first (`_flush`), so that eval.jsonl holds every evaluation before the checkpoint; a
        stop (`flush` False) writes the checkpoint first, so that the grace covers the training
        state, and evaluates them after it."""
        if flush:
            self._flush(self.logger)
        tick = time.perf_counter()
        self.activity = ("writing a checkpoint", tick, None)
        members = self.layout.gather(state)  # every process takes part; process 0 writes
        env_steps = iteration * self.schedule.num_envs
        if self.writer:
            checkpoint.save(
                self.checkpoint_dir,
                members,
                env_steps=env_steps,
                metadata={
                    "chunk": iteration // self.schedule.iterations_per_chunk,
                    "iterations": iteration,
                    "evaluation_pending": evaluation_pending,
                    "seconds_per_iteration": dict(self.seconds_per_iteration),
                    "timing_device": jax.devices()[0].device_kind,
                    "elapsed_s": self.clocks.wall_s,
                    "train_s": self.clocks.train_s,
                    "compile_s": self.clocks.compile_s,
                    "eval_s": self.clocks.eval_s,
                    "config": config_to_dict(self.config),
                },
                keep=self.train.keep_checkpoints,
            )
        self.saved_env_steps, self.unsaved_s = env_steps, 0.0
        self.save_seconds = time.perf_counter() - tick
        self.activity = ("between chunks", time.perf_counter(), 0.0)

    def _summary(self, status: str, message: str, elapsed: float, exit_code: int = ExitCode.FINISHED, error: str | None = None) -> None:
        """Writes summary.json (atomically); a failure to write it is reported, not raised, so it
        never hides the error that ended the run."""
        if not self.writer:
            return
        evaluations = []
        try:
            lines = (self.run_dir / "eval.jsonl").read_text().splitlines()
        except OSError:
            lines = []
        for line in lines:
            with contextlib.suppress(ValueError):
                evaluations.append(json.loads(line))
        last_step = max((e["env_steps"] for e in evaluations), default=None)
        final = [e for e in evaluations if e["env_steps"] == last_step]
        final_keys = ("member", "seed", "label", "task", "return_mean", "success_rate")
        summary = {
            "status": status,
            "message": message,
            "exit_code": int(exit_code),
            "env_steps": self.env_steps,
            "elapsed_s": elapsed,
            "train_s": self.clocks.train_s,
            "compile_s": self.clocks.compile_s,
            "eval_s": self.clocks.eval_s,
            "final_eval": {
                "env_steps": last_step,
                "return_mean": float(np.mean([e["return_mean"] for e in final])),
                **(
                    {"success_rate": float(np.mean([e["success_rate"] for e in final]))}
                    if all("success_rate" in e for e in final)
                    else {}
                ),
                "per_member": [{k: e.get(k) for k in final_keys if k != "success_rate" or k in e} for e in final],
            }
            if final
            else None,
            "checkpoints": [p.name for p in checkpoint.list_checkpoints(self.checkpoint_dir)],
        }
        if error is not None:
            summary["error"] = error
        if status == "running":
            summary.update(pid=os.getpid(), started=datetime.now().isoformat(timespec="seconds"))
        try:
            with self._summary_lock:  # the signal watcher may write it too (a stop at once)
                write_json(self.run_dir / "summary.json", summary)
        except OSError as write_error:
            print(f"warning: could not write {self.run_dir / 'summary.json'} ({write_error.strerror}); status {status}", file=sys.stderr)
