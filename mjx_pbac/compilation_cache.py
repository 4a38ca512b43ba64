"""JAX's persistent compilation cache, shared by `train.py` and the test suite.

MJX env steps take 15-120 s to compile on a 2-core CPU (tens of seconds on a GPU); with the cache a
second run of the same program (same shapes, same settings) loads it instead. The directory is
~/.cache/mjx-pbac/jax, or $MJX_PBAC_JAX_CACHE; setting that variable to an empty string turns the
cache off.
"""

from __future__ import annotations

import os

DEFAULT_DIR = os.path.expanduser("~/.cache/mjx-pbac/jax")


def enable() -> str | None:
    """Points JAX at the cache directory; returns it (None when turned off)."""
    import jax

    directory = os.environ.get("MJX_PBAC_JAX_CACHE", DEFAULT_DIR)
    if not directory:
        return None
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return directory
