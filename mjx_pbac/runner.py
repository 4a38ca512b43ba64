"""A training run on the host: run directory, jitted chunks, evaluation, logging, checkpoints,
interrupts, divergence and resume.

RUN_DIR/
  config.json       the resolved config (and the env's) with its digest, memory estimate,
                    versions, device, and any change made on resume
  metrics.jsonl     one record per chunk: losses, alpha, ensemble spread, returns, env steps/s
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
from mjx_pbac.config import Member, RunConfig, Schedule, config_from_dict, config_to_dict, expand_members, parse_overrides
from mjx_pbac.devices import Layout
from mjx_pbac.lifecycle import LOCK_NAME, ExitCode, RunLock, StopSignals, signal_name, write_json
from mjx_pbac.logger import NullLogger, Progress, RunLogger, truncate_jsonl
from mjx_pbac.loop import VISIT_PREFIX, Trainer, make_trainer, member_inputs, non_finite_metrics

RUNS_ROOT = Path("runs")

CHANGEABLE_ON_RESUME = (
    "total_steps", "eval_interval", "checkpoint_interval", "keep_checkpoints", "progress", "tensorboard", "devices", "platform"
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
    """

    def __init__(self) -> None:
        self._origin = time.perf_counter()
        self.train_s = 0.0
        self.compile_s = 0.0

    def continue_from(self, wall_s: float, train_s: float, compile_s: float = 0.0) -> None:
        """Adds the clocks of the checkpoint a run resumes from."""
        self._origin -= wall_s
        self.train_s += train_s
        self.compile_s += compile_s

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


def build(config: RunConfig, donate: bool = True) -> Built:
    """Env, algorithm, jitted trainer, members and their layout over the devices of `config`;
    raises ValueError/TypeError for a bad env name, override, task, sweep or device count."""
    names = config.train.task_names
    env, params = envs.make_family(names, **parse_overrides(config.train.env_overrides))
    members = expand_members(config)
    layout = devices.layout(len(members), config.train.devices)
    algorithm = algos.make(config.algo, [m.config for m in members], env.observation_size, env.action_size)
    trainer = make_trainer(config.train, env, algorithm, donate=donate, mesh=layout.mesh)
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

    def _on_first_signal(self, signum: int) -> None:
        newest = self._newest_checkpoint()
        kept = f"only {newest} is kept" if newest != "none" else "there is no checkpoint yet"
        self._say(
            f"{signal_name(signum)} received: stopping after the current chunk with a checkpoint "
            f"(send it again to stop at once: {kept})"
        )

    def _on_stop_now(self, signum: int) -> None:
        message = (
            f"stopped at once by a second {signal_name(signum)} after {self.env_steps:,} env steps; nothing after "
            f"checkpoint {self._newest_checkpoint()} was kept. Continue with `python train.py --resume {self.run_dir}`"
        )
        self._summary("interrupted", message, self.clocks.wall_s, exit_code=128 + signum)
        self._say(message)

    def execute(self) -> Path:
        status, message, exit_code, error_text = "failed", "", ExitCode.FAILED, None
        logger, record_status = None, True
        self.progress = Progress(self.schedule.total_env_steps, self.train.progress and self.writer)
        with StopSignals(on_first=self._on_first_signal, on_stop_now=self._on_stop_now) as stop:
            try:
                if self.record is not None and self.writer:
                    write_json(self.run_dir / "config.json", self.record)
                    self._summary("running", "", 0.0)
                self.clocks = Clocks()  # from here: building the state counts as the run's time
                state = self.built.init_state()
                chunk = 0
                if self.resume:
                    state, chunk = self._restore(state)
                    self._summary("running", "", self.clocks.wall_s)
                self.env_steps = chunk * self.schedule.chunk_env_steps
                logger = (
                    RunLogger(self.run_dir, self.members, self.train.tensorboard, purge_step=(self.env_steps + 1) if chunk else None)
                    if self.writer else NullLogger()
                )
                if not self.resume or chunk == 0:
                    self.progress.message(f"run directory: {self.run_dir} ({self.layout.describe()}, one program)")
                    for line in self.schedule.adjustments(self.train):
                        self.progress.message(f"note: {line}")
                status, message = self._loop(state, chunk, logger, stop)
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

    def _restore(self, template) -> tuple[Any, int]:
        """(state, chunk) from the newest usable checkpoint, its clocks continued in
        `self.clocks`; with none, the run starts
        again from step 0 with its earlier outputs set aside in RUN_DIR/attempts/N."""
        found = checkpoint.restore_newest(self.checkpoint_dir, self.layout.host_template(template), warn=self._say)
        if found is None:
            aside = self._set_aside_outputs()
            where = f" (the earlier attempt's logs are kept in {aside})" if aside else ""
            self._say(f"no usable checkpoint in {self.checkpoint_dir}: starting {self.run_dir} again from step 0{where}")
            self._record_changes(0)
            self.resume = False
            return template, 0
        host_state, metadata, path = found
        stored = metadata.get("config")
        if stored is not None:
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
        chunk = int(metadata["chunk"])
        env_steps = chunk * self.schedule.chunk_env_steps
        if env_steps != metadata["env_steps"] or chunk > self.schedule.num_chunks:
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
        self.clocks.continue_from(wall_s, float(metadata.get("train_s", wall_s)), float(metadata.get("compile_s", 0.0)))
        return self.layout.restore(host_state, like=template), chunk

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

    def _loop(self, state, chunk: int, logger: RunLogger, stop: StopSignals) -> tuple[str, str]:
        """Trains from `chunk` to the end or a stop request; returns (status, message)."""
        if chunk == 0:
            self._evaluate(state, 0, logger)
        saved_chunk = chunk
        requested = devices.agreed_signal(stop.requested)
        while chunk < self.schedule.num_chunks:
            if requested is not None:
                break
            state, chunk = self._chunk(state, chunk, logger, self.progress)
            self.env_steps = env_steps = chunk * self.schedule.chunk_env_steps
            last = chunk == self.schedule.num_chunks
            if chunk % self.schedule.eval_every_chunks == 0 or last:
                self._evaluate(state, env_steps, logger)
            requested = devices.agreed_signal(stop.requested)  # every process stops after the same chunk
            if chunk % self.schedule.checkpoint_every_chunks == 0 or last or requested is not None:
                self._save(state, chunk)
                saved_chunk = chunk
        if chunk == self.schedule.num_chunks:
            return "finished", ""
        if saved_chunk != chunk:  # stopped before the first chunk of this process: nothing new to keep
            self._save(state, chunk)
        name = signal_name(requested)
        if chunk == 0:
            return "interrupted", (
                f"interrupted by {name} before the first chunk; nothing to keep. "
                f"`python train.py --resume {self.run_dir}` starts it from step 0"
            )
        return "interrupted", (
            f"interrupted by {name} at {self.env_steps:,} env steps; checkpoint {self._newest_checkpoint()} saved. "
            f"Continue with `python train.py --resume {self.run_dir}`"
        )

    def _chunk(self, state, chunk: int, logger: RunLogger, progress: Progress):
        warmup = chunk < self.schedule.warmup_chunks
        name = "warmup_chunk" if warmup else "train_chunk"
        function = getattr(self.trainer, name)
        first_call = name not in self.called
        compile_seconds = 0.0
        if first_call:  # compiled ahead, timed apart, so that train_s holds no compile
            tick = time.perf_counter()
            self._compile(function, state)
            compile_seconds = time.perf_counter() - tick
            self.clocks.compile_s += compile_seconds
        tick = time.perf_counter()
        state, metrics = function(state)
        metrics = self.layout.gather(metrics)  # the one host transfer per chunk (it also waits for it)
        seconds = time.perf_counter() - tick
        self.clocks.train_s += seconds
        self.called.add(name)
        chunk += 1
        env_steps = chunk * self.schedule.chunk_env_steps
        bad = non_finite_metrics(metrics)
        if bad:
            saved = checkpoint.list_checkpoints(self.checkpoint_dir)
            keep = f"the last good checkpoint is {saved[-1]}" if saved else "no checkpoint was written before it"
            where = "; ".join(
                f"{name} in " + ", ".join(self._member_name(self.members[i]) for i in members)
                for name, members in sorted(bad.items())
            )
            raise TrainingDiverged(
                f"training diverged in the chunk ending at {env_steps:,} env steps: non-finite {where}. "
                f"Nothing after the previous checkpoint was saved; {keep}. "
                "Lower the learning rates or check the env overrides."
            )
        start_steps = env_steps - self.schedule.chunk_env_steps
        visits = {name.removeprefix(VISIT_PREFIX): metrics.pop(name) for name in list(metrics) if name.startswith(VISIT_PREFIX)}
        logger.log_visits(self._visit_records(visits, start_steps))
        updates = 0 if warmup else self.schedule.iterations_per_chunk * self.train.updates_per_step
        timing = {
            "chunk_seconds": seconds,
            "compiled": first_call,
            "env_steps_per_s": self.schedule.chunk_env_steps * len(self.members) / seconds,
            "updates_per_s": updates * len(self.members) / seconds,
        }
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
            records.append({**record, **timing})
        logger.log_chunk(records)
        if not first_call:
            progress.update(
                env_steps,
                self.schedule.chunk_env_steps,
                seconds,
                timing["updates_per_s"],
                self.last_eval,
                members=len(self.members),
                eval_success=self.last_success,
                phase="warmup" if warmup else "train",
            )
        else:
            what = "warm-up" if warmup else "training"
            progress.message(f"compiled the {what} chunk in {compile_seconds:.1f} s and ran its first in {seconds:.1f} s")
        return state, chunk

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

    def _visit_records(self, visits: dict[str, np.ndarray], start_steps: int) -> list[dict]:
        """Records for the vector steps of this chunk that cross a multiple of visit_interval."""
        interval = self.train.visit_interval
        if not interval or not visits:
            return []
        steps = start_steps + self.schedule.num_envs * np.arange(1, self.schedule.iterations_per_chunk + 1)
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
        clocks = self.clocks.record()  # when this policy existed, before its evaluation runs
        result = self.layout.gather(self.trainer.evaluate(state))
        returns = np.asarray(result["returns"], dtype=float)  # [M, E]
        lengths = np.asarray(result["lengths"])
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
        logger.log_eval(records)

    def _save(self, state, chunk: int) -> None:
        members = self.layout.gather(state)  # every process takes part; process 0 writes
        if not self.writer:
            return
        checkpoint.save(
            self.checkpoint_dir,
            members,
            env_steps=chunk * self.schedule.chunk_env_steps,
            metadata={
                "chunk": chunk,
                "elapsed_s": self.clocks.wall_s,
                "train_s": self.clocks.train_s,
                "compile_s": self.clocks.compile_s,
                "config": config_to_dict(self.config),
            },
            keep=self.train.keep_checkpoints,
        )

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
            write_json(self.run_dir / "summary.json", summary)
        except OSError as write_error:
            print(f"warning: could not write {self.run_dir / 'summary.json'} ({write_error.strerror}); status {status}", file=sys.stderr)
