"""The Slack bridge: Bolt listeners on one side, the Thoth runtime on the other.

A Slack thread is a session (`thread` = `CHANNEL:THREAD_TS`, or `CHANNEL` for a DM's top
level), the Slack user is the peer and the Slack team the workspace. Bolt calls listeners on
its own threads; they only filter, record the message in the durable inbox (before Slack is
acked) and hand work to the runtime's loop (`LoopThread`), so a slow turn in one thread never
holds up another. Turns in the same thread run one at a time, in order, on whichever worker
sharing the store holds the thread (`drain.py`, `inbox.py`).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slack_bolt import App, BoltResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from thoth_core import CheckIn, ThothError
from thoth_core.redact import redactor_of
from thoth_core.types import FEEDBACK_KINDS, Session
from thoth_core.writes import unsaved_message

from .cards import APPROVE, REJECT, decided_card
from .drain import STORE_WAIT_SECONDS, ThreadDrain
from .inbox import Inbox, Pending, digest
from .loop import LoopThread
from .mrkdwn import escape
from .outbound import Ledger, Outbox, Posted, Streamer, parse_thread_key, thread_key
from .settings import SlackSettings

if TYPE_CHECKING:
    from thoth_core import Runtime

logger = logging.getLogger(__name__)

SLACK_USER = re.compile(r"^[UW][A-Z0-9]+$")  # a Slack user id, as peers of Slack turns are
REACTIONS = {reaction: kind for kind, reaction in FEEDBACK_KINDS.items()}  # reaction name -> feedback kind
DONE = {
    "approve": "approved",
    "reject": "rejected",
    "remember": "remembered",
    "forget": "forgotten",
    "identity": "sent to the identity layer",
}
ITEM_ID = re.compile(r"\b(?:skill|persona|note|knowledge|reflexion|guideline|restore):[A-Za-z0-9][\w.-]*")
PLACEHOLDER = "_thinking…_"
ANSWERED_SUBTYPES = {None, "thread_broadcast", "file_share"}
TICK_SECONDS = 60.0
STOP_WAIT_SECONDS = 30.0
NOT_RECORDED = 500  # the status of a delivery the inbox could not record: Slack sends it again
ACK_WAIT_SECONDS = 2.0  # a delivery waits this long for a store that is down; then it is not acked (Slack resends it)
NEW_HELP = "end this session; the next message starts a fresh one (Slack)"
ADMIN_SECONDS = 60.0  # how long a users.info answer on who administers the workspace is trusted


def _not_token_skipped(record: logging.LogRecord) -> bool:
    """Bolt warns that SLACK_BOT_TOKEN is unused when a client is given; here that is by design."""
    return "`token` will be unused" not in record.getMessage()


logging.getLogger("slack_bolt.App").addFilter(_not_token_skipped)


@dataclass
class Inbound:
    """A person's message the agent should answer."""

    team: str
    user: str
    channel: str
    thread_ts: str | None
    text: str

    @property
    def thread(self) -> str:
        """The session thread key."""
        return thread_key(self.channel, self.thread_ts)


class SlackBridge:
    """A Bolt app wired to a runtime: answers, reactions, approval cards, DMs and check-ins."""

    def __init__(self, runtime: Runtime, settings: SlackSettings) -> None:
        self.runtime = runtime
        self.settings = settings
        self.client = WebClient(token=settings.bot_token, base_url=settings.api_url)
        self.client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=3))
        self.ledger = Ledger(Path(runtime.home) / "slack" / "ledger.db", config=runtime.config)
        assert self.ledger.db is not None
        self.inbox = Inbox(self.ledger.db, settings.claim_seconds)
        self.outbox = Outbox(self.client, self.ledger)
        self.loop = LoopThread()
        self.drain = ThreadDrain(self.inbox, self.answer, self.loop.submit)
        who = slack_call(self.client.auth_test, "plugins.slack.bot_token")
        self.bot_user, self.team = str(who["user_id"]), str(who.get("team_id") or "")
        self._admins: dict[str, tuple[bool, float]] = {}  # user -> (admin, when asked), see `is_admin`
        self._ticker: Any = None
        self._sweeper: Any = None
        self._stopped = False
        self.app = App(
            client=self.client,
            signing_secret=settings.signing_secret or "unused-in-socket-mode",
            request_verification_enabled=bool(settings.signing_secret),
            process_before_response=True,
        )
        self._wire(self.app)
        runtime.plugin_state("slack", _Holder).bridge = self

    # --- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        """Start the runtime's loop and the once-a-minute tick (idle sessions, check-ins)."""
        self.loop.start()
        self.drain.start_renewing()
        self._ticker = asyncio.run_coroutine_threadsafe(self._tick_forever(), self.loop.loop)
        self._sweeper = asyncio.run_coroutine_threadsafe(self._sweep_forever(), self.loop.loop)

    def stop(self, wait_seconds: float = STOP_WAIT_SECONDS) -> None:
        """Finish pending turns (cancel any past `wait_seconds`), end every open session (`exit`), close the runtime."""
        if self._stopped:
            return
        self._stopped = True
        for repeating in (self._ticker, self._sweeper):
            if repeating is not None:
                repeating.cancel()
        try:
            if not self.loop.join(wait_seconds):
                cancelled = self.loop.cancel_pending()
                logger.warning("slack: %d turn(s) still running after %.0fs; cancelled them", cancelled, wait_seconds)
            self.loop.call(self._close())
        finally:
            self.loop.stop()
            self.drain.stop_renewing()
            self.ledger.close()

    async def _close(self) -> None:
        for session in list(self.runtime.sessions.values()):
            await self.runtime.end_session(session, "exit")
        await self.runtime.aclose()

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            try:
                await self.tick()
            except Exception:  # noqa: BLE001 - the tick must survive a bad minute
                logger.exception("slack: tick failed")

    async def _sweep_forever(self) -> None:
        every = min(5.0, max(0.2, self.settings.claim_seconds / 5))
        while True:
            await asyncio.sleep(every)
            try:
                await self.drain.sweep()
            except Exception as exc:  # noqa: BLE001 - e.g. the store unreachable for a moment
                logger.warning("slack: sweeping the inbox failed: %s: %s", type(exc).__name__, exc)

    async def tick(self, now: float | None = None) -> None:
        """End sessions idle past `[thoth] idle_minutes`; post check-ins that are due."""
        now = time.time() if now is None else now
        await self.runtime.reap_idle(now)
        for item in await self.runtime.due_check_ins(now, accept=self.accepts_check_in):
            await asyncio.to_thread(self.deliver, "check_in", item)

    def accepts_check_in(self, item: CheckIn) -> bool:
        """A check-in is Slack's if its thread is a Slack thread of an allowed workspace and channel."""
        where = parse_thread_key(str(item.get("thread") or ""))
        return where is not None and self.settings.allows(item.get("workspace"), where[0])

    # --- inbound ----------------------------------------------------------------------

    def _wire(self, app: App) -> None:
        app.use(self._gate)
        app.event("app_mention")(self._on_mention)
        app.event("message")(self._on_message)
        app.event("reaction_added")(self._on_reaction)
        app.action(APPROVE)(self._on_button)
        app.action(REJECT)(self._on_button)

    def _gate(self, req: Any, context: Any, next: Any) -> BoltResponse | None:  # noqa: A002 - Bolt's name
        """Drop requests already handled (replays, retries, redeliveries) and foreign workspaces or channels.

        Bolt has checked the signature and timestamp before this runs, so a forged request is
        never recorded as seen. Messages are deduplicated by the inbox instead (a retry of one
        whose first delivery died with its worker must still be answered), so Slack's retries
        (`X-Slack-Retry-Num`) go through like any delivery.
        """
        if not self.settings.allows(context.team_id, context.channel_id):
            logger.info(
                "slack: ignored a request from workspace %s, channel %s (not allowed)",
                context.team_id,
                context.channel_id,
            )
            return BoltResponse(status=200, body="")
        key = request_key(req.body)
        message = (req.body.get("event") or {}).get("type") in ("message", "app_mention")
        if key is not None and not message and not self.ledger.first_time(key):
            logger.info("slack: ignored a request already handled (%s)", key.partition("|")[0])
            return BoltResponse(status=200, body="")
        next()
        return None

    def _on_mention(self, event: dict[str, Any], context: Any, body: dict[str, Any]) -> BoltResponse | None:
        inbound = self._inbound(event, context, thread_ts=event.get("thread_ts") or event.get("ts"))
        if inbound is None:
            return None
        until = time.monotonic() + ACK_WAIT_SECONDS
        try:
            self._recording(lambda: self.inbox.join(inbound.thread), until)
            self._receive(inbound, event, body, until)
        except self.inbox.db.errors:
            return BoltResponse(status=NOT_RECORDED, body="")
        return None

    def _on_message(self, event: dict[str, Any], context: Any, body: dict[str, Any]) -> BoltResponse | None:
        direct = event.get("channel_type") == "im"
        inbound = self._inbound(event, context, thread_ts=event.get("thread_ts"))
        until = time.monotonic() + ACK_WAIT_SECONDS
        try:
            if inbound is None or (
                not direct
                and (
                    f"<@{self.bot_user}>" in event.get("text", "")
                    or not self._recording(lambda: self.inbox.joined(inbound.thread), until)
                )
            ):
                return None  # channel messages are answered as mentions, or inside a thread the agent is in
            self._receive(inbound, event, body, until)
        except self.inbox.db.errors:
            return BoltResponse(status=NOT_RECORDED, body="")
        return None

    def _recording(self, action: Callable[[], Any], until: float) -> Any:
        """A store action of a delivery, waiting for a store that is down until `until` (monotonic).

        If the store still fails, it raises and the listener answers `NOT_RECORDED` (500, or no ack in
        Socket Mode): Slack sends the event again. A message is never answered unrecorded: only the
        inbox keeps replies once and in order.
        """
        try:
            return self.inbox.db.patiently(action, max(0.0, until - time.monotonic()))
        except self.inbox.db.errors as exc:
            logger.warning("slack: the inbox cannot record a delivery now (%s); not acked, Slack sends it again", exc)
            raise

    def _receive(self, inbound: Inbound, event: dict[str, Any], body: dict[str, Any], until: float) -> None:
        """Record the message in the inbox (before Slack is acked), then drain its thread."""
        ts = str(event.get("ts") or "")
        key = digest(request_key(body) or f"message {inbound.channel} {ts}")
        kept = redactor_of(self.runtime).redact(inbound.text)  # the store keeps what `[privacy]` allows
        pending = Pending(key, inbound.team, inbound.user, inbound.channel, inbound.thread_ts, kept, inbound.thread)
        self.drain.remember(pending, inbound.text)  # before the insert: a drain running here may take it at once
        try:
            waiting = self._recording(lambda: self.inbox.receive(pending, ts), until)
        except self.inbox.db.errors:
            self.drain.answered(pending.key)  # not kept here: the redelivery brings it back
            raise
        if not waiting:
            logger.info("slack: ignored a request already handled (%s)", (request_key(body) or "").partition("|")[0])
            return
        self.loop.submit(self.drain.drain(inbound.thread))

    def _inbound(self, event: dict[str, Any], context: Any, *, thread_ts: str | None) -> Inbound | None:
        """The message as an Inbound, or None for bots, edits, the agent itself and empty text."""
        user = event.get("user")
        if event.get("subtype") not in ANSWERED_SUBTYPES or event.get("bot_id") or not user or user == self.bot_user:
            return None
        text = event.get("text", "").replace(f"<@{self.bot_user}>", "").strip()
        if not text:
            return None
        team = context.team_id or event.get("team") or self.runtime.config.get("thoth.workspace")
        return Inbound(team=team, user=user, channel=event["channel"], thread_ts=thread_ts, text=text)

    async def answer(self, pending: Pending) -> None:
        """Run one turn and stream the reply into a placeholder in the thread (the one already posted, if any).

        The inbox records the placeholder and the answer's end, waiting out a store that is down
        (`STORE_WAIT_SECONDS`): this worker keeps the thread meanwhile (claims do not lapse across
        a restart), so no other worker answers the message again or the next one first.
        """
        text = self.drain.text_of(pending)
        inbound = Inbound(pending.team, pending.peer, pending.channel, pending.thread_ts, text)
        ts = pending.reply_ts
        if ts is None:
            ts = await asyncio.to_thread(self.outbox.post, inbound.channel, PLACEHOLDER, thread_ts=inbound.thread_ts)
            await self._stored(lambda: self.inbox.placed(pending.key, ts))
        streamer = Streamer(
            self.outbox, inbound.channel, ts, self.settings.stream_interval, thread_ts=inbound.thread_ts
        )
        session, turn_id = None, None
        try:
            text, session, turn_id = await self._turn(inbound, streamer, f"slack-{pending.key[:32]}")
        except ThothError as exc:
            text = f":warning: {exc}"
        except Exception as exc:  # noqa: BLE001 - the placeholder must not be left "thinking"
            logger.exception("slack: turn in %s failed", inbound.thread)
            text = f":warning: the turn failed: {type(exc).__name__}"
        key = dict(zip(("workspace", "peer", "thread"), session.key, strict=True)) if session else {}
        kept = redactor_of(self.runtime).redact(text)  # the ledger keeps what the runtime's `[privacy]` allows
        for piece_ts in await streamer.finish(text):
            try:
                self.ledger.add(Posted(inbound.channel, piece_ts, inbound.thread_ts, kept, turn_id=turn_id, **key))
            except self.inbox.db.errors as exc:  # the reply is shown; only reactions on it will not be traced
                logger.warning("slack: could not record reply %s in the ledger: %s", piece_ts, exc)
        if turn_id is not None:  # the thread's next message, on whichever worker, finds this turn stored
            await self.runtime.writes.written(turn_id, timeout=self.settings.claim_seconds / 2)
        if not await self._stored(lambda: self.inbox.finish(pending.key, turn_id)):
            logger.warning("slack: answered a message in %s that another worker took over", inbound.thread)
        self.drain.answered(pending.key)

    async def _stored(self, action: Callable[[], Any]) -> Any:
        """A store action of an answer under way, in a worker thread, waiting out a store that is down."""
        return await asyncio.to_thread(self.inbox.db.patiently, action, STORE_WAIT_SECONDS)

    async def _turn(self, inbound: Inbound, streamer: Streamer, turn_id: str) -> tuple[str, Any, str | None]:
        """The reply text, session and turn id (None for commands); `/new` is this frontend's own command.

        The turn id comes from the message's inbox key, so a worker re-running a message another one
        answered before it died stores the turn once (layers keep one turn per id).
        """
        command = inbound.text.split(maxsplit=1)[0]
        if command == "/new":
            session = self.runtime.sessions.get((inbound.team, inbound.user, inbound.thread))
            if session is not None:
                await self.runtime.end_session(session, "new")
            return "Started a new session: the next message begins fresh.", None, None
        result = await self.runtime.turn(
            inbound.text,
            peer=inbound.user,
            thread=inbound.thread,
            workspace=inbound.team,
            on_delta=streamer.add,
            turn_id=turn_id,
        )
        if result.reply.model == "command":
            extra = f"\n/new - {NEW_HELP}" if command == "/help" and "new" not in self.runtime.commands else ""
            return result.reply.text + extra, result.session, None
        return result.reply.text, result.session, result.turn.id

    # --- reactions and buttons ----------------------------------------------------------

    def _on_reaction(self, event: dict[str, Any]) -> None:
        item = event.get("item") or {}
        name = str(event.get("reaction", "")).split("::")[0]
        if item.get("type") != "message" or name not in REACTIONS or event.get("user") == self.bot_user:
            return
        posted = self.ledger.get(item.get("channel", ""), item.get("ts", ""))
        if posted is not None:
            self.loop.submit(self.react(name, str(event["user"]), posted))

    async def react(self, name: str, user: str, posted: Posted) -> None:
        """Apply a reaction on one of the agent's messages, and acknowledge it in the thread."""
        kind = REACTIONS[name]
        if kind in ("approve", "reject"):
            found = sorted(set(ITEM_ID.findall(posted.text))) if posted.item_id is None else [posted.item_id]
            if len(found) == 1:
                await self.decide(replace(posted, item_id=found[0]), kind, user)
                return
        if posted.item_id is not None:
            return  # on a card only approve and reject mean something
        if not posted.peer or posted.turn_id is None:
            note = "that message is not a turn of a conversation"
        elif user != posted.peer and user not in self.settings.founders:
            text = f"Only <@{posted.peer}> (or a founder) can change what is kept of this conversation."
            await asyncio.to_thread(self.outbox.whisper, posted.channel, user, text, thread_ts=posted.thread_ts)
            return
        else:
            results = await self.runtime.feedback(
                kind, turn_id=posted.turn_id, text=posted.text, actor=user, session=self._session_of(posted)
            )
            note = (
                "; ".join(str(r.get("message") or f"{r['plugin']} did it") for r in results)
                or "no memory layer took it"
            )
        await asyncio.to_thread(
            self.outbox.post, posted.channel, f":{name}: {DONE[kind]}: {note}", thread_ts=posted.thread_ts or posted.ts
        )

    def _session_of(self, posted: Posted) -> Session:
        """The session a reply belongs to: the open one, or (after it ended or a restart) one that is not opened."""
        key = (posted.workspace, posted.peer, posted.thread)
        return self.runtime.sessions.get(key) or Session(*key, home=self.runtime.home, runtime=self.runtime)

    def _on_button(self, ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        channel, ts = body["container"]["channel_id"], body["container"]["message_ts"]
        item_id = str(action["value"])
        posted = self.ledger.get(channel, ts) or Posted(
            channel, ts, None, body.get("message", {}).get("text", ""), item_id=item_id, title=item_id, card=True
        )
        decision = "approve" if action["action_id"] == APPROVE else "reject"
        self.loop.submit(self.decide(replace(posted, item_id=item_id), decision, str(body["user"]["id"])))

    async def decide(self, posted: Posted, decision: str, user: str) -> None:
        """A person's decision on an item, as the runtime's approvals policy allows it; the card shows who decided.

        A refusal (not a decider, and the item is not about them to withdraw) is whispered to that person only.
        """
        item_id = str(posted.item_id)
        thread_ts = posted.thread_ts or (None if posted.card else posted.ts)
        try:
            outcome = await self.runtime.decide(item_id, decision, actor=user, workspace=self.team)
        except ThothError as exc:
            text = f":warning: {exc}; your decision was not counted."
            await asyncio.to_thread(self.outbox.whisper, posted.channel, user, text, thread_ts=thread_ts)
            return
        message = str(outcome.get("message", ""))
        if posted.card:
            blocks = decided_card(item_id, posted.title, posted.text, decision=decision, actor=user, message=message)
            await asyncio.to_thread(
                self.outbox.update,
                posted.channel,
                posted.ts,
                f"{item_id}: {DONE[decision]} by <@{user}>",
                blocks=blocks,
            )
        else:
            await asyncio.to_thread(
                self.outbox.post,
                posted.channel,
                f"`{item_id}` {DONE[decision]} by <@{user}>. {message}".strip(),
                thread_ts=thread_ts,
            )

    def is_admin(self, user: str, workspace: str) -> bool | None:
        """Whether a Slack user administers this workspace (users.info `is_admin` or `is_owner`); None when the
        workspace is not this bot's team or the user is not a Slack user id. Answers are kept ADMIN_SECONDS."""
        if workspace != self.team or not SLACK_USER.match(user):
            return None
        known = self._admins.get(user)
        if known is not None and time.monotonic() - known[1] < ADMIN_SECONDS:
            return known[0]
        try:
            info = self.client.users_info(user=user).get("user") or {}
        except SlackApiError as exc:
            logger.warning(
                "slack: users.info for %s failed (%s); not counted as an admin", user, exc.response.get("error")
            )
            return False
        admin = info.get("team_id", workspace) == workspace and bool(info.get("is_admin") or info.get("is_owner"))
        self._admins[user] = (admin, time.monotonic())
        return admin

    # --- outbound (called from the runtime's worker threads) -----------------------------

    def deliver(self, event: str, payload: Mapping[str, Any]) -> None:
        """Post a runtime notification: approval cards, founder DMs, check-ins in their thread, unsaved turns."""
        text, item_id = str(payload.get("text", "")), payload.get("item_id")
        safe = escape(text)  # written by other layers, often by a model: no pings
        if event in ("approval_requested", "persona_observation") and (item_id or event == "persona_observation"):
            channels = self._review_channels(founders_first=event == "persona_observation")
            if not channels:
                logger.warning(
                    "slack: %s has nowhere to go; set [plugins.slack] approvals_channel or [thoth] founders", event
                )
            kind = str(item_id).partition(":")[0] if item_id else "persona"
            title = str(payload.get("title") or TITLES.get(kind, "Approval needed"))
            about = {k: str(payload[k]) for k in ("workspace", "peer", "thread") if payload.get(k)}
            for channel in channels:
                if item_id:
                    self.outbox.card(channel, str(item_id), title, text, **about)
                else:
                    self.outbox.post(channel, f"*{escape(title)}*\n{safe}")
        elif event == "turn_unsaved":
            self._warn_unsaved(payload)
        elif payload.get("thread"):
            where = parse_thread_key(str(payload["thread"]))
            if where is None:
                logger.warning("slack: %s for thread %r is not a Slack thread; not posted", event, payload["thread"])
                return
            self.outbox.post(where[0], safe, thread_ts=where[1])
        elif text and self.settings.approvals_channel:
            self.outbox.post(self.settings.approvals_channel, safe)  # e.g. approval reminders

    def _warn_unsaved(self, payload: Mapping[str, Any]) -> None:
        """Tell the person, privately in the thread, that layers could not save their turn (kept in the journal)."""
        where = parse_thread_key(str(payload.get("thread") or ""))
        peer = str(payload.get("peer") or "")
        if where is None or not SLACK_USER.match(peer):
            return  # another frontend's turn, replayed here from the shared journal
        text = f":warning: {escape(unsaved_message(payload.get('failed') or {}))}"
        try:
            self.outbox.whisper(where[0], peer, text, thread_ts=where[1])
        except SlackApiError as exc:
            logger.warning(
                "slack: could not tell %s that turn %s is not saved yet: %s",
                peer,
                payload.get("turn_id"),
                exc.response.get("error"),
            )

    def _review_channels(self, *, founders_first: bool) -> list[str]:
        """Where items for review go: the approvals channel or each founder's DM, whichever comes first and is set."""
        channel = [self.settings.approvals_channel] if self.settings.approvals_channel else []
        if founders_first or not channel:
            dms = [self.outbox.dm_channel(founder) for founder in self.settings.founders]
            return dms or channel
        return channel


def request_key(body: Any) -> str | None:
    """What identifies one delivery of an inbound request, the same in a replay or a redelivery; None if nothing does.

    Events API payloads (HTTP or Socket Mode) carry a globally unique `event_id`. A button press
    (`block_actions`) has no such id: its `trigger_id` (unique per interaction), the presser, the
    message and each action's id and `action_ts` together identify it.
    """
    if not isinstance(body, dict):
        return None
    if body.get("event_id"):
        return f"event {body['event_id']}"
    if body.get("type") == "block_actions" and body.get("actions"):
        container = body.get("container") or {}
        parts = [
            str(body.get("trigger_id") or ""),
            str((body.get("user") or {}).get("id") or ""),
            str(container.get("channel_id") or ""),
            str(container.get("message_ts") or ""),
        ]
        for action in body["actions"]:
            parts += [str(action.get("action_id") or ""), str(action.get("action_ts") or "")]
        return f"action {body['actions'][0].get('action_id')} trigger {body.get('trigger_id')}|" + "|".join(parts)
    return None


TITLES = {"skill": "Skill draft waiting for approval", "persona": "Persona observation"}


def slack_call(method: Callable[[], Any], key: str) -> Any:
    """Call the Web API at start-up; a refusal or an unreachable Slack is a one-line ThothError."""
    try:
        return method()
    except SlackApiError as exc:
        raise ThothError(f"Slack refused the token in {key}: {exc.response.get('error')}") from exc
    except OSError as exc:
        raise ThothError(f"cannot reach the Slack Web API ([plugins.slack] api_url): {exc}") from exc


class _Holder:
    """Per-runtime slot for the running bridge, so the `notify` hook can find it."""

    bridge: SlackBridge | None = None


def running_bridge(runtime: Runtime) -> SlackBridge | None:
    """The bridge serving this runtime, if Slack is running."""
    return runtime.plugin_state("slack", _Holder).bridge  # type: ignore[no-any-return]
