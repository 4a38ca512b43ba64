"""mjx-pbac's commands (`python train.py ...`, or `mjx-pbac ...` once installed): the registry of
command words, the usage built from it, and `run`, which runs a command line with every error as
one line and the exit code that says how it ended.

A command line whose first word is an option (--profile NAME, --resume RUN_DIR, --list-profiles)
trains (`training`); any other first word names a module of COMMANDS. Each command module holds
its `SUMMARY` (its entry in `train.py --help`), its `Args` (the options, a dataclass that tyro
parses with `cli.parse`) and `main(argv)`, which raises SystemExit("error: ...") on bad input; a
module whose `JOINS_JOB` is False joins no jax.distributed job. Adding a command is one module
here and its line in COMMANDS.
"""

from __future__ import annotations

import difflib
import os
import sys
import tempfile
import textwrap
import traceback
from pathlib import Path
from types import ModuleType

from mjx_pbac.commands import _common, bench_env, bench_seeds, evaluate, probe, profile, report, table, training, video

COMMANDS: dict[str, ModuleType] = {
    "evaluate": evaluate,
    "video": video,
    "table": table,
    "probe": probe,
    "bench-seeds": bench_seeds,
    "report": report,
    "profile": profile,
    "bench-env": bench_env,
}
"""The command words, in the order `train.py --help` lists them."""

_USAGE = """mjx-pbac's one entry point.

Train:
{training}

Other commands (`{prog} COMMAND --help`):
{commands}

Compiled programs are cached in ~/.cache/mjx-pbac/jax ($MJX_PBAC_JAX_CACHE moves it; empty turns
it off), so a second run with the same shapes starts in seconds.

mjx_pbac/commands/ (one module per command, its options a dataclass that tyro parses) and
mjx_pbac/cli.py are the only code that reads the command line; library code takes typed configs.

Algorithms (--algo) and the knobs --sweep NAME=v1,v2,... can vary:
{algorithms}"""


def usage() -> str:
    """`train.py --help`: the training command's usage, each command's summary, and the
    algorithms with their sweepable knobs as the config defines them; it names the program as
    it was started (`cli.program`: `python train.py` or `mjx-pbac`)."""
    from mjx_pbac import algos, cli

    width = max(map(len, COMMANDS))
    commands = "\n".join(  # 97 columns: the width the usage's prose is wrapped at
        textwrap.fill(module.SUMMARY, 97, initial_indent=f"  {name:{width}s} ", subsequent_indent=" " * (width + 3))
        for name, module in COMMANDS.items()
    )
    width = max(map(len, _common.algo_names()))
    knobs = "\n".join(
        textwrap.fill(", ".join(algos.sweepable(algo)), 100, initial_indent=f"  {algo:{width}s}  ", subsequent_indent=" " * (width + 4))
        for algo in _common.algo_names()
    )
    prog = cli.program()
    return _USAGE.format(prog=prog, training=training.usage(prog), commands=commands, algorithms=knobs)


def main(argv: list[str]) -> None:
    """Runs the command line `argv` (without the program's name); bad input raises
    SystemExit("error: ...")."""
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return
    from mjx_pbac import compilation_cache, devices

    word = argv[0]
    command, args = (training, argv) if word.startswith("--") else (COMMANDS.get(word), argv[1:])
    if command is None:
        close = difflib.get_close_matches(word, list(COMMANDS), n=2)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise SystemExit(f"error: unknown command {word!r}{hint}; train with `--profile NAME`, or use one of: {', '.join(COMMANDS)}")
    try:  # before anything touches a device: one of several processes (hosts) joins the others
        if getattr(command, "JOINS_JOB", True):
            devices.initialize_distributed()
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    try:
        compilation_cache.enable()  # a second run of the same program skips its compile
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    command.main(args)


def _one_line(message: str) -> str:
    """A message of several lines (e.g. a list of problems) as one: the lines joined by '; '."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return "; ".join(lines).replace(":;", ":")


def run(argv: list[str]) -> int:
    """`main(argv)` with every error as one line on stderr and the exit code that says how it
    ended (mjx_pbac.lifecycle: 0 finished, 1 failed, 2 bad input, 3 diverged, 4 run directory
    in use, 75 interrupted with a checkpoint, 128 + signal stopped at once). An unexpected error's
    traceback goes to a file the message names; MJX_PBAC_TRACEBACK=1 shows it instead."""
    from mjx_pbac.lifecycle import ExitCode

    try:
        main(argv)
        return ExitCode.FINISHED
    except SystemExit as exit_:
        if isinstance(exit_.code, str):
            print(_one_line(exit_.code), file=sys.stderr)
            return ExitCode.USAGE
        return exit_.code or 0
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        code = getattr(error, "exit_code", None)
        if code is not None:  # the runner's and the lock's errors: their message is the whole story
            print(_one_line(f"{getattr(error, 'label', 'error')}: {error}"), file=sys.stderr)
            return int(code)
        if os.environ.get("MJX_PBAC_TRACEBACK"):
            raise
        if isinstance(error, OSError):
            where = f" {error.filename}" if error.filename else ""
            print(f"error: {error.strerror or error}:{where}", file=sys.stderr)
            return ExitCode.FAILED
        log = Path(tempfile.gettempdir()) / f"mjx-pbac-error-{os.getpid()}.log"
        try:
            log.write_text(traceback.format_exc())
            where = f"; traceback in {log}"
        except OSError:
            where = ""
        print(f"error: {type(error).__name__}: {error}{where}", file=sys.stderr)
        return ExitCode.FAILED


def console() -> int:
    """The installed `mjx-pbac` command ([project.scripts]): `run` on the process's command line,
    whose exit code the script exits with, as `python train.py` does."""
    return run(sys.argv[1:])
