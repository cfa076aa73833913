"""The backend guide cannot drift: docs/writing-a-backend.md quotes the whole of `examples/thoth-jsonstore`,
in order, and the example passes the episodic contract suite and `thoth ask`/`recall`/`forget` as installed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "writing-a-backend.md"
EXAMPLE = ROOT / "examples" / "thoth-jsonstore"


def quoted() -> dict[str, list[str]]:
    """The guide's fenced blocks with a title="PATH", per path, in the order they appear."""
    blocks: dict[str, list[str]] = {}
    for path, body in re.findall(r'```\w+ title="([^"]+)"\n(.*?)```', GUIDE.read_text(), flags=re.DOTALL):
        blocks.setdefault(path, []).append(body)
    return blocks


def shipped() -> set[str]:
    return {
        str(p.relative_to(EXAMPLE))
        for p in EXAMPLE.rglob("*")
        if p.is_file() and p.suffix in (".py", ".toml") and "__pycache__" not in p.parts
    }


def test_the_guide_quotes_every_file_of_the_example():
    assert set(quoted()) == shipped()


@pytest.mark.parametrize("path", sorted(shipped()))
def test_the_quoted_pieces_are_the_file_in_order_and_leave_nothing_out(path):
    text, at = (EXAMPLE / path).read_text(), 0
    rest = []
    for piece in quoted()[path]:
        found = text.find(piece, at)
        assert found >= 0, f"docs/writing-a-backend.md quotes a piece of {path} that is not there (after offset {at})"
        rest.append(text[at:found])
        at = found + len(piece)
    rest.append(text[at:])
    assert not "".join(rest).strip(), f"docs/writing-a-backend.md leaves out of {path}: {''.join(rest).strip()[:200]!r}"


def test_the_search_uses_the_shared_ranker_and_the_guide_names_its_helpers():
    source = (EXAMPLE / "thoth_jsonstore.py").read_text()
    assert "from thoth_episodic.scoring import candidate_count, index_text, query_terms, rank" in source
    guide = GUIDE.read_text()
    for name in ("rank", "candidate_count", "query_terms", "index_text", "StoreContract", "open_store"):
        assert f"`{name}" in guide, name


def test_the_guide_shows_the_contract_suites_count():
    from thoth_episodic.contract import StoreContract

    tests = [name for name in dir(StoreContract) if name.startswith("test_")]
    # all but the one for stores that embed late (the example does not)
    assert f"```text\n{len(tests) - 1} passed, 1 skipped\n```" in GUIDE.read_text()


def test_the_guide_is_linked_where_a_backend_author_looks():
    for page, link in (
        ("README.md", "(docs/writing-a-backend.md)"),
        ("docs/writing-plugins.md", "(writing-a-backend.md)"),
        ("docs/hooks.md", "(writing-a-backend.md)"),
        ("plugins/episodic/README.md", "(../../docs/writing-a-backend.md)"),
    ):
        assert link in (ROOT / page).read_text(), f"{page} does not link the backend guide"
    for target in re.findall(r"\]\(([^)#:]+)", GUIDE.read_text()):
        assert (GUIDE.parent / target).exists(), f"docs/writing-a-backend.md links to a missing {target}"


@pytest.mark.slow  # the contract suite, then pytest running thoth init/config/ask/recall/forget
def test_the_example_passes_the_contract_and_its_cli_test_as_installed(tmp_path):
    site = tmp_path / "site"
    info = site / "thoth_jsonstore-0.1.dist-info"  # the metadata pip writes: `thoth` finds the entry point
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thoth-jsonstore\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[thoth]\njsonstore = thoth_jsonstore\n")
    before = sorted(EXAMPLE.rglob("*"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THOTH_", "ANTHROPIC_", "PYTEST_"))}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist"]
        + [str(EXAMPLE / "tests")],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": f"{site}:{EXAMPLE}", "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "22 passed, 1 skipped" in result.stdout and "warning" not in result.stdout.lower(), result.stdout
    assert "```text\n22 passed, 1 skipped\n```" in GUIDE.read_text()  # the guide shows what the reader will see
    assert sorted(EXAMPLE.rglob("*")) == before  # nothing written into the source tree
