"""mjx-pbac's one entry point: `python train.py --help` lists the commands (training, table,
probe, bench-seeds, report, profile, bench-env) and `python train.py COMMAND --help` their options.
Installed (`pip install -e .`), the `mjx-pbac` command is the same.

The commands live in mjx_pbac/commands/, one module each (its options, its body); this file hands
them the command line. `run(argv)` returns the exit code (mjx_pbac.lifecycle.ExitCode); `main(argv)`
raises SystemExit("error: ...") on bad input.
"""

import sys

from mjx_pbac.commands import main, run

__all__ = ["main", "run"]

if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
