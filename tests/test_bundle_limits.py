"""`thoth bundle import` refuses a bundle past its limits (`[bundle]`) with one line, before anything is written.

Each limit is set small here, so a bomb of a few MiB of zeros stands for the 400 MB one measured
from outside (a 422 KB bundle that imported with exit 0 and made the next `thoth ask` take minutes).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from thoth_core import ThothError
from thoth_core.bundle import MB, Limits, open_bundle
from thoth_core.testing import run_thoth

pytestmark = pytest.mark.slow  # spawns thoth processes

ZEROS = bytes(8 * MB)  # inflates ~1000 times (a member's ratio is measured to within 32 KiB of its compressed size)


def bundle_with(path: Path, members: dict[str, bytes], *, claimed: dict[str, int] | None = None) -> Path:
    """A .tar.gz with a manifest listing `members` (so only the limits can refuse it); `claimed` sizes: headers only."""
    files = {
        name.removeprefix("home/"): {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for name, data in members.items()
        if name.startswith("home/")
    }
    sections = {
        name.removeprefix("sections/").removesuffix(".jsonl"): {
            "plugin": "x",
            "version": 1,
            "records": data.count(b"\n"),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
        for name, data in members.items()
        if name.startswith("sections/")
    }
    manifest = json.dumps({"format": "thoth-bundle", "version": 1, "sections": sections, "files": files}).encode()
    with tarfile.open(path, "w:gz") as tar:
        for name, data in {"manifest.json": manifest, **members}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, size in (claimed or {}).items():
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info)  # the header alone: the archive ends where its data would start
    return path


@pytest.mark.parametrize(
    ("members", "limits", "refusal"),
    [
        (
            {"home/knowledge/big.md": ZEROS},
            Limits(),
            r"home/knowledge/big\.md: 8\.0 MiB from at most [\d,]+ bytes compressed \(at least [\d,]+x\), over the "
            r"100x limit \(\[bundle\] max_ratio\)",
        ),
        (
            {"sections/episodic.jsonl": b'{"text": "same"}\n' * (MB // 2)},
            Limits(),
            r"sections/episodic\.jsonl: 8\.5 MiB from at most .* over the 100x limit \(\[bundle\] max_ratio\)",
        ),
        (
            {"home/knowledge/a.md": os.urandom(5000)},
            Limits(file_bytes=4096),
            r"home/knowledge/a\.md: 5,000 bytes, over the 4,096 bytes limit for a home file \(\[bundle\] max_file_mb\)",
        ),
        (
            {"sections/working.jsonl": os.urandom(5000)},
            Limits(section_bytes=4096),
            r"sections/working\.jsonl: 5,000 bytes, over the 4,096 bytes limit for a section "
            r"\(\[bundle\] max_section_mb\)",
        ),
        (
            {"home/a.md": os.urandom(3000), "home/b.md": os.urandom(3000)},
            Limits(total_bytes=5000),
            r"home/b\.md: takes the bundle to [\d,]+ bytes, over its 5,000 bytes limit \(\[bundle\] max_total_mb\)",
        ),
    ],
    ids=["home-file-ratio", "section-ratio", "home-file-size", "section-size", "total-size"],
)
def test_a_bundle_past_a_limit_is_refused_in_one_line_naming_the_member_and_the_limit(
    tmp_path: Path, members: dict[str, bytes], limits: Limits, refusal: str
) -> None:
    path = bundle_with(tmp_path / "b.tar.gz", members)
    with pytest.raises(ThothError, match=rf"^{path}: {refusal}; nothing was imported$"):
        open_bundle(path, limits=limits)
    bundle = open_bundle(path, limits=Limits(file_bytes=10 * MB, section_bytes=10 * MB, ratio=1e6))
    bundle.close()  # the same bundle within wider limits opens


def test_a_size_is_refused_from_the_header_before_anything_is_inflated(tmp_path: Path) -> None:
    # the header claims 1 TiB and no data follows: a refusal that came after reading would call it corrupt
    path = bundle_with(tmp_path / "b.tar.gz", {}, claimed={"home/knowledge/big.md": 1 << 40})
    with pytest.raises(ThothError, match=r"big\.md: 1,048,576\.0 MiB, over the 16\.0 MiB limit for a home file"):
        open_bundle(path)


def test_the_whole_bundle_is_held_to_the_ratio_too(tmp_path: Path) -> None:
    members = {f"home/notes/{n}.md": bytes(512 * 1024) for n in range(4)}  # each below the ratio floor, 2 MiB in all
    path = bundle_with(tmp_path / "b.tar.gz", members)
    with pytest.raises(
        ThothError, match=r"the bundle: 2\.0 MiB from [\d,]+ bytes compressed \([\d,]+x\), over the 100x"
    ):
        open_bundle(path)


def test_cli_refuses_with_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert run_thoth("init", str(home)).returncode == 0
    with (home / "thoth.toml").open("a", encoding="utf-8") as config:
        config.write("\n[bundle]\nmax_file_mb = 1\n")  # the limit is the home's: 1 MiB for a home file
    before = {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}
    path = bundle_with(tmp_path / "bomb.tar.gz", {"home/knowledge/big.md": bytes(3 * MB)})
    env = {"THOTH_HOME": None, "THOTH_LOAD_PLUGINS": "working,procedural"}
    done = run_thoth("bundle", "import", str(path), cwd=home, env=env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"thoth: error: {path}: home/knowledge/big.md: 3.0 MiB, over the 1.0 MiB limit for a home file "
        "([bundle] max_file_mb); nothing was imported\n"
    )
    assert {p: p.read_bytes() for p in home.rglob("*") if p.is_file()} == before  # no data folder, no file changed


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("max_ratio = 0", "bundle.max_ratio: expected a number of at least 1 and up to 1,000,000, got 0"),
        ("max_file_mb = -1", "bundle.max_file_mb: expected a positive number up to 1,073,741,824, got -1"),
        ("max_total_mb = nan", "bundle.max_total_mb: expected a positive number up to 1,073,741,824, got nan"),
        ("max_section_mb = true", "bundle.max_section_mb: expected a number of megabytes, got True"),
        ("max_files = 3", "bundle.max_files: unknown key in [bundle]; did you mean 'max_file_mb'?"),
    ],
)
def test_bad_limits_are_refused_naming_the_key(tmp_path: Path, setting: str, message: str) -> None:
    (tmp_path / "thoth.toml").write_text(f"[bundle]\n{setting}\n", encoding="utf-8")
    done = run_thoth("bundle", "import", str(tmp_path / "thoth.toml"), cwd=tmp_path, env={"THOTH_LOAD_PLUGINS": ""})
    assert done.returncode == 2 and done.stderr == f"thoth: error: {tmp_path / 'thoth.toml'}:2: {message}\n"
