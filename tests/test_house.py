"""The house rules the brief keeps: a core that imports no plugin (modules are split by job, not by length)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_core_imports_no_plugin():
    plugins = {p.name for p in (ROOT / "plugins").glob("*/thoth_*") if p.is_dir()}
    found = []
    for path in (ROOT / "thoth_core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in plugins]
    assert not found
