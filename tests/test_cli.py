"""train.py's command line: bad input is refused with a message, before anything compiles."""

import re
import subprocess
import sys

import pytest

import train


def test_parse_overrides_reads_literals_and_bare_words():
    assert train.parse_overrides(("integrator=euler", "iterations=2", "delay_threshold=1.5")) == (
        ("integrator", "euler"),
        ("iterations", 2),
        ("delay_threshold", 1.5),
    )


@pytest.mark.parametrize("bad", ["integrator", "=euler"])
def test_malformed_override_is_refused(bad):
    with pytest.raises(SystemExit, match="malformed override"):
        train.parse_overrides((bad,))


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
