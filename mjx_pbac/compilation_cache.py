"""JAX's persistent compilation cache, shared by `train.py` and the test suite.

MJX env steps take 15-120 s to compile on a 2-core CPU (tens of seconds on a GPU); with the cache a
second run of the same program (same shapes, same settings) loads it instead. The directory is
~/.cache/mjx-pbac/jax, or $MJX_PBAC_JAX_CACHE; setting that variable to an empty string turns the
cache off. Programs compiled in under $MJX_PBAC_JAX_CACHE_MIN_SECONDS (default 1) are not cached.

With $MJX_PBAC_COMPILE_LOG set to a file, every XLA compile of this process (and of every process
that calls `enable`, e.g. the train.py commands the tests start) is appended to it as one JSON line:
what was compiled, its seconds, whether the persistent cache had it ("off" when the cache is), the
cache key, and the pytest test that ran it ($PYTEST_CURRENT_TEST, which subprocesses inherit). `python
benchmarks/compile_log.py FILE` sums such a log by test file and names programs compiled more than
once (docs/testing.md "Running it").
"""

from __future__ import annotations

import os

DEFAULT_DIR = os.path.expanduser("~/.cache/mjx-pbac/jax")


def enable() -> str | None:
    """Points JAX at the cache directory; returns it (None when turned off)."""
    import jax

    if os.environ.get(LOG_VARIABLE):
        _log_compiles(os.environ[LOG_VARIABLE])
    directory = os.environ.get("MJX_PBAC_JAX_CACHE", DEFAULT_DIR)
    if not directory:
        return None
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", min_seconds())
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return directory


def min_seconds() -> float:
    """$MJX_PBAC_JAX_CACHE_MIN_SECONDS as a number of seconds (1 when unset or empty); a value that
    is not a number >= 0 is a ValueError that names it."""
    raw = os.environ.get(MIN_SECONDS_VARIABLE, "").strip()
    try:
        seconds = float(raw) if raw else 1.0
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # NaN included
        raise ValueError(f"{MIN_SECONDS_VARIABLE}={raw!r}: expected a number of seconds >= 0 (unset: 1)")
    return seconds


LOG_VARIABLE = "MJX_PBAC_COMPILE_LOG"

MIN_SECONDS_VARIABLE = "MJX_PBAC_JAX_CACHE_MIN_SECONDS"
"""Programs that compile faster than this many seconds are not cached (default 1: a training
run's small programs cost more to write than to compile again). The test suite sets 0, for itself
and the commands it starts: it compiles thousands of small programs, and each module's programs
are dropped when it ends (tests/conftest.py), so a small program a later module or process needs
again would otherwise compile again."""
# JAX's names (jax._src.dispatch): Python tracing, lowering to StableHLO, and the XLA compile or
# cache read that follows.
_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}
_logging = {"on": False}


def _log_compiles(path: str) -> None:
    """Appends one JSON line per trace, lowering and compile to `path` (see the module docstring).
    The cache's own hit and miss messages (logged at DEBUG by jax._src.compiler just before the
    compile event ends) give the key and whether the compile was a cache read."""
    import json
    import logging
    import threading

    import jax
    from jax import monitoring

    if _logging["on"]:
        return
    _logging["on"] = True
    last = threading.local()

    class _CacheMessages(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            # Told apart by the format string, not the message, which holds the program's name.
            template = str(record.msg)
            if template.startswith(("Persistent compilation cache hit", "PERSISTENT COMPILATION CACHE MISS")):
                last.hit = template.startswith("Persistent")
                last.key = str(record.args[1]) if record.args and len(record.args) > 1 else None

    compiler_logger = logging.getLogger("jax._src.compiler")
    compiler_logger.addHandler(_CacheMessages(level=logging.DEBUG))
    compiler_logger.setLevel(logging.DEBUG)

    def listener(event: str, seconds: float, **kwargs) -> None:
        kind = _EVENTS.get(event)
        if kind is None:
            return
        record = {"kind": kind, "fun": kwargs.get("fun_name"), "seconds": round(seconds, 3), "pid": os.getpid(),
                  "test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]}
        if kind == "compile":
            # JAX computes a key and reports a "miss" even with no cache directory: that is "off".
            cached = jax.config.jax_compilation_cache_dir is not None
            record["cache"] = {True: "hit", False: "miss"}.get(getattr(last, "hit", None), "off") if cached else "off"
            record["key"] = getattr(last, "key", None)
            last.hit = last.key = None
        with open(path, "a") as handle:
            handle.write(json.dumps(record) + "\n")

    monitoring.register_event_duration_secs_listener(listener)
