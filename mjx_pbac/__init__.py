"""mjx-pbac: PBAC and its baselines trained on the accelerator.

- `config`: typed run configuration and the presets in `profiles/`;
- `networks`, `losses`: PBAC's networks and losses (paper section 3);
- `algos`: one module per algorithm (PBAC and the baselines), the registry and the shared interface;
- `schema`: the value checks of every config section;
- `replay`, `loop`: the device ring buffer and the jitted `lax.scan` training chunks;
- `runner`, `logger`, `checkpoint`: run directories, logs, checkpoints, resume, divergence;
- `profiling`: the throughput report of `train.py profile`;
- `policy`: a trained policy back from its run directory (`load_policy`), and its evaluation;
- `commands`, `cli`: the command line: one module per command of `train.py`, and the shared parsing.

The environments live in the top-level `envs` package (they do not depend on this one).
"""

__version__ = "0.1.0"

__all__ = ["load_policy"]


def __getattr__(name: str):
    """`mjx_pbac.load_policy` (mjx_pbac/policy.py), imported when first used: `import mjx_pbac`
    stays free of JAX."""
    if name == "load_policy":
        from mjx_pbac.policy import load_policy

        return load_policy
    raise AttributeError(f"module 'mjx_pbac' has no attribute {name!r}")
