"""`forget` erases: after it returns, no byte of the peer's text is left in any file of the home.

One runtime with every first-party plugin (working, identity embedded, episodic, procedural,
reflection answered by the replay model, blackboard on SQLite, the TUI's input history and the
Slack bridge with its ledger) takes a marker through every writer, then forgets the peer while
it is still open, as a running chat would be. The raw bytes of every file under the home and
the agent folder (persona/MEMORY.md, skill drafts) are scanned, then scanned again after close.
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

import pytest

from thoth_core.testing import make_test_runtime

pytest.importorskip("thoth_slack")
pytest.importorskip("thoth_tui")

WORKSPACE = "T1"  # the Slack team is the workspace
PEER, OTHER = "UANN", "UBOB"


def new_marker(prefix: str) -> str:
    """A unique word that no stemmer changes (it ends in a digit)."""
    return f"{prefix}{secrets.token_hex(6)}7"


def holders(roots: list[Path], needle: str) -> dict[str, int]:
    """Files under the roots whose raw bytes hold the needle (case-insensitive), with how often."""
    needle_bytes = needle.lower().encode()
    found = {}
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            count = path.read_bytes().lower().count(needle_bytes)
            if count:
                found[str(path.relative_to(root.parent))] = count
    return found


def scan(roots: list[Path], marker: str) -> dict[str, int]:
    """Files holding the marker, or its random part alone (FTS5 leaves store terms prefix-compressed)."""
    found = holders(roots, marker)
    for path, count in holders(roots, marker[len("zqxmarker") :]).items():
        found.setdefault(path, count)
    return found


def reflection_reply(marker: str) -> str:
    return json.dumps(
        {
            "what_worked": [f"Using the codename {marker} kept the thread short."],
            "what_didnt": [],
            "skill": None,
            "memory_notes": [f"Ann's project codename is {marker}."],
            "persona_observations": [f"Ann calls the project {marker}; mirror that name."],
            "next_check_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 7 * 86400)),
            "user_model_updates": {PEER: [f"Works on the project {marker}."]},
        }
    )


def derivation(observation: str) -> str:
    return json.dumps({"observations": [{"content": observation, "kind": "explicit", "confidence": 0.9}], "facts": []})


def test_forget_leaves_no_byte_of_the_peer_in_any_file(tmp_path, slack_env):
    import thoth_blackboard.plugin
    import thoth_episodic.plugin
    import thoth_identity.plugin
    import thoth_procedural.plugin
    import thoth_reflection.plugin
    import thoth_slack.plugin
    import thoth_tui.plugin
    import thoth_working.plugin
    from thoth_slack.bridge import SlackBridge
    from thoth_slack.settings import load_settings
    from thoth_slack.testing import FakeSlackAPI, Harness, dm
    from thoth_tui.prompt import History, history_path

    marker, kept = new_marker("zqxmarker"), new_marker("keptword")
    home, root = tmp_path / "home", tmp_path / "agent"
    home.mkdir()
    (root / "persona").mkdir(parents=True)
    plugins = {
        "working": thoth_working.plugin,
        "identity": thoth_identity.plugin,
        "episodic": thoth_episodic.plugin,
        "procedural": thoth_procedural.plugin,
        "reflection": thoth_reflection.plugin,
        "blackboard": thoth_blackboard.plugin,
        "tui": thoth_tui.plugin,
        "slack": thoth_slack.plugin,
    }
    rules = [
        {"purpose": "reflection", "match": marker, "reply": reflection_reply(marker)},
        {"purpose": "reflection", "reply": json.dumps({"what_worked": [], "what_didnt": [], "skill": None,
                                                       "memory_notes": [], "persona_observations": [],
                                                       "next_check_at": None, "user_model_updates": {}})},
        {"purpose": "derive", "match": marker, "reply": derivation(f"Works on the project {marker}.")},
        {"purpose": "derive", "reply": derivation(f"Works on {kept}.")},
        {"purpose": "dialectic", "reply": "Nothing in particular."},
        {"purpose": "turn", "match": marker, "reply": f"Noted: the codename is {marker}."},
        {"purpose": "turn", "reply": f"Noted: {kept}."},
        {"reply": "ok"},
    ]  # fmt: skip
    fake = FakeSlackAPI()
    config = {
        "thoth": {"founders": ["lead"]},
        "plugins": {
            "slack": {
                "bot_token": {"$env": "SLACK_BOT_TOKEN"},
                "signing_secret": {"$env": "SLACK_SIGNING_SECRET"},
                "approvals_channel": "CAPPROVALS",
                "stream_interval": 0,
                "api_url": fake.url,
            },
            "blackboard": {"backend": "sqlite", "persist": True},
        },
    }
    runtime = make_test_runtime(home, plugins, config=config, replies=rules, root=root)
    bridge = SlackBridge(runtime, load_settings(runtime, http=True))
    bridge.start()
    slack = Harness(bridge, fake)
    try:
        # A real turn through Slack (a DM): transcript, identity, episode, ledger entry.
        slack.send(dm(f"Our project codename is {marker}, please keep it in mind.", user=PEER, channel="DANN"))
        slack.send(dm(f"My project is {kept}.", user=OTHER, channel="DBOB", ts="1700000002.000100"))

        async def write_everywhere() -> None:
            say = {"peer": PEER, "thread": "tui-1", "workspace": WORKSPACE}
            await runtime.turn(f"The launch plan for {marker} is ready.", **say)
            await runtime.turn(f"/remember my project is {marker}", **say)
            await runtime.turn(f"/remember I like the name {marker}", **say)
            await runtime.turn(f"/board put note.ann {marker}", **say)
            await runtime.turn(f"/board put note.bob {kept}", peer=OTHER, thread="tui-b", workspace=WORKSPACE)
            await runtime.turn("/done", **say)  # session end: reflection (auto-memory, queue, check-in)
            await runtime.drain()

        slack.call(write_everywhere())
        History(history_path(home, PEER)).add(f"what about {marker}?")  # the TUI's input history
        History(history_path(home, OTHER)).add(f"about {kept}")
        cards = [p for p in fake.calls_to("chat.postMessage") if p.get("blocks")]
        assert cards, "reflection's persona observation reached Slack as an approval card"
        assert bridge.ledger.get(cards[0]["channel"], cards[0]["_ts"]).peer == PEER

        roots = [home, root]
        before = scan(roots, marker)
        assert before, "the marker reached no file: the test writes nothing"
        print("files holding the marker before forget:", json.dumps(before, indent=1))

        started = time.perf_counter()
        receipt = slack.call(runtime.forget(peer=PEER, workspace=WORKSPACE))
        print(f"forget took {1000 * (time.perf_counter() - started):.0f} ms; receipt {receipt}")
        assert not any("error" in r for r in receipt.values()), receipt

        left = scan(roots, marker)
        assert not left, f"forget left the marker in {left} (receipt {receipt})"
        assert holders(roots, kept), "the other peer's data is gone too"
    finally:
        bridge.stop()
        fake.close()

    assert not scan([home, root], marker), "the marker came back when the runtime closed"
    survivors = holders([home, root], kept)
    assert any("episodes.db" in p for p in survivors), survivors
    assert any("transcripts" in p for p in survivors), survivors
    assert any("board.db" in p for p in survivors), survivors
    assert any("history" in p for p in survivors), survivors


def test_scrub_erases_fts5_segments_and_the_wal(tmp_path):
    from thoth_core.storage import connect, scrub

    marker = new_marker("zqxmarker")
    path = tmp_path / "t.db"
    db = connect(path)
    assert db.execute("PRAGMA secure_delete").fetchone()[0] == 1
    db.execute("CREATE VIRTUAL TABLE notes USING fts5(body)")
    for i in range(300):
        db.execute("INSERT INTO notes (rowid, body) VALUES (?, ?)", (i, f"note {i} about nothing"))
    db.execute("INSERT INTO notes (rowid, body) VALUES (1000, ?)", (f"the codename is {marker}",))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.execute("DELETE FROM notes WHERE rowid = 1000")
    assert scan([tmp_path], marker), "a plain delete leaves the term in the index (a tombstone is added)"

    reader = connect(path)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM notes").fetchone()  # a read transaction in another connection
    started = time.monotonic()
    assert scrub(db, fts=["notes"], wait=0.3) == {"wal not truncated": 1}
    assert time.monotonic() - started < 5
    reader.execute("COMMIT")

    assert scrub(db, fts=["notes"]) == {}
    assert not scan([tmp_path], marker) and (tmp_path / "t.db-wal").stat().st_size == 0
    assert db.execute("SELECT count(*) FROM notes WHERE notes MATCH 'nothing'").fetchone()[0] == 300
    reader.close()
    db.close()


def test_forget_from_another_runtime_while_a_chat_keeps_its_connections(tmp_path):
    """`thoth forget` in one process while a chat runs in another: the chat's open files are clean too."""
    import asyncio

    import thoth_episodic.plugin
    import thoth_identity.plugin
    import thoth_reflection.plugin
    import thoth_working.plugin

    marker, kept = new_marker("zqxmarker"), new_marker("keptword")
    home, root = tmp_path / "home", tmp_path / "agent"
    home.mkdir()
    (root / "persona").mkdir(parents=True)
    plugins = {
        "working": thoth_working.plugin,
        "identity": thoth_identity.plugin,
        "episodic": thoth_episodic.plugin,
        "reflection": thoth_reflection.plugin,
    }
    replies = [{"purpose": "turn", "reply": "Noted."}, {"reply": "{}"}]

    async def scenario() -> None:
        chat = make_test_runtime(home, plugins, replies=replies, root=root)
        await chat.turn(f"My codename is {marker}.", peer="ann", thread="t1")
        await chat.turn(f"/remember my project is {marker}", peer="ann", thread="t1")
        await chat.turn(f"My codename is {kept}.", peer="bob", thread="t2")
        await chat.drain()
        assert scan([home, root], marker)
        cli = make_test_runtime(home, plugins, replies=replies, root=root)
        receipt = await cli.forget(peer="ann")
        await cli.aclose()
        assert not any("wal not truncated" in r for r in receipt.values()), receipt
        assert not scan([home, root], marker), "the chat's files still hold the forgotten text"
        await chat.aclose()

    asyncio.run(scenario())
    assert not scan([home, root], marker)
    assert holders([home, root], kept)
