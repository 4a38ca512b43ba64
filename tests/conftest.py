"""Test-session settings: JAX's persistent compilation cache, so repeated runs skip XLA compiles.

MJX env steps take 15-120 s to compile on a 2-core CPU; the cache (default
~/.cache/mjx-pbac/jax, or $MJX_PBAC_JAX_CACHE) keeps compiled programs across runs and clones.
"""

import os

import jax

jax.config.update(
    "jax_compilation_cache_dir",
    os.environ.get("MJX_PBAC_JAX_CACHE", os.path.expanduser("~/.cache/mjx-pbac/jax")),
)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
