"""The training command: what `train.py` does when its first word is an option (--profile NAME,
--profile-file PATH, --resume RUN_DIR, --list-profiles). Its options are the profile's RunConfig
(cli.configure) after the profile choice (cli.TrainChoice)."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

from mjx_pbac import cli
from mjx_pbac.commands import _common
from mjx_pbac.config import RunConfig

_USAGE = """\
  {prog} --profile NAME [--train.KEY VALUE] [--algo ALGO] [--ALGO.KEY VALUE]
  {pad} [--seeds N] [--sweep NAME=v1,v2,... ...] [--tasks A,B,...]
      trains ALGO (one of the algorithms listed below; the profile's if not given) with the preset
      profiles/NAME.toml; any option overrides it (`{prog} --profile NAME --help` lists
      every option with the profile's values). --seeds N trains seeds seed..seed+N-1 as one
      vmapped program; --sweep crosses a grid of the algorithm's knobs (listed below) with the
      seeds. --tasks A,B trains more tasks of the same robot (e.g. ant_delayed,ant_very_delayed)
      as members of the same program, each with its own profile's per-task values.
      --profile-file PATH takes a TOML profile from anywhere instead of profiles/.
  {prog} --resume RUN_DIR [--train.total-steps N ...]
      continues an interrupted run from its newest checkpoint, with its saved config.
  {prog} --list-profiles
      the available profiles."""


def usage(prog: str) -> str:
    """The training command's part of `train.py --help`, naming the program `prog`."""
    return _USAGE.format(prog=prog, pad=" " * len(prog))


def main(argv: list[str]) -> None:
    """Trains a profile, resumes a run or lists the profiles, as `argv` says."""
    from mjx_pbac import runner
    from mjx_pbac.rundir import safe_name

    chosen, rest = cli.choose(cli.TrainChoice, argv)
    if chosen.list_profiles:
        _list_profiles()
        return
    program = cli.program()
    if (chosen.profile, chosen.profile_file, chosen.resume) == (None, None, None) and cli.asks_help(rest):
        description = f"{inspect.getdoc(RunConfig)}\n\n{cli.profile_hint(program)}"
        cli.configure(RunConfig(), rest, program, description=description)  # prints the help and exits
    if chosen.resume is not None:
        if chosen.profile is not None or chosen.profile_file is not None:
            raise SystemExit(
                "error: --resume RUN_DIR takes no profile: the run continues with the config "
                f"saved in {chosen.resume}/config.json"
            )
        changes = cli.resume_changes(rest, chosen.resume)
        _common.use_platform(changes.get("platform") or _saved_platform(chosen.resume))
        print(f"run finished: {runner.train(None, resume_dir=chosen.resume, changes=changes)}")
        return
    if chosen.profile is not None and chosen.profile_file is not None:
        raise SystemExit("error: give --profile NAME or --profile-file PATH, not both")
    if chosen.profile_file is not None:
        name, prog = "file-" + safe_name(Path(chosen.profile_file).stem), f"{program} --profile-file {chosen.profile_file}"
    else:
        name, prog = chosen.profile, f"{program} --profile {chosen.profile}"
    config = cli.configure(_common.load(chosen.profile, chosen.profile_file), rest, prog)
    config = _common.with_task_profiles(config, rest, prog=f"{program} --profile {name}", profile=chosen.profile)
    _common.use_platform(config.train.platform)
    _common.check_env(config)
    print(f"run finished: {runner.train(config, profile=name)}")


def _list_profiles() -> None:
    from mjx_pbac.config import list_profiles

    broken = 0
    for name, description, error in list_profiles():
        if error is None:
            print(f"{name:22s} {description}")
        else:
            broken += 1
            print(f"{name:22s} BROKEN: {error}")
    if broken:
        print(f"{broken} profile(s) cannot be used until fixed", file=sys.stderr)


def _saved_platform(run_dir: str) -> str:
    """The platform in a run's config.json ("auto" where it is unreadable or older than the
    option: the runner then says what is wrong with the run directory)."""
    from mjx_pbac import rundir

    try:
        return rundir.read_run_record(Path(run_dir))["config"]["train"].get("platform", "auto")
    except (rundir.RunError, KeyError, TypeError, AttributeError):
        return "auto"
