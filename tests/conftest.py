"""Test-session settings: JAX's persistent compilation cache (`mjx_pbac.compilation_cache`), so
repeated runs skip XLA compiles: ~/.cache/mjx-pbac/jax, or $MJX_PBAC_JAX_CACHE. Every program is
cached, however fast it compiled ($MJX_PBAC_JAX_CACHE_MIN_SECONDS=0, inherited by the commands the
tests start), so one that a later module or process compiles again is read instead."""

import os

os.environ.setdefault("MJX_PBAC_JAX_CACHE_MIN_SECONDS", "0")  # every program, for this process and the commands it starts

from mjx_pbac import compilation_cache

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
