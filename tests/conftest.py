"""Test-session settings: JAX's persistent compilation cache (`mjx_pbac.compilation_cache`), so
repeated runs skip XLA compiles: ~/.cache/mjx-pbac/jax, or $MJX_PBAC_JAX_CACHE."""

from mjx_pbac import compilation_cache

compilation_cache.enable()
