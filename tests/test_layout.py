"""The boundaries of docs/layout.md that reading the source can check: `envs/` imports nothing from
`mjx_pbac/`, in any module of any subfolder (`envs/tools/` included) and in any function body, so
the environments and their tools can be used, and tested, alone; and no env imports `envs/tools/`.

Quick tier: it parses the source and imports nothing."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> set[str]:
    """Every module an `import` or `from ... import` anywhere in `path` names (lazy imports too);
    `from a import b` names both `a` and `a.b` (b may be a module)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_envs_imports_nothing_from_mjx_pbac():
    sources = sorted((ROOT / "envs").rglob("*.py"))
    assert ROOT / "envs" / "tools" / "benchmark.py" in sources  # the walk reaches the subfolders
    offending = {
        str(path.relative_to(ROOT)): sorted(name for name in imported_modules(path) if name.split(".")[0] == "mjx_pbac")
        for path in sources
    }
    assert not {path: names for path, names in offending.items() if names}


def test_no_env_imports_the_tools():
    """`envs/tools/` measures the envs; an env that needed one of them would make it part of the env."""
    offending = {
        path.name: sorted(name for name in imported_modules(path) if name.startswith("envs.tools"))
        for path in sorted((ROOT / "envs").glob("*.py"))
    }
    assert not {path: names for path, names in offending.items() if names}


def test_the_check_sees_a_lazy_import(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("def f():\n    from mjx_pbac.config import TrainConfig\n    import mjx_pbac\n    from envs import tools\n")
    assert imported_modules(module) == {"mjx_pbac.config", "mjx_pbac.config.TrainConfig", "mjx_pbac", "envs", "envs.tools"}
