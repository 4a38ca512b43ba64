"""What a `train.py COMMAND ...` line of a device script asks for, once its options are parsed: the
command word and its options as the command would run them (later options over earlier ones, the
profile's config with the training options applied), less where the report goes (`--out`).

A dry run (benchmarks/gpu/setup.sh `dry_key`) runs two lines that resolve alike once: trainer.sh's
three Ant settings are one tiny cartpole run there, env.sh's Ant, Humanoid and Hopper one tiny
Hopper. Every line is still parsed, with the command's own parser and checks, so a misspelt
option of a GPU-sized line fails the dry run as it would fail on the GPU: this prints the
command's one-line error and exits 2.

    python3 benchmarks/gpu/resolved.py profile --profile ant_delayed --out x.json ...
"""

from __future__ import annotations

import dataclasses
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def resolved(argv: list[str]) -> str:
    """The line `argv` (without `train.py`) as the command parses it, less its `out`."""
    from mjx_pbac import cli
    from mjx_pbac.commands import COMMANDS, _common

    word, rest = argv[0], argv[1:]
    if word not in COMMANDS:
        raise SystemExit(f"error: {word!r} is not a command that takes sizes; one of: {', '.join(COMMANDS)}")
    kind = COMMANDS[word].Args
    if "run" in {field.name for field in dataclasses.fields(kind)}:  # --profile NAME and training options
        _, args = _common.measurement(kind, word, rest)
    else:
        args = cli.parse(kind, rest, f"train.py {word}")
    if hasattr(args, "out"):
        args = dataclasses.replace(args, out="")
    return f"{word} {args!r}"


if __name__ == "__main__":
    import contextlib
    import io

    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the device line the checks print
            key = resolved(sys.argv[1:])
    except SystemExit as exit_:
        print(exit_.code if isinstance(exit_.code, str) else f"error: {sys.argv[1:]} does not parse", file=sys.stderr)
        sys.exit(2)
    print(key)
