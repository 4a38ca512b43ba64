"""train.py's command line: bad input is refused with a message, before anything compiles."""

import contextlib
import dataclasses
import io
import re
import subprocess
import sys
import typing

import pytest

import train
from mjx_pbac import algos, cli, commands
from mjx_pbac.commands import _common
from mjx_pbac.config import RunConfig, TrainConfig, load_profile


def test_parse_overrides_reads_literals_and_bare_words():
    assert _common.parse_overrides(("integrator=euler", "iterations=2", "delay_threshold=1.5")) == (
        ("integrator", "euler"),
        ("iterations", 2),
        ("delay_threshold", 1.5),
    )


@pytest.mark.parametrize("bad", ["integrator", "=euler"])
def test_malformed_override_is_refused(bad):
    with pytest.raises(SystemExit, match="malformed override"):
        _common.parse_overrides((bad,))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["bench-env", "--env", "antt"], "unknown environment 'antt'"),
        (["bench-env", "--set", "integrator=rk5"], "unknown integrator 'rk5'"),
        (["bench-env", "--set", "delay=1"], "unknown override"),
        (["bench-env", "--num-envs", "0"], "instance counts must be >= 1"),
        (["bench-envs"], "unknown command 'bench-envs' (did you mean bench-env"),
    ],
)
def test_bad_command_lines_exit_with_a_clear_error(argv, message):
    with pytest.raises(SystemExit, match=re.escape(message)):
        train.main(argv)


def test_help_lists_every_option():
    result = subprocess.run(
        [sys.executable, "train.py", "bench-env", "--help"], capture_output=True, text=True, check=True
    )
    for option in ("--preset", "--env", "--num-envs", "--steps-per-call", "--repeats", "--set", "--out"):
        assert option in result.stdout


# -- the tyro command line: shorthands, profiles as defaults, one-line refusals ------------------


def _configure(*argv):
    return cli.configure(load_profile("chain"), list(argv), "train.py --profile chain")


def test_shorthands_set_their_train_options_and_give_back_a_plain_train_config():
    config = _configure("--seeds", "3", "--sweep", "bootstrap_rate=0.01,0.1", "--sweep=tau=0.01,0.02", "--tasks", "deep_chain_4, deep_chain_5,")
    assert type(config.train) is TrainConfig and config == dataclasses.replace(config)  # compares equal to a saved one
    assert config.train.num_seeds == 3 and config.train.tasks == ("deep_chain_4", "deep_chain_5")
    assert config.train.sweep == ("bootstrap_rate=0.01,0.1", "tau=0.01,0.02")  # repeated --sweep merge
    # The shorthand is an alias: the last of --seeds and --train.num-seeds counts; --sweep replaces --train.sweep.
    assert _configure("--seeds", "3", "--train.num-seeds", "4").train.num_seeds == 4
    assert _configure("--train.sweep", "tau=0.1,0.2", "--sweep", "bootstrap_rate=0.1,0.2").train.sweep == ("bootstrap_rate=0.1,0.2",)
    # The profile's values stay where no option is given.
    assert _configure().train == load_profile("chain").train


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--profile"], "error: --profile needs a value"),
        (["--resume"], "error: --resume needs a value"),
        (["--profile", "chain", "--seeds"], "error: --seeds needs a value, e.g. --seeds 10"),
        (["--profile", "chain", "--sweep"], "error: --sweep needs a value, e.g. --sweep bootstrap_rate=0.01,0.05"),
        (["--profile", "chain", "--tasks", "--seeds", "2"], "error: --tasks needs a value, e.g. --tasks ant_delayed,ant_very_delayed"),
        (["--profile", "chain", "--sweep", "bootstrap_rate"],
         "error: value error: Error parsing train: malformed sweep 'bootstrap_rate': expected NAME="),
        (["--profile", "chain", "--seeds", "0"], "Error parsing train: num_seeds must be >= 1, got 0 (see python train.py --profile chain --help)"),
        (["--profile", "chain", "--train.totl-steps", "5"], "Unrecognized options: --train.totl-steps, 5"),
        (["--profile", "chain", "--profile-file", "x.toml"], "error: give --profile NAME or --profile-file PATH, not both"),
        (["--resume", "d", "--profile", "chain"], "error: --resume RUN_DIR takes no profile"),
        (["--resume", "d", "--train.seed", "2"], "--train.seed cannot change on resume (changeable: --train.total-steps, "),
        (["--resume", "d", "--train.total-steps"], "error: --train.total-steps needs a value"),
        (["table", "--block"], "error: --block needs a value"),
        (["table", "--tasks", "chain", "--resume=x"], "error: table chooses the profile, algorithm and tasks of each run"),
        (["probe", "--train.env", "chain"], "error: probe chooses the algorithm, env and tasks of each run"),
        (["profile", "--profile", "chain", "--resume", "x"], "Unrecognized options: --resume, x"),
        # An accelerator asked for and absent: one line naming the backend that loaded, never a CPU run.
        (["--profile", "chain", "--train.platform", "gpu"], "error: --train.platform gpu: JAX loaded its cpu backend, not gpu: "),
        (["profile", "--profile", "chain", "--train.platform", "tpu"], "error: --train.platform tpu: JAX loaded its cpu backend"),
        (["table", "--tasks", "chain", "--train.platform", "gpu"], "error: --train.platform gpu: JAX loaded its cpu backend"),
        (["bench-env", "--platform", "gpu"], "error: --platform gpu: JAX loaded its cpu backend, not gpu"),
        (["--resume", "runs/none", "--train.platform", "gpu"], "error: --train.platform gpu: JAX loaded its cpu backend"),
        (["--profile", "chain", "--train.platform", "cuda"], "invalid choice 'cuda' for argument '--train.platform'. Expected one of ('auto', 'cpu', 'gpu', 'tpu')"),
        (["--profile", "chain", "--train.chunk-loop", "fixed"],
         "invalid choice 'fixed' for argument '--train.chunk-loop'. Expected one of ('auto', 'any_length', 'fixed_trip')"),
    ],
)
def test_bad_command_lines_are_one_line_with_exit_code_2(argv, message):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert train.run(argv) == 2
    (line,) = err.getvalue().splitlines()
    assert line.startswith("error: ") and message in line, line


def test_resume_changes_only_what_a_resumed_run_may_change():
    changes = cli.resume_changes(["--train.total-steps", "600_000", "--train.progress=False"], "runs/x")
    assert changes == {"total_steps": 600_000, "progress": False}
    assert cli.resume_changes(["--train.chunk-loop", "fixed_trip"], "runs/x") == {"chunk_loop": "fixed_trip"}
    assert cli.resume_changes([], "runs/x") == {}


def test_usage_lists_every_algorithm_with_its_sweepable_knobs(capsys):
    train.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    names = typing.get_args(typing.get_type_hints(RunConfig)["algo"])
    assert names == algos.NAMES
    for algo in names:
        assert f" {algo} {', '.join(algos.sweepable(algo))}" in text


@pytest.mark.parametrize(
    "argv, options",
    [
        (["--profile", "chain"], ["--seeds INT, --train.num-seeds INT", "--sweep NAME=v1,v2,...", "--tasks A,B,...", "--algo"]),
        (["table"], ["--block BLOCK", "--tasks T1,T2,...", "--algos A1,A2,...", "--seeds", "--out DIR", "--group-tasks"]),
        (["probe"], ["--algos", "pbac_soft", "--lengths", "--seeds", "--out DIR", "--profile"]),
        (["report"], ["--out", "--explore RUN_DIR,X_KEY,Y_KEY", "(repeatable)", "--phases", "--member", "--frames"]),
        (["evaluate"], ["--episodes", "--member", "--checkpoint", "--set", "--out"]),
        (["video"], ["--member", "--episodes", "--checkpoint", "--out", "--width", "--height", "--camera", "--fps", "--set"]),
        (["profile", "--profile", "chain"], ["--measure-steps", "--baseline", "--phases", "--train.total-steps"]),
        (["bench-seeds", "--profile", "chain"], ["--seed-counts", "--timed-chunks", "--seeds INT"]),
        (["--resume", "runs/x"], ["--train.total-steps", "--train.progress", "(default: the run's)"]),
    ],
)
def test_every_command_has_a_help(argv, options, capsys):
    with pytest.raises(SystemExit) as exit_:
        train.main([*argv, "--help"])
    assert exit_.value.code in (0, None)
    text = capsys.readouterr().out
    for option in options:
        assert option in text, option


def test_extra_tasks_take_their_profiles_knobs_unless_the_command_line_sets_them(capsys):
    """--tasks re-reads the command line's options on each task's profile: ant_very_delayed's
    profile gives it prior variance 5.0, unless the options set it for every task (even to the
    run's own 1.0)."""
    def tasks_config(*options):
        argv = ["--tasks", "ant_very_delayed", *options]
        return _common.with_task_profiles(cli.configure(load_profile("ant"), argv, "p"), argv, "p", profile="ant")

    assert tasks_config().train.task_overrides == ("ant_very_delayed:prior_variance=5.0",)
    assert "per-task settings from the tasks' profiles: ant_very_delayed:prior_variance=5.0" in capsys.readouterr().err
    assert tasks_config("--pbac.prior-variance", "1.0").train.task_overrides == ()
    assert tasks_config("--pbac.prior-variance", "2.0", "--train.env", "ant").train.task_overrides == ()


def test_platform_check_names_what_loaded_and_what_to_install(monkeypatch):
    from mjx_pbac import devices

    line, warning = devices.use_platform("auto")
    assert line == devices.describe_backend() and line.startswith("device: cpu (cpu) x1, jax ") and warning is None
    assert devices.use_platform("cpu")[0] == line
    monkeypatch.setattr(devices, "accelerator_packages", list)
    with pytest.raises(ValueError, match=r'no GPU build of JAX is installed \(jax .*, jaxlib .*\); .*pip install -e "\.\[cuda12\]"'):
        devices.use_platform("gpu")
    # A CUDA build that found no GPU: JAX falls back to the CPU with a warning; we refuse or warn.
    monkeypatch.setattr(devices, "accelerator_packages", lambda: ["jax-cuda12-plugin 0.10.2"])
    with pytest.raises(ValueError, match=r"jax-cuda12-plugin 0.10.2 installed, but JAX found no usable GPU .*JAX_PLATFORMS=cuda"):
        devices.use_platform("gpu")
    line, warning = devices.use_platform("auto", "--platform")
    assert warning.startswith("warning: jax-cuda12-plugin 0.10.2 installed, yet JAX found no accelerator") and "--platform gpu" in warning
    with pytest.raises(ValueError, match="unknown platform 'gpus'"):
        devices.use_platform("gpus")


def test_table_and_probe_refuse_choosing_the_env_but_take_env_overrides():
    assert _common.sets_what_is_chosen(["--train.env", "ant"]) and _common.sets_what_is_chosen(["--train.env=ant"])
    assert not _common.sets_what_is_chosen(["--train.env-overrides", "episode_length=20"])


# -- --help alone, and the program named as it was started -----------------------------------


def _help(capsys, argv):
    """(exit code, stdout) of `argv` run in this process as `commands.run` runs it."""
    code = train.run(argv)
    return code, capsys.readouterr().out


def _total_steps(text: str) -> int:
    """The default a help shows for --train.total-steps."""
    return int(re.search(r"--train\.total-steps INT.*?\(default: ([\d_]+)\)", text, re.S)[1])


def test_every_command_help_works_alone_and_names_the_program(monkeypatch, capsys):
    """`python train.py COMMAND --help` with nothing else prints the command's usage and options
    and exits 0; a command that reads a profile shows the built-in defaults and says how to see a
    profile's, and with --profile NAME shows that profile's values."""
    monkeypatch.setattr(sys, "argv", ["train.py"])  # as `python train.py ...` starts
    code, text = _help(capsys, ["--help"])
    assert code == 0 and "python train.py --profile NAME" in text
    for word in commands.COMMANDS:
        code, text = _help(capsys, [word, "--help"])
        assert code == 0, (word, text)
        assert f"usage: python train.py {word} " in text and "--out" in text, (word, text)
    built_in, chain = RunConfig().train.total_steps, load_profile("chain").train.total_steps
    assert built_in != chain
    for word in ("profile", "bench-seeds"):
        code, text = _help(capsys, [word, "--help"])
        assert f"python train.py {word} --profile NAME --help" in text and _total_steps(text) == built_in, text
        code, text = _help(capsys, [word, "--profile", "chain", "--help"])
        assert code == 0 and _total_steps(text) == chain and "--profile NAME --help" not in text
    code, text = _help(capsys, ["--seeds", "2", "--help"])  # the training options without a profile
    assert code == 0 and "usage: python train.py " in text and "python train.py --profile NAME --help" in text
    assert _total_steps(text) == built_in


def test_the_installed_command_names_itself(monkeypatch, capsys):
    """`mjx-pbac ...` (the [project.scripts] entry point) names `mjx-pbac` in its usage, its help
    and the commands its errors suggest, never `python train.py`."""
    monkeypatch.setattr(sys, "argv", ["/venv/bin/mjx-pbac", "profile", "--help"])
    assert commands.console() == 0
    text = capsys.readouterr().out
    usage = next(line for line in text.splitlines() if line.startswith("usage:"))
    assert usage.startswith("usage: mjx-pbac profile ") and "train.py" not in text, usage
    monkeypatch.setattr(sys, "argv", ["/venv/bin/mjx-pbac", "--help"])
    assert commands.console() == 0
    text = capsys.readouterr().out
    assert "mjx-pbac --profile NAME" in text and "train.py" not in text
    monkeypatch.setattr(sys, "argv", ["/venv/bin/mjx-pbac", "--profile", "chain", "--seeds", "0"])
    assert commands.console() == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith("(see mjx-pbac --profile chain --help)"), line
