"""What the agent posts: replies streamed into a placeholder, cards, DMs, and the ledger of them.

The ledger remembers which Slack messages are the agent's (a reply to a turn, or an approval
card), so that a reaction or a button on one can be traced back to its turn or item, also
after a restart: the newest are kept in memory, those of the last `KEEP_DAYS` in SQLite
(`$THOTH_HOME/slack/ledger.db`).

The same file remembers which inbound requests were already handled (`Ledger.first_time`), so an
event or a button press delivered twice (a replay of a signed request inside Slack's 5-minute
window, a redelivery, a second worker sharing the home) is answered once. It keeps only a hash
of each request's ids, for `SEEN_KEEP_SECONDS`: no text and no peer, so `forget` leaves it alone.
With `[storage] url` set, the ledger (and the inbox beside it, see `inbox.py`) lives in the
shared PostgreSQL instead, so every worker serving the app sees the same messages and requests.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import threading
import time
from collections import OrderedDict
from dataclasses import astuple, dataclass, fields, replace
from pathlib import Path
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from thoth_core.database import Database, SqliteDatabase, open_database

from .cards import pending_card
from .inbox import POSTGRES_RETRIES, SQLITE_RETRIES, Inbox
from .inbox import POSTGRES_SCHEMA as INBOX_POSTGRES
from .inbox import SQLITE_SCHEMA as INBOX_SCHEMA
from .mrkdwn import split, to_mrkdwn

logger = logging.getLogger(__name__)

KEEP_DAYS = 90
SEEN_KEEP_SECONDS = 86400  # far past Slack's 5-minute signature window and its retries (within the hour)
PRUNE_EVERY_SECONDS = 3600

THREAD_KEY = re.compile(r"^(?P<channel>[CDG][A-Z0-9]+)(?::(?P<ts>\d+\.\d+))?$")


def thread_key(channel: str, thread_ts: str | None) -> str:
    """The session thread of a Slack conversation: `CHANNEL:THREAD_TS`, or `CHANNEL` for a DM's top level."""
    return f"{channel}:{thread_ts}" if thread_ts else channel


def parse_thread_key(key: str) -> tuple[str, str | None] | None:
    """(channel, thread_ts) of a thread key, or None if it is not a Slack thread."""
    match = THREAD_KEY.match(key or "")
    return (match["channel"], match["ts"]) if match else None


@dataclass
class Posted:
    """One message the agent posted: a reply to a turn (and its session's key), or a card for an approval item."""

    channel: str
    ts: str
    thread_ts: str | None
    text: str
    turn_id: str | None = None
    workspace: str = ""
    peer: str = ""
    thread: str = ""
    item_id: str | None = None
    title: str = ""
    card: bool = False


COLUMNS = [f.name for f in fields(Posted)]
SCHEMA = f"""
CREATE TABLE posted ({", ".join(COLUMNS)}, at REAL NOT NULL, PRIMARY KEY (channel, ts));
CREATE INDEX posted_at ON posted (at)
"""
SEEN_SCHEMA = """
CREATE TABLE seen (key TEXT PRIMARY KEY, at REAL NOT NULL) WITHOUT ROWID;
CREATE INDEX seen_at ON seen (at)
"""
POSTGRES = f"""
CREATE TABLE posted (channel TEXT NOT NULL, ts TEXT NOT NULL, thread_ts TEXT, text TEXT, turn_id TEXT,
    workspace TEXT, peer TEXT, thread TEXT, item_id TEXT, title TEXT, card INTEGER,
    at DOUBLE PRECISION NOT NULL, PRIMARY KEY (channel, ts));
CREATE INDEX posted_at ON posted (at);
CREATE TABLE seen (key TEXT PRIMARY KEY, at DOUBLE PRECISION NOT NULL);
CREATE INDEX seen_at ON seen (at);
{INBOX_POSTGRES}
"""
UPSERT = (
    f"INSERT INTO posted VALUES ({', '.join('?' * (len(COLUMNS) + 1))}) ON CONFLICT (channel, ts) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}" for name in [*COLUMNS[2:], "at"])
)


class Ledger:
    """The agent's messages by (channel, ts): the newest in memory, all of the last KEEP_DAYS on disk; thread-safe.

    Also the inbound requests already handled (hashed ids, kept SEEN_KEEP_SECONDS), see `first_time`.
    """

    def __init__(self, path: Path | None = None, size: int = 10_000, *, config: Any = None) -> None:
        self._items: OrderedDict[tuple[str, str], Posted] = OrderedDict()
        self._seen: dict[str, float] = {}  # hashed request key -> when, without a file
        self._size = size
        self._lock = threading.Lock()
        self._db: Database | None = None
        migrations = [SCHEMA, SEEN_SCHEMA, INBOX_SCHEMA, SQLITE_RETRIES]
        if config is not None and path is not None:  # the shared store when `[storage] url` is set
            postgres = [POSTGRES, POSTGRES_RETRIES]
            self._db = open_database(config, "slack", path=path, migrations=migrations, postgres=postgres)
        elif path is not None:
            self._db = SqliteDatabase(path, migrations)
        self._pruned = 0.0
        if self._db is not None:
            try:
                self._db.execute("DELETE FROM posted WHERE at < ?", (time.time() - KEEP_DAYS * 86400,))
            except self._db.errors as exc:  # e.g. the shared store down at start: pruned at the next start
                logger.warning("slack: could not prune old posted messages: %s", exc)
        with self._lock:
            self._prune(time.time())

    def first_time(self, key: str, now: float | None = None) -> bool:
        """Record an inbound request's key; True if it was not seen before (in this or any process on the file).

        The check and the record are one `INSERT OR IGNORE`, so of two workers sharing the home
        exactly one gets True. Only a hash of the key is stored. If the file cannot be written
        (disk full, read-only) the request counts as new: better answered twice than never.
        """
        now = time.time() if now is None else now
        digest = hashlib.sha256(key.encode()).hexdigest()
        with self._lock:
            if now - self._pruned >= PRUNE_EVERY_SECONDS:
                self._prune(now)
            if self._db is not None:
                try:
                    inserted = self._db.execute(
                        "INSERT INTO seen VALUES (?, ?) ON CONFLICT (key) DO NOTHING", (digest, now)
                    ).rowcount
                    return inserted == 1
                except self._db.errors as exc:  # answer it rather than drop it: Slack would not send it again
                    logger.warning("slack: could not record a request as handled (%s); handling it", exc)
                    return True
            if digest in self._seen:
                return False
            self._seen[digest] = now
            return True

    def _prune(self, now: float) -> None:
        """Drop request keys older than SEEN_KEEP_SECONDS (hold the lock)."""
        self._pruned = now
        cutoff = now - SEEN_KEEP_SECONDS
        self._seen = {digest: at for digest, at in self._seen.items() if at >= cutoff}
        if self._db is not None:
            try:
                self._db.execute("DELETE FROM seen WHERE at < ?", (cutoff,))
                Inbox(self._db, 0).prune(cutoff)
            except self._db.errors as exc:
                logger.warning("slack: could not prune handled requests: %s", exc)

    def add(self, posted: Posted) -> None:
        """Remember a posted message."""
        with self._lock:
            self._items[(posted.channel, posted.ts)] = posted
            while len(self._items) > self._size:
                self._items.popitem(last=False)
            if self._db is not None:
                values = [*astuple(posted)[:-1], int(posted.card)]  # `card` is an INTEGER column in PostgreSQL
                self._db.execute(UPSERT, (*values, time.time()))

    def get(self, channel: str, ts: str) -> Posted | None:
        """The posted message at (channel, ts), if it is the agent's."""
        with self._lock:
            posted = self._items.get((channel, ts))
            if posted is None and self._db is not None:
                row = self._db.execute(
                    f"SELECT {', '.join(COLUMNS)} FROM posted WHERE channel = ? AND ts = ?", (channel, ts)
                ).fetchone()
                posted = None if row is None else replace(Posted(*row), card=bool(row[-1]))
            return posted

    def forget(self, workspace: str, peer: str, thread: str | None = None) -> int:
        """Delete the messages posted to or about a peer (or one thread), erased from the file; returns how many."""
        with self._lock:
            gone = [
                key
                for key, p in self._items.items()
                if (p.workspace, p.peer) == (workspace, peer) and thread in (None, p.thread)
            ]
            for key in gone:
                del self._items[key]
            if self._db is None:
                return len(gone)
            where = "workspace = ? AND peer = ?" + (" AND thread = ?" if thread is not None else "")
            params = (workspace, peer) + ((thread,) if thread is not None else ())
            stored = self._db.execute(f"DELETE FROM posted WHERE {where}", params).rowcount
            waiting = Inbox(self._db, 0).forget(workspace, peer, thread)
            if stored or waiting:
                self._db.scrub(tables=["posted", "inbox"])
            return max(stored, len(gone)) + waiting

    @property
    def db(self) -> Database | None:
        """The store (None without a file), which the inbox shares."""
        return self._db

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


class Outbox:
    """Posting through the Web API (blocking calls; use from worker threads or via `asyncio.to_thread`)."""

    def __init__(self, client: WebClient, ledger: Ledger) -> None:
        self.client = client
        self.ledger = ledger
        self._dms: dict[str, str] = {}

    def post(
        self, channel: str, text: str, *, thread_ts: str | None = None, blocks: list[dict[str, Any]] | None = None
    ) -> str:
        """Post a message; returns its ts."""
        response = self.client.chat_postMessage(channel=channel, text=text, thread_ts=thread_ts, blocks=blocks)
        return str(response["ts"])

    def update(self, channel: str, ts: str, text: str, *, blocks: list[dict[str, Any]] | None = None) -> None:
        """Replace the text (and blocks) of a posted message."""
        self.client.chat_update(channel=channel, ts=ts, text=text, blocks=blocks)

    def whisper(self, channel: str, user: str, text: str, *, thread_ts: str | None = None) -> None:
        """A message only this user sees."""
        self.client.chat_postEphemeral(channel=channel, user=user, text=text, thread_ts=thread_ts)

    def dm_channel(self, user: str) -> str:
        """The DM channel with a user, opened once."""
        if user not in self._dms:
            self._dms[user] = str(self.client.conversations_open(users=user)["channel"]["id"])
        return self._dms[user]

    def card(self, channel: str, item_id: str, title: str, text: str, **about: str) -> Posted:
        """Post an approval card and remember it, with the `workspace`, `peer` and `thread` it is about (for forget)."""
        ts = self.post(channel, f"{title}: {item_id}", blocks=pending_card(item_id, title, text))
        posted = Posted(
            channel=channel, ts=ts, thread_ts=None, text=text, item_id=item_id, title=title, card=True, **about
        )
        self.ledger.add(posted)
        return posted


class Streamer:
    """Streams a reply into a placeholder with chat.update, at most once per interval, as escaped mrkdwn."""

    def __init__(self, outbox: Outbox, channel: str, ts: str, interval: float, *, thread_ts: str | None = None) -> None:
        self.outbox, self.channel, self.ts, self.interval, self.thread_ts = outbox, channel, ts, interval, thread_ts
        self.parts: list[str] = []
        self.shown = ""
        self.last = time.monotonic()

    async def add(self, delta: str) -> None:
        """Take a delta; show the text so far if the interval has passed (slowing down if Slack fails)."""
        self.parts.append(delta)
        if time.monotonic() - self.last >= self.interval:
            try:
                await self._show(split(to_mrkdwn("".join(self.parts)))[0] + " …")
            except Exception as exc:  # noqa: BLE001 - streaming is best effort; the final post reports failures
                self.interval = max(1.0, self.interval * 2)
                reason = exc.response.get("error") if isinstance(exc, SlackApiError) else f"{type(exc).__name__}: {exc}"
                logger.info("slack: streaming update skipped (%s); next in %.1fs", reason, self.interval)

    async def finish(self, text: str) -> list[str]:
        """Show the whole reply; a long one continues in more messages. Returns the ts of each."""
        first, *rest = split(to_mrkdwn(text or "(empty reply)"))
        await self._show(first)
        posted = [self.ts]
        for piece in rest:
            posted.append(await asyncio.to_thread(self.outbox.post, self.channel, piece, thread_ts=self.thread_ts))
        return posted

    async def _show(self, text: str) -> None:
        if text != self.shown:
            self.shown = text
            await asyncio.to_thread(self.outbox.update, self.channel, self.ts, text)
        self.last = time.monotonic()
