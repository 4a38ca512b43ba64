"""mjx-pbac: PBAC and its baselines trained on the accelerator.

- `config`: typed run configuration and the presets in `profiles/`;
- `networks`, `losses`: PBAC's networks and losses (paper section 3);
- `algos`: one module per algorithm (PBAC and the baselines), the registry and the shared interface;
- `schema`: the value checks of every config section;
- `replay`, `loop`: the device ring buffer and the jitted `lax.scan` training chunks;
- `runner`, `logger`, `checkpoint`: run directories, logs, checkpoints, resume, divergence;
- `profiling`: the throughput report of `train.py profile`;
- `commands`, `cli`: the command line: one module per command of `train.py`, and the shared parsing.

The environments live in the top-level `envs` package (they do not depend on this one).
"""

__version__ = "0.1.0"
