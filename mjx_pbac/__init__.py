"""mjx-pbac: PBAC and its baselines trained on the accelerator.

- `config`: typed run configuration and the presets in `profiles/`;
- `networks`, `losses`, `pbac`: the algorithm (SPEC section 2), plugged in through `algorithm`;
- `replay`, `loop`: the device ring buffer and the jitted `lax.scan` training chunks;
- `runner`, `logger`, `checkpoint`: run directories, logs, checkpoints, resume, divergence;
- `profiling`: the throughput report of `train.py profile`.

The environments live in the top-level `envs` package (they do not depend on this one).
"""

__version__ = "0.1.0"
