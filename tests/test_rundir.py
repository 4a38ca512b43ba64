"""The run directory's module (`mjx_pbac/rundir.py`): its file names are spelled there alone, and
its small readers behave as the runner, the report and the table rely on. The run directory's
behaviour (lock, resume, damaged files) is tested through runs in test_lifecycle.py and
test_runner.py. Quick tier: nothing compiles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mjx_pbac import rundir

ROOT = Path(__file__).resolve().parent.parent

NAMES = {rundir.CONFIG, rundir.METRICS, rundir.EVAL, rundir.VISITS, rundir.TENSORBOARD, rundir.CHECKPOINTS,
         rundir.SUMMARY, rundir.ERROR_LOG, rundir.ATTEMPTS, rundir.LOCK}


def _spelled(path: Path) -> list[str]:
    """The run-file names `path` spells as a whole string literal (prose that mentions one, in a
    docstring or a message, is a longer string and does not count)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    keys = {id(key) for node in ast.walk(tree) if isinstance(node, ast.Dict) for key in node.keys}  # a record's field, not a file
    return sorted(
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES and id(node) not in keys
    )


def test_no_module_but_rundir_spells_a_run_file_name():
    sources = [*(ROOT / "mjx_pbac").rglob("*.py"), ROOT / "train.py", *(ROOT / "benchmarks").rglob("*.py")]
    assert ROOT / "mjx_pbac" / "rundir.py" in sources and len(sources) > 30
    found = [hit for path in sources if path.name != "rundir.py" for hit in _spelled(path)]
    assert not found, found
    assert len(_spelled(ROOT / "mjx_pbac" / "rundir.py")) == len(NAMES)  # each named once, there


def test_the_check_sees_a_spelled_name(tmp_path, monkeypatch):
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path, raising=False)
    module = tmp_path / "module.py"
    module.write_text('PATH = "eval.jsonl"\nTEXT = "see eval.jsonl"\nRECORD = {"checkpoints": []}\n')
    assert [hit.split(": ", 1)[1] for hit in _spelled(module)] == ["'eval.jsonl'"]


def test_read_jsonl_skips_a_torn_last_line_only_when_asked(tmp_path):
    path = tmp_path / rundir.EVAL
    assert rundir.read_jsonl(path) == []  # no file yet: no rows
    path.write_text('{"env_steps": 0}\n\n{"env_steps": 10}\n{"env_st')
    notes: list[str] = []
    assert rundir.read_jsonl(path, notes) == [{"env_steps": 0}, {"env_steps": 10}]
    assert notes == [f"{path}: line 4 is not valid JSON and was skipped"]
    with pytest.raises(ValueError):
        rundir.read_jsonl(path)


def test_a_new_run_directory_is_named_safely_and_never_reused(tmp_path, monkeypatch):
    monkeypatch.setattr(rundir, "RUNS_ROOT", tmp_path / "runs")
    first, held = rundir.new_run_dir(None, "chain-pbac/s 0")
    held.release()
    second, held = rundir.new_run_dir(None, "chain-pbac/s 0")
    held.release()
    assert first.name.startswith("chain-pbac_s_0-") and first != second and second.name.startswith(first.name)
    assert rundir.safe_name("..//") == "run"


def test_set_aside_moves_the_outputs_alone(tmp_path):
    for name in (rundir.CONFIG, rundir.EVAL, rundir.SUMMARY):
        (tmp_path / name).write_text("{}")
    (tmp_path / rundir.CHECKPOINTS).mkdir()
    aside = rundir.set_aside_outputs(tmp_path)
    assert aside == tmp_path / rundir.ATTEMPTS / "1"
    assert sorted(p.name for p in aside.iterdir()) == sorted([rundir.EVAL, rundir.SUMMARY])
    assert (tmp_path / rundir.CONFIG).is_file() and (tmp_path / rundir.CHECKPOINTS).is_dir()
    assert rundir.set_aside_outputs(tmp_path) is None  # nothing left to move
