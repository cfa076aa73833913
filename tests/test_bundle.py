"""`thoth bundle export|import`: the whole agent in one file, read back into a fresh home the same.

A runtime with the first-party layers takes turns (replay model), ends a session (reflection:
MEMORY.md, queue, check-in, transient record), approves a skill and a persona note; its bundle
imported into a fresh `thoth init` home in a second runtime must show every layer the same.
"""

from __future__ import annotations

import asyncio
import io
import json
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from thoth_core import ThothError
from thoth_core.bundle import export_bundle, home_files, import_bundle, open_bundle
from thoth_core.config import Config
from thoth_core.home import init_home
from thoth_core.plugins import make_plugin_manager
from thoth_core.testing import make_test_runtime, run_thoth

working = pytest.importorskip("thoth_working.plugin")
identity = pytest.importorskip("thoth_identity.plugin")
episodic = pytest.importorskip("thoth_episodic.plugin")
procedural = pytest.importorskip("thoth_procedural.plugin")
reflection = pytest.importorskip("thoth_reflection.plugin")

PLUGINS = {
    "working": working,
    "identity": identity,
    "episodic": episodic,
    "procedural": procedural,
    "reflection": reflection,
}
REFLECTION = {
    "what_worked": ["Asking which environment first saved a round trip."],
    "what_didnt": [],
    "skill": {"name": "deploy-staging", "description": "Deploy the app to staging.", "body": "1. Build.\n2. Ship."},
    "memory_notes": ["Ann deploys to staging every Friday."],
    "persona_observations": ["Lead with the command, then explain."],
    "next_check_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3 * 86400)),
    "user_model_updates": {"ann": ["Prefers terse answers."]},
}
RULES = [
    {"purpose": "reflection", "reply": json.dumps(REFLECTION)},
    {"purpose": "derive", "reply": json.dumps({"observations": [], "facts": []})},
    {"purpose": "dialectic", "reply": "Nothing in particular."},
    {"reply": "Run make deploy ENV=staging."},
]


def agent(tmp_path: Path, name: str) -> tuple[Path, Any]:
    """A fresh `thoth init` home and a runtime on it (data in its own folder)."""
    root, data = tmp_path / name, tmp_path / f"{name}-data"
    init_home(root, make_plugin_manager(Config()))
    data.mkdir()
    config = {"thoth": {"founders": ["lead"]}}
    return root, make_test_runtime(data, PLUGINS, config=config, replies=RULES, root=root)


async def fill(runtime: Any) -> None:
    """Turns in two threads, a finished session (reflection), approvals and an explicit memory."""
    await runtime.turn("How do I deploy to staging?", peer="ann", thread="t1")
    await runtime.turn("/remember I live in Lyon", peer="ann", thread="t1")
    await runtime.turn("What is the build command?", peer="bob", thread="b1")
    await runtime.turn("/done", peer="ann", thread="t1")
    await runtime.drain()
    [skill] = [i["id"] for i in await runtime.approvals(actor="lead") if i["kind"] == "skill"]
    await runtime.decide(skill, "approve", actor="lead")
    await runtime.drain()


def snapshot(runtime: Any) -> dict[str, Any]:
    """What every layer shows: episodes, recall, identity exports, sessions, reflection rows, approvals, files."""
    from thoth_episodic.memory import memory_for
    from thoth_identity.bundle import held_peers
    from thoth_reflection.bundle import NIGHTLY_FILES
    from thoth_reflection.reflect import records
    from thoth_reflection.settings import state
    from thoth_working.plugin import state as working_state
    from thoth_working.store import read_transcript, transcript_path

    memory = memory_for(runtime)
    memory.flush(10)
    backend = identity.backend_for(runtime)
    store = working_state(runtime).store
    st = state(runtime)

    def plain(document: dict[str, Any]) -> dict[str, Any]:
        rows = {table: [{k: v for k, v in r.items() if k not in ("id", "message_id")} for r in rows]
                for table, rows in document.items() if isinstance(rows, list)}  # fmt: skip
        return {k: v for k, v in document.items() if k != "exported_at"} | rows

    return {
        "episodes": sorted((e.to_dict() for e in memory.store.episodes()), key=lambda e: e["id"]),
        "recall": [h.episode.id for h in memory.recall("deploy staging", workspace="default", peer="ann", k=5)],
        "identity": [plain(backend.export(w, p)) for w, p in held_peers(backend)],
        "sessions": [
            (s, read_transcript(transcript_path(store.root, s.session_id, s.started_at))) for s in store.every()
        ],
        "reflection": {
            t: [{k: v for k, v in r.items() if k != "id"} for r in st.store.query(f"SELECT * FROM {t} ORDER BY rowid")]
            for t in ("runs", "items", "check_ins", "consolidated", "peers", "reflected", "audit")
        },
        "transient": [(r.id, r.text()) for r in records(st).all()],
        "nightly": {name: (st.dir / name).read_text() for name in NIGHTLY_FILES if (st.dir / name).exists()},
        "approvals": sorted(asyncio.run(runtime.approvals(actor="lead")), key=lambda i: i["id"]),
        "files": {rel: path.read_bytes() for rel, path in home_files(runtime)},
    }


def test_round_trip_into_a_fresh_home_shows_every_layer_the_same(tmp_path):
    root_a, source = agent(tmp_path, "a")
    asyncio.run(fill(source))
    assert (root_a / ".claude" / "skills" / "deploy-staging" / "SKILL.md").exists()
    from thoth_reflection.settings import state

    for name, text in (("snapshot-weights.json", '{"ab12": [2, 3]}'), ("snapshot-archive.md", "- cut line\n")):
        (state(source).dir / name).write_text(text)  # as nightly leaves them
    before = snapshot(source)
    assert before["episodes"] and before["recall"] and before["sessions"] and before["transient"]
    assert len(before["nightly"]) == 2
    assert before["approvals"] and before["reflection"]["items"] and before["reflection"]["check_ins"]
    assert any(o["content"] == "Prefers terse answers." for d in before["identity"] for o in d["observations"])

    path = tmp_path / "ann.thoth.tar.gz"
    ticks: list[int] = []
    manifest = export_bundle(source, path, progress=ticks.append)
    assert manifest["format"] == "thoth-bundle" and manifest["version"] == 1
    assert set(manifest["sections"]) == {"episodic", "identity", "reflection", "working"}
    assert "persona/MEMORY.md" in manifest["files"] and ".claude/skills/deploy-staging/SKILL.md" in manifest["files"]
    assert not any(name.endswith(".db") or name.startswith(".git/") for name in manifest["files"])
    assert sum(ticks) == sum(s["records"] for s in manifest["sections"].values()) + len(manifest["files"])

    root_b, target = agent(tmp_path, "b")
    bundle = open_bundle(path)
    try:
        report = import_bundle(target, bundle, merge=False)
    finally:
        bundle.close()
    assert report.added["episodic"]["episodes"] == len(before["episodes"]) and not report.unread
    assert "persona/MEMORY.md" in report.written
    after = snapshot(target)
    for layer, shown in before.items():
        assert after[layer] == shown, layer

    bundle = open_bundle(path)  # a second import changes nothing
    try:
        with pytest.raises(ThothError, match="already holds memory.*--merge"):
            import_bundle(target, bundle, merge=False)
        again = import_bundle(target, bundle, merge=True)
    finally:
        bundle.close()
    assert all(not any(counts.values()) for counts in again.added.values()), again.added
    assert not again.written and not again.kept
    assert snapshot(target) == after


def bundle_with(tmp_path: Path, members: dict[str, bytes]) -> Path:
    """A .tar.gz holding these members, as a hostile or broken bundle would."""
    path = tmp_path / "crafted.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def manifest(**changes: Any) -> bytes:
    base = {"format": "thoth-bundle", "version": 1, "sections": {}, "files": {}}
    return json.dumps(base | changes).encode()


def test_a_newer_bundle_version_is_refused_naming_the_file(tmp_path):
    path = bundle_with(tmp_path, {"manifest.json": manifest(version=2, thoth_version="9.0")})
    with pytest.raises(ThothError, match=rf"{path}: bundle version 2 is not one this thoth reads \(1\)"):
        open_bundle(path)


@pytest.mark.parametrize("name", ["../escape.md", "/etc/evil", "home/../../escape.md"])
def test_a_member_outside_the_home_is_refused_before_anything_is_written(tmp_path, name):
    path = bundle_with(tmp_path, {"manifest.json": manifest(), name: b"gotcha"})
    with pytest.raises(ThothError, match=f"{path}: unsafe archive member"):
        open_bundle(path)
    assert not (tmp_path.parent / "escape.md").exists() and not (tmp_path / "escape.md").exists()


@pytest.mark.parametrize("name", ["home/.git/config", "home/.thoth/journal.db", "home/notes.db-wal", "home/.env"])
def test_git_data_database_and_env_members_are_refused(tmp_path, name):
    path = bundle_with(tmp_path, {"manifest.json": manifest(), name: b"[core]\n\tfsmonitor = touch /tmp/pwned\n"})
    with pytest.raises(ThothError, match=f"{path}: unsafe archive member"):
        open_bundle(path)


def test_a_manifest_naming_a_path_outside_the_home_is_refused(tmp_path):
    import hashlib

    digest = hashlib.sha256(b"x").hexdigest()
    files = {"../x.md": {"size": 1, "sha256": digest}}
    path = bundle_with(tmp_path, {"manifest.json": manifest(files=files), "home/../x.md": b"x"})
    with pytest.raises(ThothError, match="unsafe archive member"):
        open_bundle(path)


def test_a_corrupt_or_tampered_bundle_is_refused_naming_the_file(tmp_path):
    _, source = agent(tmp_path, "a")

    async def one_turn() -> None:
        await source.turn("hello there", peer="ann", thread="t1")
        await source.drain()

    asyncio.run(one_turn())
    good = tmp_path / "good.tar.gz"
    export_bundle(source, good)

    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    garbage = tmp_path / "garbage.tar.gz"
    garbage.write_bytes(b"this is not a bundle")
    for broken in (truncated, garbage):
        with pytest.raises(ThothError, match=f"{broken}: (not a readable|corrupt) Thoth bundle"):
            open_bundle(broken)

    with tarfile.open(good, "r:gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    members["sections/episodic.jsonl"] = members["sections/episodic.jsonl"].replace(b"hello", b"HELLO")
    with pytest.raises(ThothError, match="sections/episodic.jsonl: sha256 does not match"):
        open_bundle(bundle_with(tmp_path, members))


def test_cli_export_then_import_into_a_fresh_home(tmp_path, thoth_env):
    source, target = tmp_path / "src", tmp_path / "dst"
    for root in (source, target):
        assert run_thoth("init", str(root)).returncode == 0
    (source / "persona" / "MEMORY.md").write_text("# Memory\n\n- Ann likes tea.\n", encoding="utf-8")
    path = tmp_path / "agent.tar.gz"
    env = {"THOTH_HOME": str(source / ".thoth")}
    exported = run_thoth("bundle", "export", str(path), cwd=source, env=env)
    assert exported.returncode == 0, exported.stderr
    assert f"wrote {path}" in exported.stdout and "exporting" in exported.stderr
    env = {"THOTH_HOME": str(target / ".thoth")}
    imported = run_thoth("bundle", "import", str(path), cwd=target, env=env)
    assert imported.returncode == 0, imported.stderr
    assert "importing" in imported.stderr and "files:" in imported.stdout
    assert (target / "persona" / "MEMORY.md").read_text(encoding="utf-8") == "# Memory\n\n- Ann likes tea.\n"
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"nope")
    refused = run_thoth("bundle", "import", str(broken), cwd=target, env=env)
    assert refused.returncode == 2 and f"{broken}: not a readable Thoth bundle" in refused.stderr


def test_a_session_id_that_would_name_a_file_outside_the_transcripts_is_refused(tmp_path):
    _, runtime = agent(tmp_path, "a")
    row = {
        "session_id": "../../escape",
        "workspace": "w",
        "peer": "ann",
        "thread": "t",
        "started_at": 0.0,
        "last_active": 0.0,
        "turns": 1,
        "closed": None,
    }
    section = {"name": "working", "version": 1, "records": iter([{"session": row, "transcript": [{"type": "turn"}]}])}
    with pytest.raises(ThothError, match="record 1: not a stored session"):
        runtime.call_sync("bundle_import", section=section, runtime=runtime, progress=lambda n: None)
    assert not list(tmp_path.rglob("escape.jsonl"))
