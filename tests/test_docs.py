"""The docs cannot drift: every hookspec is documented with its exact signature and a working example,
and the plugin tutorial's files are the files of `examples/thoth-hello`."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import types
from pathlib import Path

import pluggy
import pytest

from thoth_core import hookspecs
from thoth_core.types import LAYERS, SEFIROT

ROOT = Path(__file__).resolve().parents[1]
HOOKS_MD = (ROOT / "docs" / "hooks.md").read_text().split("\n## Hooks the reflection plugin declares\n")[0]
TUTORIAL = (ROOT / "docs" / "writing-plugins.md").read_text()
EXAMPLE = ROOT / "examples" / "thoth-hello"
CONCEPTS = ROOT / "docs" / "concepts" / "memory.md"

SPECS = {name: fn for name, fn in vars(hookspecs).items() if inspect.isfunction(fn) and hasattr(fn, "thoth_spec")}


def signature(name: str) -> str:
    return f"{name}({', '.join(inspect.signature(SPECS[name]).parameters)})"


def sections() -> dict[str, str]:
    """Hook sections of hooks.md: the `name(args)` heading -> the section's text."""
    parts = re.split(r"^## `([^`]+)`\n", HOOKS_MD, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_specs_were_found():
    assert {"pre_spawn_context", "post_turn_write", "session_end", "forget", "decide"} <= set(SPECS)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_hookspec_has_a_section_headed_by_its_exact_signature(name):
    assert signature(name) in sections(), f"docs/hooks.md has no section '## `{signature(name)}`'"


def test_no_section_documents_a_hook_that_does_not_exist():
    assert set(sections()) == {signature(name) for name in SPECS}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_section_documents_each_argument_and_has_an_example_that_registers(name):
    text = sections()[signature(name)]
    for argument in inspect.signature(SPECS[name]).parameters:
        assert f"`{argument}`" in text, f"{name}: argument {argument} is not described"
    examples = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert examples, f"{name}: no example"
    for source in examples:
        module = types.ModuleType(f"hooks_md_{name}")
        exec(compile(source, f"docs/hooks.md ({name})", "exec"), module.__dict__)  # noqa: S102 - our own docs
        pm = pluggy.PluginManager("thoth")
        pm.add_hookspecs(hookspecs)
        pm.register(module)
        pm.check_pending()
        assert name in {caller.name for caller in pm.get_hookcallers(module) or []}, (
            f"{name}: the example does not implement it"
        )


def test_the_memory_concepts_page_maps_every_layer_and_its_links_resolve():
    text = CONCEPTS.read_text()
    for number, layer in enumerate(LAYERS, start=1):
        assert f"| L{number} {layer} | {SEFIROT[layer]} |" in text, f"{layer}: no row with its Sefirah"
    assert "```mermaid\nflowchart" in text and "```text\n" in text
    for target in re.findall(r"\]\(([^)#:]+)\)", text):
        assert (CONCEPTS.parent / target).exists(), f"docs/concepts/memory.md links to a missing {target}"
    assert "(concepts/memory.md)" in HOOKS_MD and "(docs/concepts/memory.md)" in (ROOT / "README.md").read_text()


def tutorial_files() -> dict[str, str]:
    """The files the tutorial shows: fenced blocks with a title="PATH"."""
    return dict(re.findall(r'```\w+ title="([^"]+)"\n(.*?)```', TUTORIAL, flags=re.DOTALL))


def test_the_tutorial_shows_every_file_of_the_example():
    shipped = {
        str(p.relative_to(EXAMPLE))
        for p in EXAMPLE.rglob("*")
        if p.is_file() and p.suffix in (".py", ".toml") and "__pycache__" not in p.parts
    }
    assert set(tutorial_files()) == shipped


@pytest.mark.parametrize("path", sorted(tutorial_files()))
def test_the_tutorial_files_are_the_example_files(path):
    assert tutorial_files()[path] == (EXAMPLE / path).read_text(), (
        f"docs/writing-plugins.md and examples/thoth-hello/{path} differ"
    )


def installed(site: Path, module: str, name: str) -> Path:
    """A dist-info in site declaring a `thoth` entry point, so site on PYTHONPATH installs the plugin for `thoth`."""
    info = site / f"{module}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[thoth]\n{name} = {module}\n")
    return site


def run_pytest(folder: Path, *args: str, pythonpath: list[Path]) -> subprocess.CompletedProcess[str]:
    """pytest in folder (its ini options apply), writing nothing there: no cache, no bytecode."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *args],
        cwd=folder,
        env={**_clean_env(), "PYTHONPATH": ":".join(map(str, pythonpath)), "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow  # runs pytest, which runs thoth
def test_the_example_passes_its_own_tests_as_installed_without_a_warning(tmp_path):
    site = installed(tmp_path / "site", "thoth_hello", "hello")
    result = run_pytest(EXAMPLE, str(EXAMPLE / "tests"), pythonpath=[site, EXAMPLE])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 passed" in result.stdout and "warning" not in result.stdout.lower(), result.stdout


def test_the_test_kit_section_names_each_part_and_quotes_the_example_ini_options():
    kit = TUTORIAL.split("## 6. Test it with the conformance kit")[1].split("\n## ")[0]
    for part in ("thoth_env", "thoth_plugins", "run_thoth", "check_layer_plugin", "make_runtime", "StoreContract"):
        assert re.search(rf"`[\w.]*{part}\b", kit), f"the test-kit section does not name `{part}`"
    [ini] = re.findall(r"```toml\n(.*?)```", kit, flags=re.DOTALL)
    assert ini in (EXAMPLE / "pyproject.toml").read_text()
    assert "pytestmark = pytest.mark.asyncio" not in "".join(tutorial_files().values())


@pytest.mark.slow  # the whole contract suite on SQLite
def test_the_contract_suite_example_runs_and_passes(tmp_path):
    [block] = [b for b in re.findall(r"```python\n(.*?)```", TUTORIAL, flags=re.DOTALL) if "StoreContract" in b]
    name = block.splitlines()[0].removeprefix("# tests/")
    (tmp_path / name).write_text(block)
    result = run_pytest(tmp_path, name, pythonpath=[])
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"\b(\d{2,}) passed", result.stdout) and "failed" not in result.stdout, result.stdout


def _clean_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("THOTH_", "ANTHROPIC_", "PYTEST_"))}
