"""A training run on the host: the loop over jitted chunks, evaluations and checkpoints of one run
directory (its layout: `mjx_pbac.rundir`), with resume, stop signals (`lifecycle.Stopping`) and
divergence. `train(config)` starts a run; `train(None, resume_dir=DIR)` continues one from its
newest checkpoint, producing exactly what the uninterrupted run would have."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import sys
import threading
import time
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any

import jax

from mjx_pbac import checkpoint, devices, records, resume, rundir
from mjx_pbac.build import Built, build
from mjx_pbac.checkpoint import CheckpointError
from mjx_pbac.compiling import compile_together
from mjx_pbac.config import RunConfig, config_to_dict
from mjx_pbac.evaluation import Evaluations
from mjx_pbac.lifecycle import ExitCode, Stopping, resume_command, signal_name
from mjx_pbac.logger import NullLogger, Progress, RunLogger, truncate_jsonl
from mjx_pbac.loop import VISIT_PREFIX, non_finite_metrics
from mjx_pbac.pacing import Pacing
from mjx_pbac.records import Clocks, chunk_rows, summary_record, visit_rows
from mjx_pbac.rundir import CHANGEABLE_ON_RESUME, RunError, RunLock
from mjx_pbac.schedule import Schedule, edge_warnings

MAX_EPISODE_LENGTH = 1_000_000
"""The longest time limit a run accepts: an evaluation steps its episodes to the time limit in
sequence, so a longer one would hold the device for hours per evaluation (the paper's is 1,000)."""


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


def train(
    config: RunConfig | None,
    profile: str = "custom",
    resume_dir: str | Path | None = None,
    changes: dict[str, Any] | None = None,
) -> Path:
    """Runs `config` in a new run directory, or (config None) resumes `resume_dir` with its saved
    config and the allowed `changes` (CHANGEABLE_ON_RESUME); returns the run directory. Raises
    RunError (refused before running), RunLocked, TrainingDiverged, RunInterrupted or RunFailed.
    See `mjx_pbac.rundir` for what the directory holds."""
    if resume_dir is not None:
        return _resume(Path(resume_dir), dict(changes or {}))
    if changes:
        raise ValueError("changes apply to a resumed run only")
    estimate = _preflight(config)
    built = _build(config)
    run_dir, lock = _writer_makes_run_dir(config, profile, estimate)
    try:
        return _Run(config, run_dir, built, resume=False, record=_config_record(config, profile, built, estimate)).execute()
    finally:
        if lock is not None:
            lock.release()


def _config_record(config: RunConfig, profile: str, built: Built, estimate: dict[str, Any]) -> dict[str, Any]:
    """config.json of a new run."""
    env = built.env
    config_record = config_to_dict(config)
    return {
        "profile": profile,
        "algorithm": config.algo,
        "config": config_record,
        "config_sha256": rundir.config_digest(json.loads(json.dumps(config_record))),
        "members": [
            {"index": m.index, "seed": m.seed, "label": m.label, "task": m.task, "overrides": m.overrides}
            for m in built.members
        ],
        "env_config": dataclasses.asdict(env.config) if dataclasses.is_dataclass(getattr(env, "config", None)) else {},
        "effective_steps": built.trainer.schedule.as_steps(),
        "memory_estimate": estimate,
        "device": devices.device_description(built.layout),
        "created": datetime.now().isoformat(timespec="seconds"),
    }


def _build(config: RunConfig) -> Built:
    """`build`, its refusals of the config (a device count not available, a time limit too long)
    as RunError."""
    try:
        built = build(config)
    except ValueError as error:
        raise RunError(str(error)) from None
    length = int(getattr(built.env, "episode_length", 0))
    if length > MAX_EPISODE_LENGTH:
        raise RunError(
            f"the env's time limit is {length:,} steps; a run accepts at most {MAX_EPISODE_LENGTH:,} (every "
            "evaluation steps its episodes to the time limit in sequence); lower the horizon / episode_length override"
        )
    return built


def _preflight(config: RunConfig) -> dict[str, Any]:
    """Refuses, before anything is written, a run that cannot fit the device's memory; returns
    the estimate for config.json."""
    from mjx_pbac import memory

    try:
        estimate = memory.check(config)
    except ValueError as error:
        raise RunError(str(error)) from None
    return estimate.as_record()


def _check_disk(run_dir: Path, config: RunConfig, estimate: dict[str, Any]) -> None:
    rundir.check_disk(run_dir, int(estimate.get("checkpoint_bytes", 0)), config.train.keep_checkpoints)


def _writer_makes_run_dir(config: RunConfig, profile: str, estimate: dict[str, Any]) -> tuple[Path, RunLock | None]:
    """(run directory, its lock): made and locked by process 0, its name passed to the others of
    a multi-process run (which hold no lock and write nothing). Without `train.run_dir` it is
    runs/<profile>-<algo>-<env>-s<seed>-<time>."""
    if devices.is_writer():
        try:
            _check_disk(Path(config.train.run_dir) if config.train.run_dir else rundir.RUNS_ROOT, config, estimate)
            algo = "" if config.algo == "pbac" else f"{config.algo}-"
            name = f"{profile}-{algo}{config.train.env}-s{config.train.seed}"
            run_dir, lock = rundir.new_run_dir(config.train.run_dir, name)
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
    rundir.read_run_record(run_dir)  # a clear error for a missing or damaged directory before locking it
    lock = rundir.lock(run_dir) if devices.is_writer() else None  # process 0 holds it for all
    try:
        config, _ = rundir.load_run_config(run_dir)
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
        self.checkpoint_dir = run_dir / rundir.CHECKPOINTS
        self.called: set[str] = set()  # programs run by this process: a first call includes its compile
        self.precompiled: set[str] = set()
        """Programs compiled together before the first chunk (`_precompile`)."""
        self.clocks = Clocks()
        self.progress: Progress | None = None
        self.logger: RunLogger | NullLogger = NullLogger()
        self.pacing = Pacing(self.schedule, self.train.chunk_seconds, probe=self.trainer.any_length)
        self.stopping = Stopping(run_dir, self.train.stop_grace_seconds, self._say, self._newest_checkpoint, self._stopped_at_once)
        self.evaluations: Evaluations | None = None
        self.unsaved_s = 0.0
        """Seconds of training chunks since the newest checkpoint, agreed over the processes (so
        all decide alike whether to checkpoint before a compile)."""
        self._summary_lock = threading.Lock()

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

    def _stopped_at_once(self, message: str, exit_code: int) -> None:
        self._summary("interrupted", message, self.clocks.wall_s, exit_code=exit_code)

    def _summary(self, status: str, message: str, elapsed: float, exit_code: int = ExitCode.FINISHED, error: str | None = None) -> None:
        """Writes summary.json (atomically); a failure to write it is reported, not raised, so it
        never hides the error that ended the run."""
        if not self.writer:
            return
        try:
            evaluations = rundir.read_jsonl(self.run_dir / rundir.EVAL, notes=[])
        except OSError:
            evaluations = []
        checkpoints = [p.name for p in checkpoint.list_checkpoints(self.checkpoint_dir)]
        summary = summary_record(status, message, exit_code, self.stopping.env_steps, elapsed, self.clocks, evaluations, checkpoints, error)
        path = self.run_dir / rundir.SUMMARY
        try:
            with self._summary_lock:  # the signal watcher may write it too (a stop at once)
                rundir.write_json(path, summary)
        except OSError as write_error:
            print(f"warning: could not write {path} ({write_error.strerror}); status {status}", file=sys.stderr)

    def execute(self) -> Path:
        status, message, exit_code, error_text = "failed", "", ExitCode.FAILED, None
        logger, record_status = None, True
        stopping = self.stopping
        self.progress = Progress(self.schedule.total_env_steps, self.train.progress and self.writer)
        with stopping.signals() as stop:
            end_watch = devices.watch_stop_now(stopping.on_stop_told)
            try:
                if self.record is not None and self.writer:
                    rundir.write_json(self.run_dir / rundir.CONFIG, self.record)
                    self._summary("running", "", 0.0)
                self.clocks = Clocks()  # from here: building the state counts as the run's time
                reports_success = bool(getattr(self.built.env, "reports_success", False))
                self.evaluations = Evaluations(self.trainer, self.layout, self.members, self.train.eval_batch, reports_success, self.clocks, stopping)
                state = self.built.init_state()
                iteration, evaluated = 0, False
                if self.resume:
                    state, iteration, evaluated = self._restore(state)
                    self._summary("running", "", self.clocks.wall_s)
                stopping.env_steps = stopping.saved_env_steps = iteration * self.schedule.num_envs
                logger = (
                    RunLogger(self.run_dir, self.members, self.train.tensorboard, purge_step=(stopping.env_steps + 1) if iteration else None)
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
                stopping.stopped.set()
                exit_code = ExitCode.FINISHED if status == "finished" else ExitCode.INTERRUPTED
            except TrainingDiverged as error:
                status, message, exit_code = "diverged", str(error), ExitCode.DIVERGED
                raise
            except KeyboardInterrupt:  # outside the main thread, or before the handlers were set
                status, exit_code = "interrupted", 128 + signal.SIGINT
                message = (
                    f"interrupted after {stopping.env_steps:,} env steps; newest checkpoint {self._newest_checkpoint()}. "
                    f"Continue with `{resume_command(self.run_dir)}`"
                )
                raise RunInterrupted(message, exit_code) from None
            except (RunError, CheckpointError):  # a resume refused (a checkpoint of other settings)
                record_status = logger is not None  # a refusal leaves the run's status as it was
                raise
            except Exception as error:
                status, exit_code = "failed", ExitCode.FAILED
                error_text = f"{type(error).__name__}: {error}"
                log = rundir.append_error_log(self.run_dir, stopping.env_steps, traceback.format_exc()) if self.writer else None
                message = (
                    f"run failed after {stopping.env_steps:,} env steps: {error_text}"
                    f"{f' (traceback in {log})' if log else ''}; newest checkpoint {self._newest_checkpoint()}. "
                    f"Continue with `{resume_command(self.run_dir)}` once the cause is fixed"
                )
                raise RunFailed(message) from error
            finally:
                stopping.stopped.set()  # a stop's grace timer, if any, has nothing left to end
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
            aside = rundir.set_aside_outputs(self.run_dir) if self.writer else None
            where = f" (the earlier attempt's logs are kept in {aside})" if aside else ""
            self._say(f"no usable checkpoint in {self.checkpoint_dir}: starting {self.run_dir} again from step 0{where}")
            self._record_changes(0)
            self.resume = False
            return template, 0, False
        host_state, metadata, path = found
        at = resume.point(metadata, path, self.config, self.schedule, self.run_dir)
        env_steps = at.iteration * self.schedule.num_envs
        self._record_changes(env_steps)
        if self.writer:
            for name in rundir.LOGS:
                truncate_jsonl(self.run_dir / name, env_steps)
        self._say(f"resuming {self.run_dir} from {path.name} ({env_steps:,} env steps, {self.layout.describe()})")
        self.clocks.continue_from(*at.clocks)
        self.pacing.seconds_per_iteration.update(at.seconds_per_iteration)
        return self.layout.restore(host_state, like=template), at.iteration, at.evaluated

    def _record_changes(self, env_steps: int) -> None:
        """Writes the resume's allowed changes into config.json (config, digest, a history entry)."""
        if not self.changes or not self.writer:
            return
        entry = rundir.record_changes(self.run_dir, config_to_dict(self.config), self.schedule.as_steps(), self.changes, env_steps)
        self._say("changed on resume: " + ", ".join(f"{k} {v[0]} -> {v[1]}" for k, v in entry.items() if k.startswith("train.")))

    def _loop(self, state, iteration: int, evaluated: bool, logger: RunLogger, stop) -> tuple[str, str]:
        """Trains from `iteration` (vector steps done) to the end or a stop request; returns
        (status, message). Warm-up, evaluations and checkpoints fall on the boundaries of the
        schedule's chunks; each of its chunks runs whole or split (`Pacing`); a stop is
        honoured after any chunk run, with a checkpoint (an evaluation due there is left to the
        resumed run)."""
        schedule, stopping, evaluations = self.schedule, self.stopping, self.evaluations
        whole = schedule.iterations_per_chunk
        total = schedule.num_chunks * whole
        self._precompile(state, iteration)
        if iteration == 0 or (not evaluated and self._evaluation_due(iteration)):
            evaluations.evaluate(state, iteration * schedule.num_envs, logger)
        requested = None
        while iteration < total:
            requested = devices.agree(stop.requested, 0.0)[0]  # also one that came while evaluating or saving
            if requested is not None:
                break
            kind = "warmup" if iteration < schedule.warmup_chunks * whole else "train"
            length = self.pacing.next_length(kind, iteration)
            state, iteration, seconds = self._chunk(state, iteration, kind, length, logger)
            stopping.env_steps = env_steps = iteration * schedule.num_envs
            requested, seconds = devices.agree(stop.requested, seconds)  # every process: same stop, same sizes
            if self.pacing.timed(kind, length, seconds):
                self._projection(kind, iteration)
            self.unsaved_s += seconds
            last = iteration == total
            pending = self._evaluation_due(iteration) and requested is not None and not last
            if self._evaluation_due(iteration) and not pending:
                evaluations.evaluate(state, env_steps, logger)
            checkpoint_due = iteration % whole == 0 and (iteration // whole) % schedule.checkpoint_every_chunks == 0
            if requested is not None and not last:  # the checkpoint first, then the kept policies' evaluations
                self._save(state, iteration, evaluation_pending=pending, flush=False)
                evaluations.flush(logger)
            elif checkpoint_due or last:
                self._save(state, iteration, evaluation_pending=pending)
        if iteration == total:
            return "finished", ""
        if stopping.saved_env_steps != stopping.env_steps:  # stopped before the first chunk of this process: nothing new to keep
            self._save(state, iteration)
        name = signal_name(requested)
        if iteration == 0:
            return "interrupted", (
                f"interrupted by {name} before the first chunk; nothing to keep. "
                f"`{resume_command(self.run_dir)}` starts it from step 0"
            )
        return "interrupted", (
            f"interrupted by {name} at {stopping.env_steps:,} env steps; checkpoint {self._newest_checkpoint()} saved. "
            f"Continue with `{resume_command(self.run_dir)}`"
        )

    def _precompile(self, state, iteration: int) -> None:
        """Compiles together (`compiling.compile_together`) the programs the run calls from
        `iteration` on: evaluation (`Evaluations.programs`), the warm-up chunk while warm-up
        remains, the training chunk. A trainer whose programs are plain functions (tests wrap
        them) compiles nothing here."""
        trainer, schedule = self.trainer, self.schedule
        whole = schedule.iterations_per_chunk
        programs = {}
        if iteration < schedule.warmup_chunks * whole:
            programs["warmup_chunk"] = (trainer.warmup_chunk, (state,))
        if iteration < schedule.num_chunks * whole:
            programs["train_chunk"] = (trainer.train_chunk, (state,))
        tick = time.perf_counter()
        self.stopping.doing("compiling the run's programs")
        programs.update(self.evaluations.programs(state))
        programs = {name: program for name, program in programs.items() if hasattr(program[0], "lower")}
        # Each compiled program once, by its name: the warm-up chunk may run the training program
        # (a fused warm-up; on a CPU, the one chunk program with its learning switched off).
        names = {key: getattr(program, "name", key.removesuffix("_chunk")) for key, (program, _) in programs.items()}
        if "train_chunk" in programs and names.get("warmup_chunk") == names["train_chunk"]:
            programs.pop("warmup_chunk")
        if not programs:
            return
        seconds, _ = compile_together(programs)
        devices.barrier("compiled")  # every process compiled before the first collective (`devices.barrier`)
        self.clocks.compile_s += time.perf_counter() - tick
        self.clocks.compiles.update({names[name]: seconds[name] for name in programs})
        self.clocks.compiles.update(tracing=seconds["lower"], ahead=seconds["all"])
        self._summary("running", "", self.clocks.wall_s)  # a run killed later still tells its compiles
        self.precompiled.update(names[name] for name in programs)
        self.stopping.doing("between chunks", 0.0)
        each = ", ".join(f"{names[name]} {seconds[name]:.1f} s" for name in programs)
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

    def _chunk(self, state, iteration: int, kind: str, length: int, logger: RunLogger):
        """Runs one chunk of `length` iterations of `kind` from `iteration`; returns (state,
        iterations done, seconds it ran)."""
        warmup = kind == "warmup"
        whole = length == self.schedule.iterations_per_chunk
        function = getattr(self.trainer, f"{kind}_chunk") if whole else self.trainer.chunk_program(kind, length)
        name = getattr(function, "name", f"{kind}_chunk")  # the compiled program it runs
        first_call = name not in self.called
        compile_seconds = 0.0
        if first_call and name not in self.precompiled:  # compiled ahead, timed apart, so that train_s holds no compile
            self._checkpoint_before_the_unknown(state, iteration)
            self.stopping.doing(f"compiling the {kind} chunk")
            tick = time.perf_counter()
            _compile(function, state)
            devices.barrier("compiled")
            compile_seconds = time.perf_counter() - tick
            self.clocks.compile_s += compile_seconds
            self.clocks.compiles[name] = compile_seconds
        tick = time.perf_counter()
        self.stopping.doing("running a chunk", None if first_call else self.pacing.expected_seconds(kind, length))
        state, metrics = function(state)
        metrics = self.layout.gather(metrics)  # the one host transfer per chunk (it also waits for it)
        seconds = time.perf_counter() - tick
        self.stopping.doing("between chunks", 0.0)
        self.clocks.train_s += seconds
        self.called.add(name)
        num_envs = self.schedule.num_envs
        start_steps = iteration * num_envs
        iteration += length
        env_steps = iteration * num_envs
        chunk_env_steps = length * num_envs
        bad = non_finite_metrics(metrics)
        if bad:
            raise self._diverged(bad, env_steps)
        visits = {name.removeprefix(VISIT_PREFIX): metrics.pop(name) for name in list(metrics) if name.startswith(VISIT_PREFIX)}
        logger.log_visits(visit_rows(self.members, visits, start_steps, length, num_envs, self.train.visit_interval))
        updates = 0 if warmup else length * self.train.updates_per_step
        timing = {
            "chunk_seconds": seconds,
            "compiled": first_call,
            "env_steps_per_s": chunk_env_steps * len(self.members) / seconds,
            "updates_per_s": updates * len(self.members) / seconds,
        }
        logger.log_chunk([{**row, **timing} for row in chunk_rows(self.members, metrics, start_steps, env_steps, num_envs, warmup)])
        if not first_call:
            self.progress.update(
                env_steps, chunk_env_steps, seconds, timing["updates_per_s"], self.evaluations.last_return,
                members=len(self.members), eval_success=self.evaluations.last_success, phase="warmup" if warmup else "train",
            )
        else:
            what = "warm-up" if warmup else "training"
            split = "" if whole else f" ({length} of the schedule's {self.schedule.iterations_per_chunk} vector steps)"
            compiled = "" if name in self.precompiled else f"compiled the {what} chunk for any length in {compile_seconds:.1f} s and "
            ran = f"ran its first {what} chunk{split}" if name in self.precompiled else "ran its first"
            self.progress.message(f"{compiled}{ran} in {seconds:.1f} s")
        return state, iteration, seconds

    def _projection(self, kind: str, iteration: int) -> None:
        """One line when a kind's pace is first measured past its probe: seconds per vector step
        and the time the rest of its phase takes at that pace (evaluations and checkpoints
        apart); a warning when the run would train for over `LONG_RUN_HOURS` (a profile sized
        for a bigger device)."""
        schedule = self.schedule
        pace = self.pacing.seconds_per_iteration[kind]
        warmup_end = schedule.warmup_chunks * schedule.iterations_per_chunk
        end = warmup_end if kind == "warmup" else schedule.num_chunks * schedule.iterations_per_chunk
        left = end - iteration
        if left <= 0:
            return
        what = "warm-up" if kind == "warmup" else "training"
        size = f"{len(self.members)} member{'s' if len(self.members) > 1 else ''} x {schedule.num_envs:,} envs"
        self.progress.message(
            f"{what} pace: {pace:.3g} s per vector step ({size}); its {left:,} vector steps left take about "
            f"{_hours(pace * left)} at this pace, evaluations apart"
        )
        if kind == "train" and pace * left > LONG_RUN_HOURS * 3600:
            self._say(
                f"warning: at {pace:.3g} s per vector step this run trains for about {_hours(pace * left)} on "
                f"{self.layout.describe()}; its profile is sized for a bigger device: fewer envs or seeds, or a "
                "recipe for this machine (docs/recipes.md), trains sooner"
            )

    def _diverged(self, bad: dict[str, list[int]], env_steps: int) -> TrainingDiverged:
        """The error of a chunk whose metrics `bad` ({metric: member indices}) are not finite."""
        saved = checkpoint.list_checkpoints(self.checkpoint_dir)
        keep = f"the last good checkpoint is {saved[-1]}" if saved else "no checkpoint was written before it"
        return TrainingDiverged(
            f"training diverged in the chunk ending at {env_steps:,} env steps: non-finite "
            f"{records.where_not_finite(bad, self.members, len(self.train.task_names) > 1)}. "
            f"Nothing after the previous checkpoint was saved; {keep}. "
            "Lower the learning rates or check the env overrides."
        )

    def _checkpoint_before_the_unknown(self, state, iteration: int) -> None:
        """Before a compile and a first chunk, whose length no one knows, a checkpoint when the
        training since the newest one took longer than the grace period: a signal meanwhile stops
        the run at once (`Stopping.on_first_signal`), and loses no more than that."""
        if self.stopping.env_steps == self.stopping.saved_env_steps or iteration == 0:
            return
        if self.unsaved_s > self.train.stop_grace_seconds:
            self._save(state, iteration, evaluation_pending=False)

    def _save(self, state, iteration: int, evaluation_pending: bool = False, flush: bool = True) -> None:
        """A checkpoint after `iteration` vector steps; `evaluation_pending`: the evaluation due
        there was left to the resumed run (a stop came first). Kept policies are evaluated
        first (`Evaluations.flush`), so that eval.jsonl holds every evaluation before the
        checkpoint; a stop (`flush` False) writes the checkpoint first, so that the grace covers
        the training state, and evaluates them after it."""
        if flush:
            self.evaluations.flush(self.logger)
        tick = time.perf_counter()
        self.stopping.doing("writing a checkpoint")
        members = self.layout.gather(state)  # every process takes part; process 0 writes
        env_steps = iteration * self.schedule.num_envs
        if self.writer:
            record = resume.metadata(self.config, self.schedule, iteration, evaluation_pending, self.clocks, self.pacing.seconds_per_iteration)
            checkpoint.save(self.checkpoint_dir, members, env_steps=env_steps, metadata=record, keep=self.train.keep_checkpoints)
        self.stopping.saved_env_steps, self.unsaved_s = env_steps, 0.0
        self.stopping.save_seconds = time.perf_counter() - tick
        self.stopping.doing("between chunks", 0.0)


LONG_RUN_HOURS = 24.0
"""Projected training hours past which a run warns that its profile is too big for the device."""


def _hours(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _compile(function, state) -> None:
    """Compiles a chunk program for `state` without running it (the jitted function's own cache
    keeps the executable, so its first call runs without compiling). A trainer whose chunks are
    plain functions (tests wrap them) has nothing to compile ahead."""
    lower = getattr(function, "lower", None)
    if lower is not None:
        lower(state).compile()

