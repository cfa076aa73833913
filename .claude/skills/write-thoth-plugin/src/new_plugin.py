"""Scaffold a Thoth plugin distribution: `python new_plugin.py NAME LAYER [--root DIR]`."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

LAYERS = ("working", "identity", "episodic", "procedural", "reflection", "other")

FILES = {
    "pyproject.toml": """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "thoth-{name}"
version = "0.1.0"
description = "Thoth plugin: {name}"
readme = "README.md"
requires-python = ">=3.11"
license = {{ text = "Apache-2.0" }}
dependencies = ["thoth-core"]

[project.optional-dependencies]
test = ["pytest>=8", "pytest-asyncio>=0.23"]

[project.entry-points.thoth]
{name} = "thoth_{module}.plugin"

[tool.setuptools.packages.find]
include = ["thoth_{module}*"]

[tool.setuptools.package-data]
thoth_{module} = ["py.typed"]
""",
    "thoth_{module}/__init__.py": '"""Thoth plugin {name}."""\n',
    "thoth_{module}/py.typed": "",
    "thoth_{module}/plugin.py": '''"""Thoth plugin {name}: say here what it adds to the turn."""

from __future__ import annotations

from thoth_core import ContextBlock, Session, Turn, hookimpl

LAYER = "{layer}"


@hookimpl
def pre_spawn_context(turn: Turn, session: Session) -> ContextBlock | None:
    return None
''',
    "tests/test_{module}.py": """from __future__ import annotations

from thoth_{module} import plugin


async def test_a_turn_goes_through(make_runtime):
    runtime = make_runtime({{"{name}": plugin}}, replies=[{{"reply": "hi"}}])
    result = await runtime.turn("hello", peer="ann", thread="t")
    assert result.reply.text == "hi"
""",
    "README.md": "# thoth-{name}\n\nWhat it does, its `[plugins.{name}]` settings, how to test it.\n",
}


def scaffold(root: Path, name: str, layer: str) -> Path:
    """Write plugins/NAME under root; refuses to overwrite."""
    if not re.fullmatch(r"[a-z][a-z0-9-]{1,30}", name):
        raise SystemExit(f"invalid plugin name {name!r}: lowercase letters, digits and hyphens")
    if layer not in LAYERS:
        raise SystemExit(f"unknown layer {layer!r}; expected one of {', '.join(LAYERS)}")
    folder = root / "plugins" / name
    if folder.exists():
        raise SystemExit(f"{folder} already exists")
    values = {"name": name, "module": name.replace("-", "_"), "layer": layer}
    for template, text in FILES.items():
        path = folder / template.format(**values)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.format(**values), encoding="utf-8")
    return folder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("name")
    parser.add_argument("layer")
    parser.add_argument("--root", type=Path, default=Path.cwd())
    args = parser.parse_args(argv)
    print(scaffold(args.root, args.name, args.layer))


if __name__ == "__main__":
    main(sys.argv[1:])
