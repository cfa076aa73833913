"""The `thoth` command's finder: a package whose `__init__` only re-exports imports each name when first read."""

from __future__ import annotations

import importlib
import json
import keyword
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thoth_core.cli_imports import defer_reexports, reexported_names

LEAF = "import {root}\n{root}.loaded.append(__name__.rpartition('.')[2])\nclass {name}:\n    pass\n"


@pytest.fixture
def package(tmp_path, request):
    """A package `root` with `root.types` (re-exports only) and `root.mixed` (re-exports and a statement)."""
    root = f"lazy_{request.node.name}"
    base = tmp_path / root
    for folder in (base, base / "types", base / "mixed"):
        folder.mkdir()
    (base / "__init__.py").write_text("loaded = []\n")
    for folder in (base / "types", base / "mixed"):
        (folder / "apple.py").write_text(LEAF.format(root=root, name="Apple"))
        (folder / "pear.py").write_text(LEAF.format(root=root, name="Pear"))
    (base / "types" / "__init__.py").write_text(
        '"""Types."""\nfrom __future__ import annotations\n\nfrom .apple import Apple as Apple\n'
        'from .pear import Pear as Fruit\n__all__ = ["Apple", "Fruit"]\n'
    )
    (base / "mixed" / "__init__.py").write_text("from .apple import Apple\nfrom .pear import Pear\nVERSION = 1\n")
    sys.path.insert(0, str(tmp_path))
    finders = list(sys.meta_path)
    defer_reexports(f"{root}.types", f"{root}.mixed")
    yield importlib.import_module(root)
    sys.meta_path[:] = finders  # the finder is the `thoth` process's; the test process gets its own back
    sys.path.remove(str(tmp_path))
    for name in [m for m in sys.modules if m == root or m.startswith(root + ".")]:
        del sys.modules[name]


def test_a_reexporting_package_imports_each_name_when_it_is_first_read(package):
    types = importlib.import_module(f"{package.__name__}.types")
    assert package.loaded == []
    assert types.Fruit.__name__ == "Pear" and package.loaded == ["pear"]
    assert types.Apple is sys.modules[f"{package.__name__}.types.apple"].Apple
    assert package.loaded == ["pear", "apple"]
    assert types.__all__ == ["Apple", "Fruit"] and {"Apple", "Fruit"} <= set(dir(types))
    assert types.pear.Pear is types.Fruit  # a submodule is an attribute, as after an eager import
    with pytest.raises(AttributeError, match="has no attribute 'Plum'"):
        types.Plum  # noqa: B018


def test_from_import_reads_only_the_names_it_asks_for(package):
    namespace: dict[str, object] = {}
    exec(f"from {package.__name__}.types import Apple", namespace)
    assert namespace["Apple"].__name__ == "Apple" and package.loaded == ["apple"]


def test_a_package_with_any_other_statement_runs_its_init_as_usual(package):
    mixed = importlib.import_module(f"{package.__name__}.mixed")
    assert mixed.VERSION == 1 and package.loaded == ["apple", "pear"]


@pytest.mark.parametrize(
    "source",
    [
        "from .a import *\n",
        "import os\n",
        "x = 1\n",
        "from . import a\n",
        "__all__ = sorted(['A'])\n",
        "from os import sep\n",
    ],
)
def test_only_relative_named_reexports_are_deferred(source):
    assert reexported_names(source) is None


PROBE = """
import json, sys
from thoth_core.cli_imports import defer_reexports
sdk = sys.argv[1]
if sys.argv[2] == "deferred":
    defer_reexports(sdk + ".types")
module = __import__(sdk)
loaded = sum(m.startswith(sdk + ".types.") for m in sys.modules)
names = [n for n in dir(module.types) if not n.startswith("_")]
values = {n: getattr(module.types, n) for n in names}
resolved = {n: v.__module__ for n, v in values.items() if getattr(v, "__module__", "__future__") != "__future__"}
print(json.dumps({"loaded": loaded, "resolved": resolved}))
"""


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_an_sdk_types_package_loads_less_and_every_name_resolves_as_eagerly(sdk):
    def run(mode: str) -> dict:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(PROBE), sdk, mode], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    eager, deferred = run("eager"), run("deferred")
    assert deferred["loaded"] < 0.9 * eager["loaded"], (deferred["loaded"], eager["loaded"])
    assert deferred["resolved"] == eager["resolved"] and len(eager["resolved"]) > 100


identifiers = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(lambda n: not keyword.iskeyword(n))


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.tuples(identifiers, identifiers, st.none() | identifiers), min_size=1, max_size=6),
    other=st.sampled_from(["import os", "x = 1", "from . import a", "from .a import *", "def f(): pass"]),
)
def test_a_source_of_named_reexports_maps_each_name_and_any_other_line_refuses(lines, other):
    source = '"""Doc."""\nfrom __future__ import annotations\n' + "".join(
        f"from .{module} import {name}" + (f" as {alias}" if alias else "") + "\n" for module, name, alias in lines
    )
    expected = {alias or name: (module, name) for module, name, alias in lines}
    assert reexported_names(source) == (expected, None)
    assert reexported_names(source + other + "\n") is None
