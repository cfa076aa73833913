"""The house rules the brief keeps: small modules, and a core that imports no plugin."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 500


def sources() -> list[Path]:
    """The project's Python modules, tests, benches and scripts left out."""
    found = [*(ROOT / "thoth_core").rglob("*.py"), *(ROOT / "plugins").glob("*/thoth_*/**/*.py")]
    return [p for p in found if "tests" not in p.relative_to(ROOT).parts and "testing" not in p.parts]


def test_no_module_is_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in sources() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these modules (over {MAX_LINES} lines): {long}"


def test_the_core_imports_no_plugin():
    plugins = {p.name for p in (ROOT / "plugins").glob("*/thoth_*") if p.is_dir()}
    found = []
    for path in (ROOT / "thoth_core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in plugins]
    assert not found
