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

A run holds its directory's lock for its whole life (`rundir.RunLock`). A stop signal asks the
run to stop after the chunk in progress, with a checkpoint (`StopSignals` reads the signals,
`Stopping` decides, from what the run is doing, whether that fits the grace period):
docs/preemption.md says what each tool sends and what the run does.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable


class ExitCode(enum.IntEnum):
    FINISHED = 0
    FAILED = 1
    USAGE = 2
    DIVERGED = 3
    LOCKED = 4
    INTERRUPTED = 75  # EX_TEMPFAIL: stopped cleanly, try again (resume) later


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
    even while the main thread waits on a long computation on the device (a Python handler would
    only run once it returned). Outside the main thread this does nothing: signals belong to it.
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


def resume_command(run_dir) -> str:
    """`python train.py --resume RUN_DIR`, the command that continues a run, naming the program
    as this process was started (`mjx-pbac` for the installed command: `cli.program`)."""
    from mjx_pbac.cli import program

    return f"{program()} --resume {run_dir}"


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class Stopping:
    """A run's answer to stop signals, from what its main thread is doing (`doing`): after the
    current chunk with a checkpoint when that fits the grace period, else at once.

    The run tells it what it does (`doing`), how far it got (`env_steps`, `saved_env_steps`) and
    how long a checkpoint takes (`save_seconds`); `stopped` is set once its training loop has
    returned. `say(text)` prints to the user, `newest()` names the newest checkpoint ("none"),
    and `record(message, exit_code)` writes the status of a stop at once (summary.json). `signals()`
    gives the `StopSignals` wired to it."""

    def __init__(self, run_dir, grace: float, say: Callable[[str], None], newest: Callable[[], str], record: Callable[[str, int], None]):
        self.run_dir, self.grace = run_dir, grace
        self.say, self.newest, self.record = say, newest, record
        self.activity: tuple[str, float, float | None] = ("setting up", time.perf_counter(), None)
        """(what the main thread is doing, since when, its expected seconds or None if unknown)."""
        self.env_steps = 0
        """Env steps reached so far (the end of the last chunk run)."""
        self.saved_env_steps = 0
        """Env steps of the newest checkpoint this run has (what a stop at once keeps)."""
        self.save_seconds: float | None = None
        """How long the last checkpoint took to write."""
        self.stopped = threading.Event()
        """Set once the training loop has returned (or raised): a stop's grace is no longer needed."""
        self.resume = resume_command(run_dir)
        """The command that continues the run (named here, not in a signal handler)."""

    def signals(self) -> StopSignals:
        return StopSignals(on_first=self.on_first_signal, on_stop_now=self.on_stop_now, on_repeat=self.on_repeat_signal)

    def doing(self, what: str, expected: float | None = None) -> None:
        """The main thread starts `what`, expected to take `expected` seconds (None: not known)."""
        self.activity = (what, time.perf_counter(), expected)

    def _resume_hint(self) -> str:
        return f"Continue with `{self.resume}`"

    def seconds_to_stop(self) -> float | None:
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

    def lost(self) -> str:
        """What a stop at once loses, in words."""
        newest = self.newest()
        unsaved = self.env_steps - self.saved_env_steps
        keep = f"checkpoint {newest} is kept" if newest != "none" else "there is no checkpoint"
        if unsaved <= 0 and self.activity[0] != "running a chunk":
            return f"nothing was lost ({keep})"
        if unsaved > 0:
            return f"the {unsaved:,} env steps since it and the chunk in progress were lost ({keep})"
        return f"the chunk in progress was lost ({keep})"

    def on_first_signal(self, signum: int) -> bool:
        """Stop after the current chunk with a checkpoint, or (returns True) at once when that is
        expected to take longer than the grace period. When the chunk's end is not known (a
        compile, a program's first chunk) the run waits for it, up to the grace
        (`on_grace_over`)."""
        name, grace = signal_name(signum), self.grace
        left = self.seconds_to_stop()
        if grace > 0 and (left is None or left <= grace):  # a grace of 0: none, the first signal stops at once
            what = self.activity[0].removeprefix("running a ")
            where = {
                "chunk": "after the current chunk", "between chunks": "before the next chunk",
                "writing a checkpoint": "once the checkpoint being written is done", "evaluating": "after the evaluation in progress",
            }.get(what, f"once {what} is done")
            untimed = "" if self.save_seconds is not None or what == "writing a checkpoint" else " plus a checkpoint's write, not timed yet"
            when = (
                f"in about {left:.0f} s{untimed}, within the {grace:g} s grace" if left is not None
                else f"its end is not known yet: waiting for it up to the {grace:g} s grace (--train.stop-grace-seconds), then stopping at once"
            )
            self.say(f"{name} received: stopping with a checkpoint {where} ({when}; send it again to stop at once)")
            timer = threading.Timer(grace, self.on_grace_over, args=(signum, what))
            timer.daemon = True
            timer.start()
            return False
        if grace > 0:
            why = f"it came while {self.activity[0]} and it needs about {left:.0f} s more, beyond the {grace:g} s grace (--train.stop-grace-seconds)"
        else:
            why = "the run has no grace (--train.stop-grace-seconds 0)"
        self.stop_at_once(f"stopped at once by {name} after {self.env_steps:,} env steps: {why}; {self.lost()}. {self._resume_hint()}", 128 + signum)
        return True

    def on_grace_over(self, signum: int, what: str) -> None:
        """The grace after the first stop signal is over: unless the run has stopped, or is past
        its chunk (evaluating the kept policies or writing the stop's checkpoint, which end on
        their own), it stops at once, losing the chunk in progress."""
        while not self.stopped.is_set() and not self.activity[0].startswith(("running", "compiling", "setting up")):
            self.stopped.wait(0.1)
        if self.stopped.is_set():
            return
        newest = self.newest()
        message = (
            f"stopped at once by {signal_name(signum)} after {self.env_steps:,} env steps: the {what} it came during "
            f"did not end within the {self.grace:g} s grace (--train.stop-grace-seconds); {self.lost()}. {self._resume_hint()}"
            + (f", which starts from {newest}" if newest != "none" else ", which starts it again from step 0")
        )
        self.stop_at_once(message, 128 + signum)
        sys.stderr.flush()
        os._exit(128 + signum)

    def on_repeat_signal(self, signum: int, after: float) -> None:
        self.say(
            f"{signal_name(signum)} {after:.2f} s after the first: the same stop request (signals within "
            f"{SAME_REQUEST_SECONDS:g} s count once, as `timeout`, SLURM and shells send one to a process and its group); "
            "send it again later to stop at once"
        )

    def on_stop_now(self, signum: int) -> None:
        message = f"stopped at once by a second {signal_name(signum)} after {self.env_steps:,} env steps; {self.lost()}. {self._resume_hint()}"
        self.stop_at_once(message, 128 + signum)

    def stop_at_once(self, message: str, exit_code: int) -> None:
        """Records the status, tells the other processes of a multi-process run to stop too
        (`devices.publish_stop_now`), and says why; the caller ends the process."""
        import jax

        from mjx_pbac import devices

        self.record(message, exit_code)
        self.say(message)
        devices.publish_stop_now(json.dumps({"process": jax.process_index(), "exit_code": exit_code, "message": message}))

    def on_stop_told(self, text: str) -> None:
        """Another process stopped at once (`stop_at_once`): this one records it and ends too."""
        import jax

        from mjx_pbac import devices

        try:
            told = json.loads(text)
            exit_code, message = int(told["exit_code"]), str(told["message"])
            process = told.get("process")
        except (ValueError, KeyError, TypeError):
            exit_code, message, process = 128 + signal.SIGTERM, text, "?"
        if process == jax.process_index():  # its own word: it is ending already
            return
        message = f"process {process} {message[0].lower()}{message[1:]}" if message else f"process {process} stopped at once"
        self.record(message, exit_code)
        self.say(message)
        sys.stderr.flush()
        if jax.process_index() == 0:  # it holds the store: the others must end first, or they abort on losing it
            time.sleep(5 * devices.STOP_NOW_POLL_SECONDS)
        os._exit(exit_code)

