"""The house rules the brief keeps: a core that imports no plugin, no import circle inside a package, no late imports.

Modules are split by job, not by length. An import circle is counted at run time: imports under
`if TYPE_CHECKING:` are skipped, imports inside functions count (a late import hides a circle, it
does not break it).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def packages(root: Path = ROOT) -> list[Path]:
    """The core and every plugin's package."""
    return [root / "thoth_core", *sorted(p for p in (root / "plugins").glob("*/thoth_*") if p.is_dir())]


def sources(root: Path = ROOT) -> list[Path]:
    """Every Python file of the core and the plugins' packages (their tests live outside them)."""
    return [path for package in packages(root) for path in sorted(package.rglob("*.py"))]


def modules(package: Path) -> dict[str, Path]:
    """The package's modules by dotted name (a folder's `__init__.py` is the folder's name)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that runs, at any depth (functions too), but none under `if TYPE_CHECKING:`."""
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _type_checking(node.test):
            pending += node.orelse
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        pending += ast.iter_child_nodes(node)


def import_graph(package: Path) -> dict[str, set[str]]:
    """Which of the package's modules each module imports at run time.

    `from . import name` goes to the submodule `name` when there is one, else to the package
    (a name it defines); importing a submodule runs its parents first, which is no edge.
    """
    names = modules(package)
    graph: dict[str, set[str]] = {name: set() for name in names}
    for name, path in names.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                parents = here[: len(here) - node.level + 1] if node.level else []
                base = ".".join(parents + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in names else base for a in node.names]
            graph[name] |= {target for target in targets if target in names and target != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: each strongly connected set of two or more modules (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = [stack.pop()]
            while group[-1] != node:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_core_imports_no_plugin():
    plugins = {p.name for p in (ROOT / "plugins").glob("*/thoth_*") if p.is_dir()}
    found = []
    for path in (ROOT / "thoth_core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in plugins]
    assert not found


@pytest.mark.parametrize("package", packages(), ids=lambda p: p.name)
def test_no_import_circle_inside_a_package(package):
    assert circles(import_graph(package)) == []


def test_no_import_is_made_late_with_noqa_e402():
    late = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sources()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "noqa: E402" in line
    ]
    assert late == []


def plant(root: Path, files: dict[str, str]) -> Path:
    """A package `thoth_planted` under root with these modules (relative paths -> source)."""
    package = root / "thoth_planted"
    for name, text in {"__init__.py": "", **files}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text, encoding="utf-8")
    return package


def test_a_circle_through_a_function_level_import_is_found(tmp_path):
    package = plant(
        tmp_path,
        {
            "plugin.py": "from .bundle import bundle_export\n\ndef backend_for(runtime):\n    return runtime\n",
            "bundle.py": (
                "def bundle_export(runtime):\n"
                "    from .plugin import backend_for  # late: the circle is still there\n"
                "    return backend_for(runtime)\n"
            ),
        },
    )
    assert circles(import_graph(package)) == [["thoth_planted.bundle", "thoth_planted.plugin"]]


def test_a_circle_through_the_package_and_an_absolute_import_is_found(tmp_path):
    package = plant(
        tmp_path,
        {
            "__init__.py": "TIERS = ()\n\ndef judge():\n    from thoth_planted import tiers\n",
            "tiers.py": "from . import TIERS, cues\n",
            "cues.py": "",
            "deep/__init__.py": "",
            "deep/a.py": "from ..deep import b\n",
            "deep/b.py": "import thoth_planted.deep.a\n",
        },
    )
    assert circles(import_graph(package)) == [
        ["thoth_planted", "thoth_planted.tiers"],
        ["thoth_planted.deep.a", "thoth_planted.deep.b"],
    ]


def test_type_checking_imports_and_submodule_imports_make_no_circle(tmp_path):
    package = plant(
        tmp_path,
        {
            "__init__.py": "from .store import Store\n",
            "store.py": "from . import erase\n\nclass Store:\n    pass\n",
            "erase.py": (
                "from typing import TYPE_CHECKING\nimport typing\n\nif TYPE_CHECKING:\n    from .store import Store\n"
                "if typing.TYPE_CHECKING:\n    from . import Store\nelse:\n    from . import cues\n"
            ),
            "cues.py": "",
        },
    )
    graph = import_graph(package)
    assert graph["thoth_planted.erase"] == {"thoth_planted.cues"}  # `else:` of TYPE_CHECKING runs
    assert circles(graph) == []
