"""A turn re-run with its turn id after a kill left it cut short: every layer ends with the whole reply, once.

In Slack a message's turn id comes from its inbox key: when a worker dies mid-stream, another
worker replays the dead one's journal (the turn, cut short) and answers the message again with the
same turn id. The user saw the whole reply, so memory holds it, once: one episode, one identity
user and assistant pair, one transcript `turn` entry, each in the cut-short version's place.
"""

from __future__ import annotations

import numpy as np
import pytest

from thoth_core import hookimpl
from thoth_core.config import Config
from thoth_core.journal import TurnJournal
from thoth_core.testing import make_test_runtime
from thoth_core.types import CUT_SHORT, Reply, Session, Turn

thoth_working = pytest.importorskip("thoth_working.plugin")
thoth_episodic = pytest.importorskip("thoth_episodic.plugin")
thoth_identity = pytest.importorskip("thoth_identity.plugin")
from thoth_episodic.memory import memory_for  # noqa: E402
from thoth_identity.plugin import backend_for  # noqa: E402

SHOWN = "Day one: Oslo and"
WHOLE = "Day one: Oslo and Bergen by train. Day two: the fjords."
MESSAGE = "Plan three days in Norway for me"
RERUN = "turn-slack-C1-171.5"  # the inbox key's turn id


class RecordingEmbedder:
    """Fixed vectors from the text; remembers every text it embedded."""

    name = "recording"
    dim = 384

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += texts
        vectors = np.stack([np.random.default_rng(len(t)).standard_normal(self.dim) for t in texts]).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


class Embedders:
    def __init__(self) -> None:
        self.embedder = RecordingEmbedder()

    @hookimpl
    def register_embedders(self, register):
        register("recording", lambda runtime, options: self.embedder)


def runtime_at(home, storage, embedders, reply):
    config = {"plugins": {"episodic": {"embedder": "recording"}, "identity": {"derive": False}}}
    plugins = {"working": thoth_working, "episodic": thoth_episodic, "identity": thoth_identity, "emb": embedders}
    return make_test_runtime(home, plugins, config=config | storage, replies=[{"reply": reply}])


def held(runtime, turn_id):
    """What each layer holds of one turn: episodes, identity messages, transcript turn entries."""
    episodes = [e for e in memory_for(runtime).store.episodes() if e.turn_id == turn_id]
    messages = [
        m for m in backend_for(runtime).store.export_rows("default", "ann")["messages"] if m["turn_id"] == turn_id
    ]
    store = thoth_working.state(runtime).store
    entries = [
        e
        for row in store.every()
        for e in store.entries(row.session_id, row.started_at)
        if e.get("type") == "turn" and e.get("turn_id") == turn_id
    ]
    return episodes, messages, entries


async def test_a_turn_re_run_with_its_id_replaces_the_cut_short_version_in_every_layer(tmp_path, storage_config):
    embedders = Embedders()
    first = runtime_at(tmp_path, storage_config, embedders, "Noted.")
    before = await first.turn("I like trains", peer="ann", thread="t")  # the thread has a turn already
    await first.drain()
    await first.aclose()
    # The worker that took the message was killed mid-stream: its journal row holds the reply as shown.
    journal = TurnJournal(tmp_path / "journal.db", Config(data=storage_config))
    session = Session("default", "ann", "t", id=before.session.id, started_at=before.session.started_at)
    journal.append(Turn(MESSAGE, "ann", "t", id=RERUN), Reply.cut(SHOWN), session, ["working", "episodic", "identity"])
    journal.close()

    second = runtime_at(tmp_path, storage_config, embedders, WHOLE)
    assert await second.recover() == 1
    await second.drain()
    assert memory_for(second).flush(timeout=30)
    episodes, messages, entries = held(second, RERUN)
    assert [e.assistant for e in episodes] == [f"{SHOWN}\n{CUT_SHORT}"]
    assert [m["content"] for m in messages] == [MESSAGE, f"{SHOWN}\n{CUT_SHORT}"]
    assert [(e["assistant"], e.get("cut_short")) for e in entries] == [(f"{SHOWN}\n{CUT_SHORT}", True)]
    cut_ids = (episodes[0].id, [m["id"] for m in messages])

    rerun = await second.turn(MESSAGE, peer="ann", thread="t", turn_id=RERUN)  # another worker answers it again
    assert rerun.reply.text == WHOLE
    assert [m.content for m in second.model().requests[-1].messages] == ["I like trains", "Noted.", MESSAGE]
    await second.drain()
    assert memory_for(second).flush(timeout=30)
    await second.aclose()

    third = runtime_at(tmp_path, storage_config, embedders, "ok")
    assert await third.recover() == 0
    episodes, messages, entries = held(third, RERUN)
    assert [(e.id, e.user, e.assistant) for e in episodes] == [(cut_ids[0], MESSAGE, WHOLE)]  # in place
    assert "Bergen" in episodes[0].summary  # summarised anew
    assert any(WHOLE in text for text in embedders.embedder.texts)  # embedded anew
    assert [(m["id"], m["role"], m["content"]) for m in messages] == [
        (cut_ids[1][0], "user", MESSAGE),
        (cut_ids[1][1], "assistant", WHOLE),
    ]
    assert [(e["user"], e["assistant"], e.get("cut_short")) for e in entries] == [(MESSAGE, WHOLE, None)]
    hits = memory_for(third).recall("Bergen fjords train", workspace="default", peer="ann", k=5)
    assert [h.episode.assistant for h in hits if h.episode.turn_id == RERUN] == [WHOLE]
    restored = await third.session(peer="ann", thread="t")
    assert [m.content for m in restored.history] == ["I like trains", "Noted.", MESSAGE, WHOLE]
    await third.aclose()
