"""The run directory: its layout, its files' names, and every read and write of it that is not a
log row or a checkpoint's contents (`logger`, `checkpoint`).

RUN_DIR/
  config.json       the resolved config (and the env's) with its digest, memory estimate,
                    versions, device, and any change made on resume
  metrics.jsonl     one record per chunk run (`TrainConfig.chunk_seconds` may split a chunk of the
                    schedule into shorter ones): losses, alpha, ensemble spread, returns, env steps/s
                    (and, for an env that reports success, the episodes' success rate)
  eval.jsonl        one record per evaluation: every episode's return and length (and, for an
                    env that reports success, `success_rate`: the fraction of the episodes
                    with return > 0, Meta-World's success of an episode), and the run's two
                    clocks when that policy existed (`records.Clocks`): `wall_s` and `train_s`
  visits.jsonl      where each member's first env instance was, every `visit_interval` env steps
  tb/               TensorBoard scalars (tensorboardX)
  checkpoints/      step_<env steps>.npz, the newest `keep_checkpoints` (damaged ones found on
                    resume are renamed step_<env steps>.npz.damaged)
  summary.json      status (running, finished, interrupted, diverged, failed: see
                    `mjx_pbac.lifecycle`), exit code, error, final evaluation, timings
  error.log         the traceback of a failed run
  attempts/N/       the logs of an attempt that ended before its first checkpoint
  evaluations/      `train.py evaluate`'s reports of checkpoints evaluated again (written by
                    that command alone; a run never reads them)
  videos/           `train.py video`'s films of a member's policy (that command alone, likewise)
  .lock             held by the process running the run (`RunLock`)

A run directory is never overwritten: starting a run in an existing one is an error; `resume`
continues it from its newest checkpoint that loads and verifies, cutting the logs back to that
step, so the resumed run produces exactly what the uninterrupted one would have. A run that
ended before its first checkpoint is started again from step 0 by `resume`, its earlier logs set
aside. Resume refuses a config.json that was edited by hand (its digest) or that differs from
what the checkpoint was written with; the settings in CHANGEABLE_ON_RESUME change only through
`resume`'s own options, recorded in config.json's "changes".

A run holds an exclusive lock (`fcntl.flock` on RUN_DIR/.lock, which names the holder) for its
whole life, so a second run, resume or table of the same directory is refused with the holder's
pid, host and command. The kernel drops the lock when its process dies, however it dies, so a
lock is never stale; the file's holder record then only tells the next process who was there.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import json
import os
import re
import shutil
import socket
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from mjx_pbac.lifecycle import ExitCode, resume_command

CONFIG = "config.json"
METRICS = "metrics.jsonl"
EVAL = "eval.jsonl"
VISITS = "visits.jsonl"
TENSORBOARD = "tb"
CHECKPOINTS = "checkpoints"
SUMMARY = "summary.json"
ERROR_LOG = "error.log"
ATTEMPTS = "attempts"
LOCK = ".lock"
EVALUATIONS = "evaluations"
VIDEOS = "videos"

LOGS = (METRICS, EVAL, VISITS)
"""The JSONL logs, one row per member and env step (cut back to a checkpoint's step on resume)."""

OUTPUTS = (*LOGS, TENSORBOARD, SUMMARY, ERROR_LOG)
"""What a run writes besides config.json and checkpoints (set aside when it starts again)."""

RUNS_ROOT = Path("runs")
"""Where a run without `--train.run-dir` makes its directory (relative to the working directory)."""

CHANGEABLE_ON_RESUME = (
    "total_steps", "eval_interval", "checkpoint_interval", "keep_checkpoints", "progress", "tensorboard", "devices", "platform",
    "chunk_seconds", "chunk_loop", "stop_grace_seconds", "eval_batch",
)
"""Train settings `--resume` may change (`python train.py --resume DIR --train.total-steps N`):
they change neither the state's shapes nor what the steps already taken did (a checkpoint holds
the members, not how they were laid out over devices)."""


class RunError(RuntimeError):
    """A run could not start or continue; the message says why and what to do."""

    exit_code = ExitCode.USAGE


class RunLocked(RuntimeError):
    """The run directory is held by another live process."""

    exit_code = ExitCode.LOCKED


# -- writing and reading files -------------------------------------------------------------


def write_json(path: Path, record: dict[str, Any]) -> None:
    """Writes `record` to `path` through a temporary file and a rename, so a reader (or a crash)
    never sees half a file."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(temporary, path)


def log_file(path: Path) -> Path | None:
    """The file that holds the JSONL log `path`: `path` itself, else its gzip archive `path.gz`
    (a run kept as evidence, compressed with `gzip eval.jsonl`), else None."""
    archive = path.with_name(path.name + ".gz")
    return path if path.is_file() else archive if archive.is_file() else None


def read_jsonl(path: Path, notes: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of a JSONL log, read from `path.gz` where only that exists (`log_file`); none when
    neither exists. With `notes`, a line that does not parse (the last line of a run killed
    mid-write) is skipped and said there; without, it raises."""
    found = log_file(path)
    if found is None:
        return []
    text = gzip.decompress(found.read_bytes()).decode() if found is not path else found.read_text()
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if notes is None:
                raise
            notes.append(f"{found}: line {number} is not valid JSON and was skipped")
    return rows


def config_digest(config_record: dict[str, Any]) -> str:
    """SHA-256 of a config as stored in config.json (canonical JSON), to tell a hand edit."""
    return hashlib.sha256(json.dumps(config_record, sort_keys=True).encode()).hexdigest()


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


def _os_error(what: str, path: Path, error: OSError) -> RunError:
    return RunError(f"{what} {path}: {error.strerror or error}")


def read_run_record(run_dir: Path) -> dict[str, Any]:
    """config.json of `run_dir`, parsed; a RunError says what is wrong with it."""
    run_dir = Path(run_dir)
    path = run_dir / CONFIG
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


def load_run_config(run_dir: Path):
    """(config, profile) of a run directory, validated as a new config is; a RunError names a
    damaged, invalid or hand-edited config.json."""
    import dataclasses

    from mjx_pbac.config import config_from_dict, expand_members
    from mjx_pbac.schedule import Schedule

    record = read_run_record(Path(run_dir))
    path = Path(run_dir) / CONFIG
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
            f"explicitly: `{resume_command(run_dir)} --train.total-steps N` (changeable: {changeable})"
        )
    return config, str(record.get("profile", "custom"))


def record_changes(run_dir: Path, config_record: dict[str, Any], effective_steps: dict[str, Any], changes: dict[str, Any], env_steps: int) -> dict[str, Any]:
    """Writes a resume's allowed `changes` into config.json (the new config record, its digest, a
    history entry at `env_steps`); returns the entry."""
    record = read_run_record(run_dir)
    before = record["config"]["train"]
    entry = {"at_env_steps": env_steps, "time": datetime.now().isoformat(timespec="seconds")}
    entry.update({f"train.{k}": [before.get(k), v] for k, v in changes.items() if before.get(k) != v})
    record["config"] = config_record
    record["config_sha256"] = config_digest(json.loads(json.dumps(config_record)))
    record["effective_steps"] = effective_steps
    record.setdefault("changes", []).append(entry)
    write_json(run_dir / CONFIG, record)
    return entry


def run_task(run_dir: Path) -> str:
    """The env a run trained (config.json's train.env), or the directory's name when unreadable."""
    try:
        return str(json.loads((Path(run_dir) / CONFIG).read_text())["config"]["train"]["env"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError):
        return Path(run_dir).name


def set_aside_outputs(run_dir: Path) -> Path | None:
    """Moves the outputs of an attempt that ended before its first checkpoint to
    RUN_DIR/attempts/N; returns that folder (None when there was nothing to move)."""
    present = [run_dir / name for name in OUTPUTS if (run_dir / name).exists()]
    if not present:
        return None
    attempts = run_dir / ATTEMPTS
    number = 1 + sum(1 for _ in attempts.iterdir()) if attempts.is_dir() else 1
    aside = attempts / str(number)
    aside.mkdir(parents=True)
    for path in present:
        os.replace(path, aside / path.name)
    return aside


def append_error_log(run_dir: Path, env_steps: int, text: str) -> Path | None:
    """Appends a traceback to RUN_DIR/error.log; returns its path (None if it cannot be written)."""
    path = run_dir / ERROR_LOG
    try:
        with open(path, "a") as handle:
            handle.write(f"-- {datetime.now().isoformat(timespec='seconds')} after {env_steps} env steps\n")
            handle.write(text)
        return path
    except OSError:
        return None


# -- creating -------------------------------------------------------------------------------


def safe_name(text: str) -> str:
    """`text` with every run of characters other than letters, digits, `_.-` made one `_`."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._") or "run"


def _has_outputs(run_dir: Path) -> bool:
    """Whether `run_dir` holds anything but the lock and temporary files."""
    return any(p.name != LOCK and not (p.name.startswith(".") and p.name.endswith(".tmp")) for p in run_dir.iterdir())


def lock(run_dir: Path) -> RunLock:
    """`run_dir`'s lock, taken (RunLocked when another process holds it)."""
    try:
        return RunLock(run_dir).acquire()
    except OSError as error:
        raise _os_error("cannot lock the run directory", run_dir, error) from None


def new_run_dir(run_dir: str | None, name: str) -> tuple[Path, RunLock]:
    """Creates and locks a run directory: `run_dir` (which must not exist or be empty), or
    runs/<name>-<time> (`name` made safe, a suffix added when taken)."""
    if run_dir:
        run_dir = Path(run_dir)
        try:
            if run_dir.exists() and not run_dir.is_dir():
                raise RunError(f"run directory {run_dir} is an existing file, not a directory; choose another --train.run-dir")
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise _os_error("cannot create the run directory", run_dir, error) from None
        held = lock(run_dir)
        try:
            if _has_outputs(run_dir):
                raise RunError(
                    f"run directory {run_dir} already exists and is not empty; continue it with "
                    f"`{resume_command(run_dir)}` or choose another --train.run-dir"
                )
        except BaseException:
            held.release()
            raise
        return run_dir, held
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    base = RUNS_ROOT / safe_name(f"{name}-{stamp}")
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
    return run_dir, lock(run_dir)


def check_disk(run_dir: Path, checkpoint_bytes: int, keep: int) -> None:
    """Refuses a run whose checkpoints (`keep` kept + the one being written, `checkpoint_bytes`
    each) cannot fit on the run directory's disk."""
    need = checkpoint_bytes * (keep + 1)
    try:
        where = run_dir.absolute()
        while not where.exists() and where != where.parent:  # the disk it will be made on
            where = where.parent
        free = shutil.disk_usage(where).free
    except OSError:
        return
    if need > free:
        raise RunError(
            f"the checkpoints of this run need about {need / 2**30:.2f} GiB ({keep} kept + "
            f"1 being written, {checkpoint_bytes / 2**30:.2f} GiB each) but {run_dir} has "
            f"{free / 2**30:.2f} GiB free; free space, lower train.keep_checkpoints, or choose another --train.run-dir"
        )


# -- the lock and the status ----------------------------------------------------------------


def _holder_record() -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now().isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv and sys.argv[0] else "python",
    }


def describe_holder(holder: dict[str, Any] | None) -> str:
    if not holder:
        return "another process"
    return f"process {holder.get('pid')} on {holder.get('host')} (`{holder.get('command')}`, since {holder.get('started')})"


class RunLock:
    """An exclusive, non-blocking lock on a run directory, held from `acquire` to `release`."""

    def __init__(self, run_dir: str | os.PathLike):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK
        self._handle = None
        self.previous: dict[str, Any] | None = None
        """The holder record left by the last process that held the lock (None if none)."""

    def acquire(self) -> RunLock:
        import fcntl

        handle = open(self.path, "a+")  # noqa: SIM115 - held open while the lock is: closing drops the flock
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = _read_holder(handle)
            locked = error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
            for _ in range(20):  # a holder that has just taken the lock writes its record next
                if holder or not locked:
                    break
                time.sleep(0.05)
                holder = _read_holder(handle)
            handle.close()
            if locked:
                raise RunLocked(
                    f"{self.run_dir} is in use by {describe_holder(holder)}; wait for it to end, or stop it "
                    f"(kill -TERM {holder.get('pid') if holder else 'PID'}: it checkpoints and exits) and try again"
                ) from None
            raise  # the filesystem cannot lock (ENOLCK): an OS error the caller reports
        self.previous = _read_holder(handle)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(_holder_record()) + "\n")
        handle.flush()
        self._handle = handle
        return self

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing drops the flock; the file (and its record) stays
            self._handle = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> bool:
        self.release()
        return False


def _read_holder(handle) -> dict[str, Any] | None:
    try:
        handle.seek(0)
        return json.loads(handle.read() or "null")
    except (OSError, ValueError):
        return None


def is_locked(run_dir: str | os.PathLike) -> bool:
    """Whether a live process holds `run_dir`'s lock (checked by trying to take it)."""
    import fcntl

    path = Path(run_dir) / LOCK
    try:
        with open(path) as handle:  # read-only: trying the lock leaves the holder record alone
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


def read_status(run_dir: str | os.PathLike) -> str | None:
    """The run's status from summary.json: finished, failed, diverged, interrupted, running (a
    live process holds it) or killed (it says running but no process holds its lock); None when
    there is no readable summary."""
    path = Path(run_dir) / SUMMARY
    try:
        status = json.loads(path.read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return None
    if status == "running" and not is_locked(run_dir):
        return "killed"
    return None if status is None else str(status)
