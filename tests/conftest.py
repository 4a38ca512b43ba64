"""Test-session settings: JAX's persistent compilation cache (`mjx_pbac.compilation_cache`), so
repeated runs skip XLA compiles: ~/.cache/mjx-pbac/jax, or $MJX_PBAC_JAX_CACHE. Every program is
cached, however fast it compiled ($MJX_PBAC_JAX_CACHE_MIN_SECONDS=0, inherited by the commands the
tests start), so one that a later module or process compiles again is read instead."""

import gc
import os
import re
import shlex
from pathlib import Path

import pytest

from mjx_pbac import compilation_cache

os.environ.setdefault(compilation_cache.MIN_SECONDS_VARIABLE, "0")  # every program, here and in the commands tests start
compilation_cache.enable()


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


def _dry_run_sizes() -> list[str]:
    text = (Path(__file__).resolve().parent.parent / "benchmarks" / "gpu" / "setup.sh").read_text()
    return shlex.split(re.search(r"^DRY_TINY=\((.*?)\)", text, re.DOTALL | re.MULTILINE).group(1))


DRY_TINY = _dry_run_sizes()
"""benchmarks/gpu/setup.sh's DRY_TINY, the device scripts' dry-run training sizes, as `train.py`
options. A test that trains the `_fast` cartpole profile with them (`--seeds 2`) compiles the
programs of fast.sh's, tune.sh's and reacher_table.sh's dry runs, which then read them from the
cache."""


@pytest.fixture(scope="session")
def tiny_chain_run(tmp_path_factory):
    """The finished 4,000-step, two-seed chain run (`tests.test_runner._tiny_chain`, a checkpoint
    every 1,000 steps) that test_runner's and test_lifecycle's resumed, interrupted and edited runs
    are compared with: trained once per session. Tests read it or copy it; none writes into it."""
    from mjx_pbac import runner
    from tests.test_runner import _tiny_chain

    run_dir = tmp_path_factory.mktemp("chain") / "finished"
    runner.train(_tiny_chain(run_dir), profile="chain")
    return run_dir


_session: dict = {}
"""What the session collected (`pytest_collection_modifyitems`), for test_compilation_cache.py."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "heavy: a slow test among the suite's costliest (device scripts' dry runs, whole Meta-World episodes, films, "
        "multi-process and multi-device runs, every env family's rollout); run after every other test (docs/testing.md)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    """Heavy tests last, each module's in their order: everything else is checked first, however
    slow the machine. Runs before `-k`/`-m` deselect, and keeps what was collected for
    test_compilation_cache.py's check of the fixtures both tiers use."""
    _session["collected"] = list(items)
    items[:] = [item for item in items if item.get_closest_marker("heavy") is None] + [
        item for item in items if item.get_closest_marker("heavy") is not None
    ]


def pytest_runtest_setup(item):
    if item.get_closest_marker("heavy") is None:
        return
