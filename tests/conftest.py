"""Test-session settings:

- JAX's persistent compilation cache (`mjx_pbac.compilation_cache`), so repeated runs skip XLA
  compiles: ~/.cache/mjx-pbac/jax, or $MJX_PBAC_JAX_CACHE.
- XLA's fast-compile preset for CPU programs (`--xla_cpu_opt_preset=fast_compile`, added to
  $XLA_FLAGS unless it already names a preset; the train.py commands the tests start inherit it).
  The suite's time is mostly XLA compiling MJX programs on 2 cores; the preset compiles the same
  HLO with less LLVM optimisation: a Hopper rollout compiled in 16.5 s against 25.3 s, a Humanoid
  one in 32.0 s against 40.2 s while running 3.8 s against 2.9 s (docs/testing.md "Running it").
  It is an XLA CPU flag, so it changes nothing on a GPU (benchmarks/gpu/device_tests.sh).
"""

import os

FAST_COMPILE = "--xla_cpu_opt_preset=fast_compile"
if "xla_cpu_opt_preset" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE}".strip()

from mjx_pbac import compilation_cache  # noqa: E402

compilation_cache.enable()


import gc  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _release_programs_after_each_module():
    """Drops each module's compiled programs and traces when it ends: a session of ~40 modules
    otherwise holds thousands of MJX programs, and later modules trace and run measurably slower
    (a Hopper rollout took 50 s after the solver tests instead of 11 s). A program needed again
    comes back from the persistent cache."""
    yield
    import jax

    jax.clear_caches()
    gc.collect()
