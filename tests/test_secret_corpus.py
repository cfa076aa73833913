"""The secret corpus through real sessions: no store keeps any secret, every near-miss is kept verbatim.

One runtime with every first-party plugin (working, identity embedded, episodic, procedural,
reflection answered by the replay model, blackboard on SQLite, the TUI's input history and the
Slack bridge with its ledger), `[privacy] pii` at its default (every kind). Each secret sentence of
`thoth_core.testing.secret_corpus` arrives as a Slack DM in its own thread; the model's reply
repeats it, the identity deriver and the session-end reflection repeat it too (memory notes,
persona observations, a skill draft, a user-model update); it is `/remember`ed, put on the board
and typed into the TUI. Then the raw bytes of every file under the home and the agent folder
(SQLite files, FTS5 indexes and WAL included) are scanned for each secret's value, while the
runtime is open and again after it closed (as `test_forget_erases.py` does for a forgotten peer).
"""

from __future__ import annotations

import json
import re
import secrets
import time
from pathlib import Path

import pytest

from thoth_core.testing import make_test_runtime
from thoth_core.testing.secret_corpus import SecretCase, near_miss_corpus, secret_corpus

pytest.importorskip("thoth_slack")
pytest.importorskip("thoth_tui")

WORKSPACE, PEER = "T1", "UANN"
CASES, NEAR_MISSES = secret_corpus(), near_miss_corpus()


def tag() -> str:
    """A unique word that marks one sentence's trail through the stores (no stemmer changes it)."""
    return f"zqtag{secrets.token_hex(5)}7"


def needles(value: str) -> list[bytes]:
    """What betrays a kept value: the value itself, and the middle of its longest alphanumeric run.

    FTS5 stores terms lower-cased, split at punctuation, stemmed (porter) and prefix-compressed
    against the previous term, so only the middle of a long run is sure to be found there.
    """
    found = [value.lower().encode()]
    run = max(re.findall(r"[A-Za-z0-9]+", value), key=len, default="")
    if len(run) >= 20:
        found.append(run[6:-4].lower().encode())
    return found


def store_of(path: Path, root: Path) -> str:
    """The store a file belongs to: its folder under the home, or the database it is part of."""
    relative = path.relative_to(root)
    name = re.sub(r"-(wal|shm|journal)$", "", relative.name)
    if name.endswith(".db"):
        return f"{root.name}/{'/'.join(relative.parts[:-1] + (name,))}"
    return f"{root.name}/{'/'.join(relative.parts[:2])}"


def files_by_store(roots: list[Path]) -> dict[str, list[bytes]]:
    """The raw, lower-cased bytes of every file under the roots, grouped by store."""
    stores: dict[str, list[bytes]] = {}
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            stores.setdefault(store_of(path, root), []).append(path.read_bytes().lower())
    return stores


def leaks(roots: list[Path], tags: dict[str, str]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Per store: the cases whose secret it holds, and the cases whose tag reached it."""
    leaked: dict[str, set[str]] = {}
    reached: dict[str, set[str]] = {}
    for store, blobs in files_by_store(roots).items():
        leaked[store], reached[store] = set(), set()
        for case in CASES:
            if any(n in blob for value in case.values for n in needles(value) for blob in blobs):
                leaked[store].add(case.kind)
            if any(tags[case.kind].encode() in blob for blob in blobs):
                reached[store].add(case.kind)
    return leaked, reached


def table(leaked: dict[str, set[str]], reached: dict[str, set[str]]) -> str:
    """A per-store table: sentences that reached the store, secrets it kept (should be 0) and which."""
    total = len(CASES)
    lines = [f"{'store':<48} {'reached':>8} {'redacted':>9}  kept"]
    for store in sorted(leaked):
        kept = sorted(leaked[store])
        lines.append(
            f"{store:<48} {len(reached[store]):>5}/{total} {total - len(kept):>6}/{total}  {', '.join(kept) or '-'}"
        )
    return "\n".join(lines)


def reflection(case: SecretCase, text: str) -> str:
    """A reflection that repeats the sentence in every part a layer keeps."""
    return json.dumps(
        {
            "what_worked": [f"Keeping this at hand: {text}"],
            "what_didnt": [],
            "skill": {"name": f"use-{case.kind}", "description": "How to use it.", "body": f"1. Use {text}"},
            "memory_notes": [f"Ann shared: {text}"],
            "persona_observations": [f"When Ann writes {text}, confirm it."],
            "next_check_at": None,
            "user_model_updates": {PEER: [f"Ann gave: {text}"]},
        }
    )


def derivation(text: str) -> str:
    return json.dumps({"observations": [{"content": text, "kind": "explicit", "confidence": 0.9}], "facts": []})


def test_the_secret_corpus_is_kept_by_no_store_and_near_misses_are_kept_verbatim(tmp_path, slack_env):
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

    started = time.perf_counter()
    home, root = tmp_path / "home", tmp_path / "agent"
    home.mkdir()
    (root / "persona").mkdir(parents=True)
    tags = {case.kind: tag() for case in CASES + NEAR_MISSES}
    said = {case.kind: f"{tags[case.kind]} {case.text}" for case in CASES + NEAR_MISSES}
    rules: list[dict[str, str]] = []
    for case in CASES:
        rules += [
            {"purpose": "turn", "match": tags[case.kind], "reply": f"Noted: {case.text}"},
            {"purpose": "reflection", "match": tags[case.kind], "reply": reflection(case, said[case.kind])},
            {"purpose": "derive", "match": tags[case.kind], "reply": derivation(f"Ann's detail: {said[case.kind]}")},
        ]
    rules += [{"purpose": "turn", "match": tags[c.kind], "reply": f"Noted: {c.text}"} for c in NEAR_MISSES]
    rules += [
        {"purpose": "reflection", "reply": json.dumps({"what_worked": [], "memory_notes": []})},
        {"purpose": "derive", "reply": json.dumps({"observations": [], "facts": []})},
        {"reply": "ok"},
    ]
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
    runtime = make_test_runtime(home, plugins, config=config, replies=rules, root=root)
    bridge = SlackBridge(runtime, load_settings(runtime, http=True))
    bridge.start()
    slack = Harness(bridge, fake)
    refused: list[str] = []
    unapplied: list[str] = []
    try:
        for i, case in enumerate(CASES):  # each secret sentence in its own Slack DM thread
            slack.send(dm(said[case.kind], user=PEER, channel=f"D{i:04d}", ts=f"1700000{i:03d}.000100"))

        async def write_everywhere() -> None:
            say = {"peer": PEER, "workspace": WORKSPACE}
            for i, case in enumerate(NEAR_MISSES):
                await runtime.turn(said[case.kind], thread=f"near-{i}", **say)
            for i, case in enumerate(CASES):
                reply = (await runtime.turn(f"/remember {case.text}", thread="commands", **say)).reply.text
                refused.append(case.kind) if "not stored: that holds a secret" in reply else None
                await runtime.turn(f"/board put case.{i} {said[case.kind]}", thread="commands", **say)
            for session in list(runtime.sessions.values()):  # session end: reflection, its writers, the queue
                await runtime.end_session(session, "done")
            await runtime.drain()
            # a founder approves: MEMORY.md, persona, identity, skills
            for item in await runtime.approvals(actor="lead"):
                try:
                    await runtime.decide(item["id"], "approve", actor="lead")
                except Exception as exc:  # noqa: BLE001 - reported with the table; what was written is scanned
                    unapplied.append(f"{item['id']}: {exc}")
            await runtime.drain()

        slack.call(write_everywhere())
        history = History(history_path(home, PEER), runtime.redactor.redact)  # what the TUI's prompt keeps
        for case in CASES + NEAR_MISSES:
            history.add(said[case.kind])
        open_leaks, reached = leaks([home, root], tags)
    finally:
        bridge.stop()
        fake.close()
    closed_leaks, _ = leaks([home, root], tags)
    report = table(open_leaks, reached) + "\nafter close:\n" + table(closed_leaks, reached)
    print(report, f"\n{time.perf_counter() - started:.1f} s", *unapplied[:5], sep="\n")

    assert not any(open_leaks.values()) and not any(closed_leaks.values()), report
    assert sorted(refused) == sorted(c.kind for c in CASES), "/remember kept a secret"
    # every layer saw every sentence (so a store without a secret is redaction, not silence)
    stores = ("transcripts", "episodes.db", "identity", "reflection", "ledger.db", "board.db", "memory.md", "skills")
    for store in stores:
        holding = [s for s in reached if store in s.lower()]
        assert holding and max(len(reached[s]) for s in holding) == len(CASES), (store, report)
    one_line = [c.kind for c in CASES if "\n" not in c.text]  # the TUI keeps no multi-line message
    assert sorted(reached["home/tui/history"]) == sorted(one_line), report
    # the near-misses: each kept verbatim in its transcript, and by the TUI's history
    transcripts = b"".join(p.read_bytes() for p in (home / "working").rglob("*.jsonl"))
    written = {c.kind: json.dumps(c.text, ensure_ascii=False).encode()[1:-1] for c in NEAR_MISSES}  # as transcripts are
    altered = [c.kind for c in NEAR_MISSES if written[c.kind] not in transcripts]
    assert not altered, f"near-misses altered: {altered}"
    tui = history_path(home, PEER).read_text(encoding="utf-8").splitlines()
    assert [c.kind for c in NEAR_MISSES if said[c.kind] not in tui] == [], "the TUI's history altered near-misses"
