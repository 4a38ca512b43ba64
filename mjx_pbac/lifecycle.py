"""How a run starts, stops and says how it ended: exit codes, the run-directory lock, stop
signals, and the status a run leaves in summary.json.

Status (summary.json "status") and exit code of `train.py` (and of `table`, `probe`):

  running      written when a run starts; a run still "running" whose lock no process holds was
               killed (SIGKILL, power loss) and reads as "killed"
  finished     0   every step trained, final evaluation and checkpoint written
  failed       1   an error ended it (out of memory, I/O, a bug); "error" holds the error and
                   RUN_DIR/error.log the traceback; `--resume` continues from the newest checkpoint
  diverged     3   a non-finite loss or metric; nothing after the last good checkpoint was saved
  interrupted  75  SIGINT (Ctrl-C) or SIGTERM: the current chunk finished and a checkpoint was
                   written; `--resume` continues exactly there
  interrupted  128 + signal (130 SIGINT, 143 SIGTERM): stopped at once, with no checkpoint beyond
                   the newest on disk: by a second, later signal (signals within
                   SAME_REQUEST_SECONDS of the first are one request), or by the first when what
                   was running could not end (and be checkpointed) within
                   train.stop_grace_seconds, known ahead or found when the grace ran out
  (no run)     2   bad input: nothing was started; 4: the run directory is in use by another process

A run holds an exclusive lock (`fcntl.flock` on RUN_DIR/.lock, which names the holder) for its
whole life, so a second run, resume or table of the same directory is refused with the holder's
pid, host and command. The kernel drops the lock when its process dies, however it dies, so a
lock is never stale; the file's holder record then only tells the next process who was there.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

LOCK_NAME = ".lock"


class ExitCode(enum.IntEnum):
    FINISHED = 0
    FAILED = 1
    USAGE = 2
    DIVERGED = 3
    LOCKED = 4
    INTERRUPTED = 75  # EX_TEMPFAIL: stopped cleanly, try again (resume) later


class RunLocked(RuntimeError):
    """The run directory is held by another live process."""

    exit_code = ExitCode.LOCKED


def write_json(path: Path, record: dict[str, Any]) -> None:
    """Writes `record` to `path` through a temporary file and a rename, so a reader (or a crash)
    never sees half a file."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(temporary, path)


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
        self.path = self.run_dir / LOCK_NAME
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
            handle.close()
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
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

    path = Path(run_dir) / LOCK_NAME
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
    path = Path(run_dir) / "summary.json"
    try:
        status = json.loads(path.read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return None
    if status == "running" and not is_locked(run_dir):
        return "killed"
    return None if status is None else str(status)


SAME_REQUEST_SECONDS = 1.0
"""Stop signals within this many seconds of a request's first signal are that request, not a
second one: GNU `timeout` (without --foreground) signals its child and then the child's whole
process group, and so do SLURM's `scancel` and a batch script that forwards the signal, so one
event arrives as two signals microseconds apart. "Again" (stop at once) is a later signal."""


class StopSignals:
    """SIGINT and SIGTERM as requests to stop at the end of the current chunk (`requested`);
    `on_first(signum)` runs on the first and may return True to stop at once instead (it has
    recorded the status: the run's grace period would not cover the chunk). A stop signal within
    `SAME_REQUEST_SECONDS` of the first is the same request: `on_repeat(signum, seconds after
    the first)` runs (it says so). A later one stops the process at once: `on_stop_now(signum)`
    runs (it records the status). Either way at once, the process exits with 128 + signum.

    The signals are read by a helper thread from `signal.set_wakeup_fd`, so a second signal acts
    even while the main thread waits on a long device call (a Python handler would only run once
    that call returned). Outside the main thread this does nothing: signals belong to it.
    """

    def __init__(
        self,
        on_first: Callable[[int], bool | None] | None = None,
        on_stop_now: Callable[[int], None] | None = None,
        on_repeat: Callable[[int, float], None] | None = None,
    ):
        self.on_first = on_first
        self.on_stop_now = on_stop_now
        self.on_repeat = on_repeat
        self.requested: int | None = None
        """The first stop signal received (None: none)."""
        self._active = False
        self._first_at: float | None = None
        """When the watcher read the request's first signal (time.monotonic)."""

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._previous = {sig: signal.signal(sig, self._handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        self._previous_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._watch, name="stop-signals", daemon=True)
        self._thread.start()
        self._active = True
        return self

    def _handler(self, signum, frame) -> None:
        """The main thread's handler: it runs between bytecodes, so a request made while the main
        thread is busy in Python is seen before its next check (the watcher may be later)."""
        if self.requested is None:
            self.requested = signum

    def _watch(self) -> None:
        while True:
            try:
                data = os.read(self._read, 16)
            except OSError:
                return
            if not data:
                return
            now = time.monotonic()  # signals read together arrived together
            for signum in data:
                if signum not in (signal.SIGINT, signal.SIGTERM):
                    continue
                if self._first_at is not None and now - self._first_at < SAME_REQUEST_SECONDS:
                    if self.on_repeat is not None:
                        with contextlib.suppress(Exception):
                            self.on_repeat(signum, now - self._first_at)
                    continue
                if self._first_at is None:
                    self._first_at = now
                    if self.requested is None:
                        self.requested = signum
                    stop_now = False
                    if self.on_first is not None:
                        with contextlib.suppress(Exception):
                            stop_now = bool(self.on_first(signum))
                    if stop_now:
                        sys.stderr.flush()
                        os._exit(128 + signum)
                else:
                    with contextlib.suppress(Exception):
                        if self.on_stop_now is not None:
                            self.on_stop_now(signum)
                    sys.stderr.flush()
                    os._exit(128 + signum)

    def __exit__(self, *exc) -> bool:
        if self._active:
            signal.set_wakeup_fd(self._previous_fd)
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)
            os.close(self._write)  # the watcher reads end-of-file and returns
            self._thread.join(timeout=5)
            os.close(self._read)
            self._active = False
        return False


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
