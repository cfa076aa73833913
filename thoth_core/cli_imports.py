"""The `thoth` command's own import finder: the SDKs' `types` packages import each name when it is first used.

Only `thoth_core.cli.main` installs it: the command line owns its process, a library does not,
so a `Runtime()` in an application that embeds Thoth leaves the import system alone (tested).

`import openai` runs `openai/types/__init__.py`, which imports every type module of the API (467
modules with openai 3.63); a chat call needs 54. `defer_reexports("openai.types")` makes each
package under that name whose `__init__` holds nothing but `from .module import Name` lines (a
docstring, `from __future__` and a literal `__all__` aside) resolve `package.Name` on first
access instead, through PEP 562's module `__getattr__`. The names and objects are the same ones;
only when their modules load changes. A package with any other statement in its `__init__` runs
it as usual. `importlib.util.LazyLoader` cannot do this: the import system reads a package's
`__path__` to import its submodules, which triggers the load.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

SDK_TYPES = ("anthropic.types", "openai.types")  # the re-exporting packages the `thoth` command defers
_lock = threading.Lock()


def defer_reexports(*packages: str) -> None:
    """From now on, import these packages (and the packages under them) name by name; one finder a process."""
    with _lock:
        finder = next((f for f in sys.meta_path if isinstance(f, ReexportFinder)), None)
        if finder is None:
            finder = ReexportFinder()
            sys.meta_path.insert(0, finder)
        finder.packages.update(packages)


def reexported_names(source: str) -> tuple[dict[str, tuple[str, str]], list[str] | None] | None:
    """`{name: (submodule, its name)}` and the literal `__all__`, if `source` only re-exports; else None."""
    names: dict[str, tuple[str, str]] = {}
    exported: list[str] | None = None
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            try:
                exported = list(ast.literal_eval(node.value))
            except ValueError:
                return None
            continue
        if not (isinstance(node, ast.ImportFrom) and node.level == 1 and node.module):
            return None
        for alias in node.names:
            if alias.name == "*":
                return None
            names[alias.asname or alias.name] = (node.module, alias.name)
    return names, exported


class ReexportFinder(importlib.abc.MetaPathFinder):
    """Finds the listed packages as usual, and defers the `__init__` of those that only re-export."""

    def __init__(self) -> None:
        self.packages: set[str] = set()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not any(fullname == p or fullname.startswith(p + ".") for p in self.packages):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.submodule_search_locations is None:
            return spec
        if not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec
        found = reexported_names(spec.loader.get_source(fullname) or "")
        if found is not None:
            spec.loader = DeferredInit(spec.loader, *found)
        return spec


class DeferredInit(importlib.abc.Loader):
    """Loads a re-exporting package without running its `__init__`; a name imports its module when read."""

    def __init__(
        self,
        loader: importlib.machinery.SourceFileLoader,
        names: dict[str, tuple[str, str]],
        exported: list[str] | None,
    ) -> None:
        self.loader = loader
        self.names = names
        self.exported = exported

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)  # get_source, get_resource_reader, ...: the package's own loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        package, names = module.__name__, self.names
        submodules = {submodule.partition(".")[0] for submodule, _ in names.values()}  # attributes once run

        def __getattr__(name: str) -> Any:
            if name in names:
                submodule, original = names[name]
                value = getattr(importlib.import_module(f"{package}.{submodule}"), original)
                setattr(module, name, value)
                return value
            if name in submodules:
                return importlib.import_module(f"{package}.{name}")
            raise AttributeError(f"module {package!r} has no attribute {name!r}")

        def __dir__() -> list[str]:
            return sorted(set(module.__dict__) | set(names))

        module.__getattr__ = __getattr__  # type: ignore[method-assign]
        module.__dir__ = __dir__  # type: ignore[method-assign]
        if self.exported is not None:
            setattr(module, "__all__", self.exported)  # noqa: B010 - a module attribute mypy does not know


__all__ = ["SDK_TYPES", "DeferredInit", "ReexportFinder", "defer_reexports", "reexported_names"]
