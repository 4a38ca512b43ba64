"""Compiling a run's programs together, ahead of their first call (docs/performance.md
"Compiles and evaluations").

A run calls a handful of jitted programs (the warm-up and training chunks, evaluation, and with
`eval_batch` > 1 the policy copies), each with its own copy of the env's physics; compiled one
after the other as the run reaches them, their compiles add up (158 s for `ant_delayed_fast` on
an H200, docs/evidence/data/h200-20261128). `compile_together` lowers them in turn (tracing is Python and
holds the GIL) and then compiles them at once on a pool of threads: XLA's compiler runs without
the GIL, so on a machine with cores to spare the wall-clock of the compiles falls towards that of
the longest one. On a 2-core CPU they only slow each other (measured: 135 s together against
125 s in turn, docs/performance.md "Compiles and evaluations"), so by default a machine compiles
at most half as many programs at once as it has cores: in turn on 2 cores, 8 at once on the GPU
machines' 16. The executables land in each jitted function's own cache (and JAX's persistent
cache, where enabled), so the run's first calls do not compile again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

Program = tuple[Callable, tuple[Any, ...]]
"""A jitted function and the arguments it will be called with (arrays or shapes)."""


def compile_together(programs: dict[str, Program], threads: int | None = None) -> tuple[dict[str, float], dict[str, Any]]:
    """Compiles every program of `programs` ({name: (jitted function, arguments)}) without
    running it. Returns ({name: seconds its compile took (its own thread's clock), "lower":
    seconds of tracing and lowering them all, "all": wall-clock seconds of the whole},
    {name: its compiled executable}); the seconds also hold "threads", the compiles run at once.
    `threads` (default: as many as programs, at most half the cores this process may use; 1
    compiles them in turn) bounds the compiles running at once."""
    start = time.perf_counter()
    lowered = {}
    for name, (function, arguments) in programs.items():
        lowered[name] = function.lower(*arguments)
    seconds: dict[str, float] = {"lower": time.perf_counter() - start}

    compiled: dict[str, Any] = {}

    def compile_one(name: str) -> tuple[str, float]:
        tick = time.perf_counter()
        compiled[name] = lowered[name].compile()
        return name, time.perf_counter() - tick

    workers = threads or max(1, min(len(lowered), _usable_cores() // 2))
    if workers == 1 or len(lowered) <= 1:
        seconds.update(compile_one(name) for name in lowered)
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="compile") as pool:
            seconds.update(pool.map(compile_one, lowered))
    seconds["all"] = time.perf_counter() - start
    seconds["threads"] = min(workers, len(lowered))
    return seconds, compiled


def _usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's or a scheduler's share),
    not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1
