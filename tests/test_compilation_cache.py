"""mjx_pbac/compilation_cache.py: the persistent cache a second process reads, and the compile log
($MJX_PBAC_COMPILE_LOG) that benchmarks/compile_log.py sums."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# A program that takes over the cache's 1 s threshold to compile here (an unrolled chain of
# sines), so the first process writes it to the cache and the second reads it back.
PROGRAM = """
import jax, jax.numpy as jp
from mjx_pbac import compilation_cache
compilation_cache.enable()
def chain(x):
    for i in range(3000):
        x = jp.sin(x * 1.0001 + i)
    return x
print(float(jax.jit(chain)(jp.float32(0.5))))
"""


def _summariser():
    spec = importlib.util.spec_from_file_location("compile_log", ROOT / "benchmarks" / "compile_log.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_compile_log_names_each_compile_its_test_and_whether_the_cache_had_it(tmp_path):
    log = tmp_path / "compiles.jsonl"
    environment = {  # the cache's default threshold (1 s), not the suite's 0 (tests/conftest.py)
        **os.environ, "MJX_PBAC_JAX_CACHE": str(tmp_path / "cache"), "MJX_PBAC_COMPILE_LOG": str(log), "MJX_PBAC_JAX_CACHE_MIN_SECONDS": "",
    }
    outputs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", PROGRAM], cwd=ROOT, env=environment, capture_output=True, text=True, check=False, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "PERSISTENT COMPILATION CACHE" not in done.stderr  # the cache's DEBUG lines go to the log alone
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    chains = [row for row in rows if row["kind"] == "compile" and row["fun"] == "jit(chain)"]
    assert [row["cache"] for row in chains] == ["miss", "hit"], chains
    assert chains[0]["key"] == chains[1]["key"] and chains[0]["key"].startswith("jit_chain-")
    assert chains[0]["seconds"] > 1.0 > chains[1]["seconds"]
    assert chains[0]["pid"] != chains[1]["pid"]
    # The test that started the processes, as pytest names it (subprocesses inherit the variable).
    assert {row["test"] for row in rows} == {os.environ["PYTEST_CURRENT_TEST"].rsplit(" (", 1)[0]}
    assert {"trace", "lower"} <= {row["kind"] for row in rows}

    module = _summariser()
    printed = module.summarise(module.load(str(log)))
    this_file = "tests/test_compilation_cache.py"
    (row,) = [line for line in printed.splitlines() if line.startswith(f"| {this_file} |")]
    compiled_seconds = float(row.split(" | ")[3].split()[0])  # the chain's compile and the small programs'
    assert compiled_seconds >= round(chains[0]["seconds"], 1), row
    # The chain was read back, not compiled again; the small programs under the cache's 1 s
    # threshold (jit(convert_element_type) ...) were compiled by both processes and are listed.
    repeated = printed.split("Cache keys compiled more than once")[1].split("Programs by")[0]
    assert "jit_chain-" not in repeated and "jit(chain): 1 keys, 1 tests" in printed

    # With the cache off the log is still written, each compile marked "off".
    off_log = tmp_path / "off.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], cwd=ROOT, env={**environment, "MJX_PBAC_JAX_CACHE": "", "MJX_PBAC_COMPILE_LOG": str(off_log)},
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    offs = [json.loads(line) for line in off_log.read_text().splitlines()]
    assert [row["cache"] for row in offs if row["fun"] == "jit(chain)" and row["kind"] == "compile"] == ["off"]


def test_the_summary_lists_a_program_compiled_twice(tmp_path):
    """A key missed twice (a compile under the cache's threshold, or the cache off) is listed with
    its seconds and the tests that compiled it."""
    rows = [
        {"kind": "compile", "fun": "jit(step)", "seconds": 3.0, "pid": 1, "test": "tests/test_a.py::test_x", "cache": "miss", "key": "jit_step-1"},
        {"kind": "compile", "fun": "jit(step)", "seconds": 2.5, "pid": 2, "test": "tests/test_b.py::test_y", "cache": "miss", "key": "jit_step-1"},
        {"kind": "compile", "fun": "jit(step)", "seconds": 0.1, "pid": 3, "test": "tests/test_b.py::test_z", "cache": "hit", "key": "jit_step-1"},
        {"kind": "trace", "fun": "step", "seconds": 1.5, "pid": 1, "test": "tests/test_a.py::test_x"},
    ]
    module = _summariser()
    printed = module.summarise(rows)
    assert "| tests/test_a.py | 1.5 | 0.0 | 3.0 (1) | 0.0 (0) |" in printed
    assert "| tests/test_b.py | 0.0 | 0.0 | 2.5 (1) | 0.1 (1) |" in printed
    assert "Cache keys compiled more than once: 1, 5.5 s in all" in printed
    assert "- 5.5 s, 2x jit_step-1: tests/test_a.py::test_x, tests/test_b.py::test_y" in printed
    assert "- 5.5 s jit(step): 1 keys, 2 tests" in printed
    # Beside the tests' own seconds, from the same run's `pytest --durations=0` lines.
    output = "12.50s call     tests/test_a.py::test_x\n0.50s setup    tests/test_a.py::test_x\n4.00s call     tests/test_b.py::test_y[p]\n"
    assert module.test_seconds(output) == {"tests/test_a.py": 13.0, "tests/test_b.py": 4.0}
    printed = module.summarise(rows, durations=module.test_seconds(output))
    assert "| tests/test_a.py | 13.0 | 1.5 | 0.0 | 3.0 (1) | 0.0 (0) |" in printed and "| all | 17.0 | 1.5 |" in printed


def test_a_missing_or_malformed_log_is_named(tmp_path):
    module = _summariser()
    for content, message in ((None, "no compile log at"), ("not json\n", "is not a compile log")):
        path = tmp_path / "log.jsonl"
        if content is not None:
            path.write_text(content)
        try:
            module.main([str(path)])
        except SystemExit as error:
            assert message in str(error), error
        else:
            raise AssertionError("no error")


def test_the_suite_caches_every_program_and_passes_that_to_the_commands_it_starts():
    """tests/conftest.py sets the threshold to 0 for this process and, through the environment,
    for every train.py command a test starts: a small program dropped at a module's end, or
    compiled by another process, is read back instead of compiled again."""
    import jax

    from mjx_pbac import compilation_cache

    assert os.environ[compilation_cache.MIN_SECONDS_VARIABLE] == "0"
    if compilation_cache.enable() is not None:  # the cache on (it is, unless MJX_PBAC_JAX_CACHE is empty)
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0


def test_heavy_tests_run_last(monkeypatch):
    """tests/conftest.py: heavy tests are moved after every other test, each group in its order;
    every one of them runs, however long the session has run."""
    import sys

    conftest = sys.modules["conftest"]

    class Item:
        def __init__(self, name, heavy):
            self.name, self.heavy = name, heavy

        def get_closest_marker(self, marker):
            return object() if marker == "heavy" and self.heavy else None

    items = [Item("a", True), Item("b", False), Item("c", True), Item("d", False)]
    monkeypatch.setitem(conftest._session, "collected", conftest._session.get("collected"))  # the session's, back after
    conftest.pytest_collection_modifyitems(None, None, items)
    assert [item.name for item in items] == ["b", "d", "a", "c"]
    monkeypatch.setenv("MJX_PBAC_HEAVY_UNTIL_MINUTES", "0")  # the old time limit is gone: it skips nothing
    conftest.pytest_runtest_setup(Item("a", True))
    conftest.pytest_runtest_setup(Item("b", False))


def test_no_module_fixture_serves_both_heavy_and_other_tests():
    """Heavy tests run after every other (tests/conftest.py), so a module-scoped fixture that
    both tiers use is torn down when its module's other tests end and built again for its heavy
    ones (the video tests' Hopper run directory was, ~30 s): such a fixture is session-scoped.
    Checked over every test the test session collected, before any `-k` or `-m` deselected."""
    import sys

    tiers: dict[str, set[bool]] = {}
    for item in sys.modules["conftest"]._session["collected"]:
        heavy = item.get_closest_marker("heavy") is not None
        for name, definitions in item._fixtureinfo.name2fixturedefs.items():
            if definitions[-1].scope == "module" and definitions[-1].func.__module__ != "conftest":  # conftest's drops programs per module, as meant
                tiers.setdefault(f"{item.module.__name__}.{name}", set()).add(heavy)
    shared = sorted(name for name, kinds in tiers.items() if len(kinds) == 2)
    assert not shared, f"module-scoped fixtures used by heavy and other tests (make them scope='session'): {shared}"


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_a_malformed_cache_threshold_is_one_line_naming_it(value, monkeypatch):
    """$MJX_PBAC_JAX_CACHE_MIN_SECONDS that is not a number of seconds >= 0 stops a command before
    it runs, naming the variable and what it takes; unset or empty is the default, 1 s."""
    import train as cli
    from mjx_pbac import compilation_cache

    monkeypatch.setenv(compilation_cache.MIN_SECONDS_VARIABLE, "")
    assert compilation_cache.min_seconds() == 1.0
    monkeypatch.setenv(compilation_cache.MIN_SECONDS_VARIABLE, value)
    with pytest.raises(SystemExit, match=rf"error: MJX_PBAC_JAX_CACHE_MIN_SECONDS='{value}': expected a number of seconds >= 0"):
        cli.main(["--profile", "chain"])
