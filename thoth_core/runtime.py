"""The turn pipeline: open a session, gather context (the message is journaled meanwhile), call the model, write.

One `Runtime` per process (tests make many) owns the plugin manager, the open sessions, per-plugin
state (`plugin_state`) and the background tasks of post-turn writes and session ends (`drain()`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from . import _calls
from ._calls import Outcome, hook_loop, in_loop_thread
from .approvals import DECISIONS, OWNER_KEYS, Actor, ApprovalRefused, Policy
from .budget import Assembly, assemble, fit_message, trim_history
from .config import Config, agent_of, load_config
from .database import reachable
from .errors import ConfigError, InputError, ModelError, ModelNotConfigured, PluginError, ThothError
from .fallback import FallbackJournal
from .home import default_home
from .inputs import check_name, check_scope, check_text
from .journal import TurnJournal
from .manager import ThothPluginManager
from .meaning import Meaning
from .models import NO_MODEL_HELP, Model, ModelRequest, configured_model
from .plugins import make_plugin_manager
from .recall import Recalled, fuse
from .redact import Redactor
from .results import command_output, handler_problem
from .schema import check_plugin_values
from .tools import ToolBudget, recorded
from .types import (
    CheckIn,
    Command,
    ContextBlock,
    LayerStatus,
    MemoryRecord,
    Message,
    PluginCall,
    Reply,
    Session,
    Turn,
    Usage,
)
from .writes import StreamedReply, TurnWriter

logger = logging.getLogger(__name__)

MISSING_CONTEXT = "missing_context"  # `Turn.extra` key: plugin -> "timeout" or "error", for each context not given


def first_answer(outcomes: list[Outcome], failing: str) -> Any:
    """The answer of a `first` hook: its first result not None; if none and a plugin failed, ThothError naming it."""
    for _, result, _ in outcomes:
        if result is not None:
            return result
    failed = [call for _, _, call in outcomes if call.status != "ok"]
    if failed:
        raise ThothError(f"{failed[0].plugin} {failing}: {failed[0].error}")
    return None


@dataclass
class TurnResult:
    """A finished turn: the reply, the context it was given, its session and the turn itself."""

    reply: Reply
    assembly: Assembly
    session: Session
    turn: Turn


class Runtime:
    """Plugins, sessions and the turn pipeline of one Thoth process."""

    def __init__(
        self,
        config: Config | None = None,
        *,
        pm: ThothPluginManager | None = None,
        home: Path | None = None,
        autoload: bool = True,
    ) -> None:
        self.config = config or Config()
        self.pm = pm or make_plugin_manager(self.config, autoload=autoload)
        self.home = home or default_home(self.config)
        self.home.mkdir(parents=True, exist_ok=True)
        if self.config.path is None and self.config.fallback_root is None:
            self.config = replace(self.config, fallback_root=self.home)  # outside a home, nothing lands in the cwd
        self.agent = agent_of(self.config)  # scopes working sessions and episodes when agents share a home
        self.redactor = Redactor.from_config(self.config)  # `[privacy]`: what every writer redacts
        self.sessions: dict[tuple[str, str, str], Session] = {}
        self.last: TurnResult | None = None
        self._state: dict[str, Any] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._models: dict[str, Callable[..., Model]] | None = None
        self._model: Model | None = None
        self._model_lock = threading.Lock()  # plugins build it from threads (warm-ups, post-turn writes)
        self._commands: dict[str, Command] | None = None
        self._registered = 0  # plugins registered after start-up (`register`): the registries' cache key
        self._registrants: dict[tuple[str, str], str] = {}  # (register_* hook, name) -> the plugin that registered it
        self.command_problems: dict[str, str] = {}  # "plugin: /name" -> why its command was refused
        self.writes = TurnWriter(self)
        self.meaning = Meaning(self)  # the embedder and vectors every layer's recall by meaning shares
        self._recovered = False
        self.config.declare(self.pm.get_plugins())  # a plugin's configure reads its table over its CONFIG_DEFAULTS
        _calls.call_here(self.pm, "configure", {"runtime": self})  # historic: replayed for plugins registered later
        check_plugin_values(self.config, self.pm.get_plugins())  # what no plugin checked: each default's type

    @classmethod
    def load(cls, path: Path | None = None, *, autoload: bool = True) -> Runtime:
        """A runtime from thoth.toml (or `$THOTH_CONFIG`)."""
        # A shared store refusing its URL is one error line; one that does not answer, one warning (turns kept locally).
        return cls(reachable(load_config(path)), autoload=autoload)

    def register(self, plugin: object, name: str | None = None) -> str:
        """Register a plugin object after start-up; it gets the historic calls made so far (`configure`)."""
        registered = self.pm.register(plugin, name=name)
        if registered is None:
            raise PluginError(str(name), "is disabled in thoth.toml or by a *_DISABLED switch")
        self.config.declare([plugin])
        _calls.replay(self.pm, registered)
        check_plugin_values(self.config, [plugin])
        self._models = self._commands = None
        self._registered += 1  # a registry another thread is reading now is not kept (`models`, `commands`)
        return registered

    # --- per-plugin state -------------------------------------------------------------

    def plugin_state(self, name: str, factory: Callable[[], Any]) -> Any:
        """The state object a plugin keeps for this runtime, made by factory on first use."""
        if name not in self._state:
            self._state[name] = factory()
        return self._state[name]

    def deadline_for(self, plugin: str) -> float:
        """Seconds a plugin may take on a turn's hook (`turn` deadline): its config, its DEADLINE, or the default."""
        found = [self.config.get(f"plugins.{plugin}.deadline"), getattr(self.pm.get_plugin(plugin), "DEADLINE", None)]
        return float(next((value for value in found if value is not None), self.config.get("thoth.deadline")))

    def background_deadline(self, plugin: str) -> float:
        """Seconds a plugin's background work (`background` deadline: post-turn write, session end, notify) may take."""
        configured = self.config.get(f"plugins.{plugin}.background_deadline")
        return float(configured if configured is not None else self.config.get("thoth.background_deadline"))

    def layer_of(self, plugin: str) -> str:
        """The layer a plugin declares with a module-level LAYER, else `other`."""
        return str(getattr(self.pm.get_plugin(plugin), "LAYER", "other"))

    # --- registries -------------------------------------------------------------------

    def registry(self, hook: str) -> dict[str, Any]:
        """Everything plugins register through a `register_*` hook, by name."""
        found: dict[str, Any] = {}

        def register(name: str, value: Any) -> None:
            found[name] = value

        for plugin in dict.fromkeys(self.pm.implementers(hook)):  # in pluggy's order: a later one replaces
            _calls.call_here(self.pm, hook, {"register": register}, only={plugin})
            self._registrants.update({(hook, name): plugin for name in found if (hook, name) not in self._registrants})
        return found

    def registrant(self, hook: str, name: str) -> str | None:
        """The plugin that registered `name` through a `register_*` hook (asked of the registry before), or None."""
        return self._registrants.get((hook, name))

    @property
    def models(self) -> dict[str, Callable[..., Model]]:
        """Model provider factories by name."""
        models, seen = self._models, self._registered
        if models is None:
            models = self.registry("register_models")
            if seen == self._registered:  # a plugin registered meanwhile (by another thread) may be missing
                self._models = models
        return models

    @property
    def commands(self) -> dict[str, Command]:
        """Slash commands by name."""
        commands, seen = self._commands, self._registered
        if commands is None:
            found: dict[str, Command] = {}
            for plugin in dict.fromkeys(self.pm.implementers("register_commands")):

                def register(command: Command, plugin: str = plugin) -> None:
                    problem = handler_problem(getattr(command, "handler", None))
                    if problem is not None:
                        logger.error(
                            "plugin %s: command /%s refused: %s", plugin, getattr(command, "name", "?"), problem
                        )
                        self.command_problems[f"{plugin}: /{command.name}"] = problem
                        return
                    found[command.name] = command
                    self._registrants[("register_commands", command.name)] = plugin

                _calls.call_here(self.pm, "register_commands", {"register": register}, only={plugin})
            if seen == self._registered:
                self._commands = found
            commands = found
        return commands

    def model_name(self) -> str | None:
        """The configured provider, or anthropic when its key or URL is in the environment."""
        return configured_model(self.config)

    def model(self) -> Model:
        """The configured model provider; raises ModelNotConfigured with how to fix it."""
        if self._model is not None:
            return self._model
        with self._model_lock:  # one provider (one HTTP client) however many threads ask first
            if self._model is None:
                name = self.model_name()
                if name is None:
                    raise ModelNotConfigured(NO_MODEL_HELP)
                models = self.models  # read once: uncached while another thread registers a plugin
                if name not in models:
                    raise self.config.error(
                        "thoth.model",
                        f"unknown model provider {name!r}; available: {', '.join(sorted(models)) or 'none'}",
                    )
                self._model = models[name](self, self.config.section(f"models.{name}"))
            return self._model

    # --- sessions ---------------------------------------------------------------------

    async def session(self, *, peer: str, thread: str, workspace: str | None = None) -> Session:
        """The open session of (workspace, peer, thread), opening it if needed (the journal is replayed first).

        A bad name (empty, a control character, over 128 characters) raises InputError before anything is opened.
        """
        check_scope(peer=peer, thread=thread, workspace=workspace)
        if not self._recovered:
            self._recovered = True
            await self.recover()
        key = (workspace or self.config.get("thoth.workspace"), peer, thread)
        session = self.sessions.get(key)
        if session is not None and await self._closed_elsewhere(session):
            session = None
        if session is None:
            session = Session(*key, home=self.home, runtime=self, agent=self.agent)
            self.sessions[key] = session
            await self.call("session_start", session=session)
            session.started.set()
        return session

    async def end_session(self, session: Session, reason: str) -> None:
        """End a session once and fire `session_end` in the background."""
        if session.ended:
            return
        session.ended = True
        if self.sessions.get(session.key) is session:  # a reaped stored session may share a live one's key
            del self.sessions[session.key]
        self.background(self.call("session_end", session=session, reason=reason))

    async def _closed_elsewhere(self, session: Session) -> bool:
        """Drop a held session another worker ended (`session_closed`); a failing check counts as open."""
        outcomes = await self.call("session_closed", session=session)
        for plugin, _, record in outcomes:
            if record.status != "ok":
                logger.warning("session %s: %s could not check whether it was ended elsewhere", session.id, plugin)
        closed = any(bool(result) for _, result, _ in outcomes)
        if closed:
            session.ended = True  # the other worker fired `session_end`
            self.sessions.pop(session.key, None)
        return closed

    async def reap_idle(self, now: float | None = None) -> list[Session]:
        """End sessions idle longer than `[thoth] idle_minutes`, also those exited processes left; returns them."""
        limit = float(self.config.get("thoth.idle_minutes")) * 60
        now = time.time() if now is None else now
        held = [s for s in list(self.sessions.values()) if now - s.last_active >= limit]
        idle = [s for s in held if not await self._closed_elsewhere(s) and now - s.last_active >= limit]
        outcomes = await self.call("idle_sessions", before=now - limit, runtime=self)
        idle += [s for _, found, _ in outcomes for s in found or [] if isinstance(s, Session)]
        for session in idle:
            await self.end_session(session, "idle")
        return idle

    # --- the turn ---------------------------------------------------------------------

    async def context(self, turn: Turn, session: Session, *, until: float | None = None) -> Assembly:
        """Run the pre-spawn stage and fit the blocks into the budgets; no plugin runs past `until` (monotonic)."""

        kwargs = {"turn": turn, "session": session}
        outcomes = await _calls.call(self.pm, "pre_spawn_context", kwargs, deadlines=self, until=until)
        blocks: list[ContextBlock] = []
        calls = []
        for plugin, result, call in outcomes:
            calls.append(call)
            for block in result if isinstance(result, list) else [result] if result is not None else []:
                if not isinstance(block, ContextBlock):
                    logger.error(
                        "plugin %s: pre_spawn_context returned %r, not a ContextBlock; skipped",
                        plugin,
                        type(block).__name__,
                    )
                    continue
                blocks.append(
                    replace(
                        block, plugin=plugin, layer=block.layer if block.layer != "other" else self.layer_of(plugin)
                    )
                )
        assembly = assemble(
            blocks,
            total=int(self.config.get("budget.total")),
            layers=self.config.layer_budgets,
            per_plugin=int(self.config.get("budget.per_plugin")),
        )
        assembly.calls = calls
        return assembly

    async def tools(
        self, turn: Turn, session: Session, budget: ToolBudget | None = None, model: Model | None = None
    ) -> list[dict[str, Any]]:
        """The tools plugins offer for this turn, each handler recording its calls, within the turn's `budget`.

        Given the `model`, only what it runs: none for a provider without `tool_types`, and of the tools
        with a `type` (Claude's `memory_20250818`) those it names.
        """
        kinds = getattr(model, "tool_types", None) if model is not None else None
        if model is not None and not kinds:
            return []
        outcomes = await self.call("turn_tools", turn=turn, session=session)
        tools: list[dict[str, Any]] = []  # ToolDefinition, as the model providers take them
        for plugin, result, _ in outcomes:
            for tool in result or []:
                if not isinstance(tool, dict) or not tool.get("name"):
                    logger.error("plugin %s: turn_tools returned %r, not a tool definition; skipped", plugin, tool)
                    continue
                if kinds is not None and tool.get("type", "custom") not in kinds:
                    continue  # a tool type this model does not run
                tools.append(
                    dict(tool, handler=recorded(tool, plugin, turn, session, budget))
                    if callable(tool.get("handler"))
                    else tool
                )
        return tools

    async def turn(
        self,
        text: str,
        *,
        peer: str,
        thread: str,
        workspace: str | None = None,
        on_delta: Callable[[str], Any] | None = None,
        turn_id: str | None = None,
    ) -> TurnResult:
        """One whole turn (command or model reply, journaled as it goes); `turn_id` keeps a re-run turn once.

        Bad names and text no store can keep (not UTF-8, a NUL) raise InputError before anything is kept.
        """
        check_scope(peer=peer, thread=thread, workspace=workspace)
        check_text(text)
        session = await self.session(peer=peer, thread=thread, workspace=workspace)
        turn = Turn(text=text, peer=peer, thread=thread, workspace=session.workspace, agent=session.agent)
        turn.id = turn_id or turn.id
        session.last_active = time.time()
        if text.startswith("/"):
            name, _, args = text[1:].partition(" ")
            if name in self.commands:
                return TurnResult(
                    await self.run_command(name, args.strip(), turn, session), Assembly([]), session, turn
                )
            refused = [
                f"/{name} ({key.split(':')[0]}) was refused: {why}"
                for key, why in self.command_problems.items()
                if key.endswith(f": /{name}")
            ]
            if refused:
                return TurnResult(Reply(refused[0], model="command", error=refused[0]), Assembly([]), session, turn)
        self.writes.retry_now()  # what this process could not write yet is retried as a new turn comes
        model = self.model()  # no model configured: the turn is refused before anything is accepted
        # the message is journaled (synced) while the context gathers, before the model is called
        budget = ToolBudget.of(self.config)  # what the model's tool calls may spend in this turn
        assembly, tools, (kept, journaled) = await asyncio.gather(
            self.context(turn, session), self.tools(turn, session, budget, model), self.writes.accept(turn, session)
        )
        assembly.tools = budget.made
        # the plugins whose context this turn goes without (timed out, failed): post-turn writers may count them
        turn.extra[MISSING_CONTEXT] = {call.plugin: call.status for call in assembly.calls if call.status != "ok"}
        message, message_cut = fit_message(text, int(self.config.get("budget.message")))
        assembly.cuts += [message_cut] if message_cut else []
        request = ModelRequest(
            tools=tools,
            system=assembly.blocks,
            messages=trim_history(session.history, int(self.config.get("budget.history"))) + [Message("user", message)],
            max_tokens=int(self.config.get("thoth.max_tokens")),
        )
        streamed = self.writes.stream(kept, model.name, on_delta, journaled=journaled)
        reply = await self._ask(model, request, turn, session, streamed, budget)
        self.last = result = TurnResult(reply, assembly, session, turn)
        await self.record(turn, reply, session)  # the whole reply replaces the part journaled so far
        try:
            await streamed.finish()  # then the rest of it is shown
        except Exception as exc:
            raise ModelError(f"showing the reply failed: {type(exc).__name__}: {exc}") from exc
        return result

    async def record(self, turn: Turn, reply: Reply, session: Session) -> None:
        """Keep a replied turn (here or by another agent) and start its post-turn writes."""
        keep = self.redactor.redact  # what is kept (history, transcript, journal, layers) has typed placeholders
        kept_turn = replace(turn, text=keep(turn.text), agent=session.agent)  # the journal replays it as this agent's
        kept_reply = replace(reply, text=keep(reply.text))
        session.record(kept_turn, kept_reply)
        await self.writes.start(kept_turn, kept_reply, session)

    @property
    def journal(self) -> TurnJournal | FallbackJournal:
        """The turn journal of this home."""
        return self.writes.journal

    @property
    def unsaved(self) -> list[dict[str, Any]]:
        """Replied turns some layer could not write yet (they stay journaled)."""
        return self.writes.unsaved

    async def not_saved(self, turn_id: str, *, timeout: float) -> dict[str, str]:
        """What could not write a replied turn, plugin -> error, once its writes ended (at most `timeout` s).

        Empty when every layer wrote it, or when its writes still run after `timeout` (they go on, journaled).
        """
        await self.writes.written(turn_id, timeout=timeout)
        return {k: v for e in self.writes.unsaved if e["turn_id"] == turn_id for k, v in e["failed"].items()}

    async def recover(self) -> int:
        """Replay the journal: each turn a killed or failing process left unwritten goes to the plugins missing it."""
        return await self.writes.recover()

    async def _ask(
        self,
        model: Model,
        request: ModelRequest,
        turn: Turn,
        session: Session,
        streamed: StreamedReply,
        budget: ToolBudget | None = None,
    ) -> Reply:
        """Stream the model's reply through `streamed`; a failed or cancelled stream keeps the turn, cut short.

        When the turn's tool calls hit a limit, the reply ends with one line saying which.
        """
        usage = Usage()
        try:
            async for item in model.stream(request):
                if isinstance(item, Usage):
                    usage = item
                    continue
                streamed.add(item)
            if budget is not None and budget.stopped:
                logger.info("turn %s: tool calls stopped at %s", turn.id, budget.stopped)
                streamed.add(f"\n\n(Tool calls stopped: {budget.stopped} was reached.)")
            await streamed.end()
        except asyncio.CancelledError:  # stopped (Ctrl-C, a closed frontend): kept as far as it was shown
            self.background(self.record(turn, streamed.cut(), session))
            raise
        except Exception as exc:
            cut = await streamed.stop()  # the accepted message stays, with the reply as far as it was shown
            cut = replace(cut, text=self.redactor.redact(cut.text))
            error = {"type": "error", "turn_id": turn.id, "at": time.time(), "error": str(exc)}
            kept = {"user": streamed.turn.text, "assistant": cut.text, "cut_short": True}
            session.transcript.append(error | kept)
            await self.writes.start(streamed.turn, cut, session)
            if isinstance(exc, ThothError):
                raise
            raise ModelError(f"model {model.name} failed: {type(exc).__name__}: {exc}") from exc
        return Reply(text=streamed.text, model=model.name, usage=usage)

    async def run_command(self, name: str, args: str, turn: Turn, session: Session) -> Reply:
        """Run a slash command; a failure (raised, or a result not a str or None) is the reply's one-line `error`."""
        command = self.commands[name]
        owner = self._registrants.get(("register_commands", name), "?")
        error = None
        try:
            check_text(args, what="the text")  # callers other than `turn` (MCP's tools) come straight here
            output = command.handler(args=args, turn=turn, session=session, runtime=self)
            if inspect.isawaitable(output):
                output = await output
            text, problem = command_output(output)
            if problem is not None:
                error = f"/{name} (plugin {owner}) {problem}"
        except ThothError as exc:
            error = f"/{name}: {exc}"
        except Exception as exc:  # noqa: BLE001 - a broken command must not end the chat
            error = f"/{name} (plugin {owner}) failed: {type(exc).__name__}: {exc}"
            if _calls.tracebacks():
                logger.error("command /%s failed", name, exc_info=exc)
        if error is not None:
            error = " ".join(error.split())
            return Reply(text=error, model="command", error=error)
        return Reply(text=text, model="command")

    async def forget(
        self, *, peer: str, thread: str | None = None, workspace: str | None = None, wait: float = 0.0
    ) -> dict[str, dict[str, int]]:
        """Ask every plugin to delete what it holds of a peer (remote queues: wait up to `wait` s); a receipt each."""
        workspace = workspace or self.config.get("thoth.workspace")
        held = self.writes.forget(workspace=workspace, peer=peer, thread=thread)  # no retry of theirs starts now
        await self.drain()  # a write still in flight must not land after the delete
        for key in [k for k in self.sessions if k[0] == workspace and k[1] == peer and thread in (None, k[2])]:
            self.sessions.pop(key).ended = True
        # the journal first: a replay must not bring back what the layers are about to delete
        journaled = held + self.writes.forget(workspace=workspace, peer=peer, thread=thread)  # owed, failed meanwhile
        journaled += await asyncio.to_thread(self.journal.forget, workspace=workspace, peer=peer, thread=thread)
        receipt: dict[str, dict[str, int]] = {"journal": {"unwritten turns": journaled}} if journaled else {}
        self.meaning.clear()  # no vector of what is deleted stays in memory
        kwargs = {"peer": peer, "thread": thread, "workspace": workspace, "runtime": self, "wait": wait}
        outcomes = await _calls.call(self.pm, "forget", kwargs, deadlines=self, extra=wait)  # a remote queue's wait
        for plugin, result, call in outcomes:
            if call.status != "ok":
                receipt[plugin] = {"error": 1}
            elif result:
                receipt[plugin] = dict(result)
        return receipt

    async def status(self, *, peer: str, workspace: str | None = None) -> list[LayerStatus]:
        """Each layer's counts for status displays."""
        workspace = workspace or self.config.get("thoth.workspace")
        outcomes = await self.call("layer_status", workspace=workspace, peer=peer, runtime=self)
        found = [(plugin, result) for plugin, result, _ in outcomes if isinstance(result, dict)]
        return [cast(LayerStatus, dict(result, plugin=plugin)) for plugin, result in found]

    async def last_thread(self, *, peer: str, workspace: str | None = None) -> str | None:
        """The thread this peer was most recently active in, as the layers remember it; None if none."""
        workspace = workspace or self.config.get("thoth.workspace")
        outcomes = await self.call("last_thread", peer=peer, workspace=workspace, runtime=self)
        found = [result for _, result, _ in outcomes if isinstance(result, dict) and result.get("thread")]
        return str(max(found, key=lambda r: float(r.get("last_active") or 0))["thread"]) if found else None

    # --- memory records -----------------------------------------------------------------

    def _record_scope(self, peer: str, workspace: str | None) -> dict[str, Any]:
        """The hook arguments naming whose records: a bad peer or workspace name raises InputError."""
        check_name("peer", peer)
        if workspace is not None:
            check_name("workspace", workspace)
        return {"peer": peer, "workspace": workspace or self.config.get("thoth.workspace"), "runtime": self}

    async def recall(
        self, *, query: str, peer: str, workspace: str | None = None, limit: int = 8, layer: str | None = None
    ) -> Recalled:
        """Every layer's memories of a peer matching a query, fused into one list, best first (`thoth_core.recall`).

        `layer` keeps one layer's hits (or one plugin's); a plugin that fails or times out is named in `failed`.
        """
        scope = self._record_scope(peer, workspace)
        if not query.strip():
            raise InputError("query: required, a non-empty text")
        recallers = self.pm.implementers("recall")
        known = sorted({*recallers, *map(self.layer_of, recallers)})
        if layer is not None and layer not in known:
            raise InputError(f"layer: nothing named {layer!r} recalls here; one of: {', '.join(known)}")
        outcomes = await self.call("recall", query=query, limit=limit, **scope)
        ranked, failed = [], []
        for plugin, result, call in outcomes:
            if call.status != "ok":
                failed.append({"plugin": plugin, "status": call.status, "error": call.error})
                continue
            hits = [dict(hit, plugin=plugin) for hit in result or [] if isinstance(hit, dict) and hit.get("text")]
            ranked.append([h for h in hits if layer in (None, plugin, h.get("layer"))][:limit])
        return Recalled(hits=fuse(ranked, limit), failed=failed, peer=peer, workspace=scope["workspace"], query=query)

    async def records(
        self,
        *,
        peer: str,
        workspace: str | None = None,
        layer: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        before: float | None = None,
    ) -> list[MemoryRecord]:
        """What the layers hold about one peer, newest first, at most `limit` (`before`: older than, unix seconds).

        `layer` keeps one layer's records (or one plugin's: `blackboard`), `kind` one kind; a failing plugin is
        logged and left out.
        """
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InputError(f"limit {limit!r}: expected a whole number of at least 1")
        scope = self._record_scope(peer, workspace)
        only = None
        if layer is not None:
            only = {p for p in self.pm.implementers("memory_records") if layer in (p, self.layer_of(p))}
        kwargs = {**scope, "kind": kind, "limit": limit, "before": before}
        outcomes = await _calls.call(self.pm, "memory_records", kwargs, deadlines=self, only=only)
        found = [
            cast(MemoryRecord, {**record, "plugin": plugin})
            for plugin, result, _ in outcomes
            for record in result or []
            if (layer is None or layer in (plugin, record["layer"]))
            and (kind is None or record["kind"] == kind)
            and (before is None or float(record["at"]) < before)
        ]
        found.sort(key=lambda record: float(record["at"]), reverse=True)
        return found[:limit]

    async def get_record(self, *, record_id: str, peer: str, workspace: str | None = None) -> MemoryRecord | None:
        """One of the peer's records by id, with its history; None if no layer holds it for this peer."""
        return await self._one_record("memory_record", record_id=record_id, **self._record_scope(peer, workspace))

    async def edit_record(
        self, *, record_id: str, text: str, peer: str, workspace: str | None = None
    ) -> MemoryRecord | None:
        """Correct one of the peer's records as `/correct` does; the record as it now stands, or None (none such).

        Text no store can keep, empty text or a secret raises InputError before any layer is asked.
        """
        scope = self._record_scope(peer, workspace)
        if not isinstance(text, str) or not check_text(text, what="the corrected text").strip():
            raise InputError("the corrected text is empty; to delete the record, delete it")
        secrets = self.redactor.find_secrets(text)
        if secrets:
            found = ", ".join(secrets)
            raise InputError(f"not stored: that holds a secret ({found}); secrets are never kept in memory")
        return await self._one_record("edit_memory_record", record_id=record_id, text=text.strip(), **scope)

    async def delete_record(self, *, record_id: str, peer: str, workspace: str | None = None) -> bool:
        """Delete one of the peer's records as `/correct ID delete` does; whether a layer deleted it."""
        kwargs = {"record_id": record_id, **self._record_scope(peer, workspace)}
        outcomes = await _calls.call(self.pm, "delete_memory_record", kwargs, deadlines=self)
        return any(result is True for _, result, _ in outcomes)

    async def _one_record(self, hook: str, **kwargs: Any) -> MemoryRecord | None:
        """The first answer of a `first` record hook, with `plugin` filled in."""
        if not isinstance(kwargs["record_id"], str) or not kwargs["record_id"]:
            return None
        outcomes = await _calls.call(self.pm, hook, kwargs, deadlines=self)
        for plugin, result, _ in outcomes:
            if result is not None:
                return cast(MemoryRecord, {**result, "plugin": plugin})
        return None

    async def call(self, hook: str, **kwargs: Any) -> list[Outcome]:
        """Call a hook as its policy says (style, deadline, isolation); (plugin, result, call record) of each call."""
        return await _calls.call(self.pm, hook, kwargs, deadlines=self)

    def call_sync(self, hook: str, **kwargs: Any) -> list[Outcome]:
        """Call a hook on this thread, one plugin after the other and without deadlines (a `first` hook stops early)."""
        return _calls.call_here(self.pm, hook, kwargs)

    async def due_check_ins(
        self, now: float | None = None, *, accept: Callable[[CheckIn], bool] | None = None
    ) -> list[CheckIn]:
        """Check-ins whose time has come and that `accept` takes (they count as delivered once returned).

        `accept` may be called from a worker thread: it must be quick and thread-safe. Plugins get their
        background deadline, not a turn's: a hook cut off after it marked check-ins delivered would lose them.
        """
        accept = accept or (lambda _item: True)
        now = time.time() if now is None else now
        outcomes = await self.call("due_check_ins", now=now, runtime=self, accept=accept)
        return [item for _, found, _ in outcomes for item in found or [] if accept(item)]

    async def approvals(self, *, actor: str, workspace: str | None = None) -> list[dict[str, Any]]:
        """The pending items this person may see (`approvals.Policy`): every item for a decider, else those about them.

        A busy store is waited for, not read as empty.
        """
        items, _ = await self._pending()
        who = await self._actor(actor, workspace)
        return Policy.of(self.config).visible(who, items)

    async def all_approvals(self) -> list[dict[str, Any]]:
        """Every pending item of every plugin, whoever it is about: for counts and reminders sent to the deciders,
        never to show a person (frontends show `approvals(actor=...)`)."""
        items, _ = await self._pending()
        return items

    async def decide(
        self,
        item_id: str,
        decision: str,
        *,
        actor: str,
        workspace: str | None = None,
        reason: str = "",
        text: str | None = None,
    ) -> dict[str, Any]:
        """Apply a person's decision to a pending item, if the approvals policy lets them; raises
        `ApprovalRefused` (one line) when it does not, `ThothError` when no plugin holds the item."""
        if decision not in DECISIONS:
            raise ThothError(f"unknown decision {decision!r}; expected {', '.join(DECISIONS)}")
        items, failed_lists = await self._pending()
        item = next((i for i in items if str(i.get("id")) == item_id), None)
        if item is None:
            cause = next((f" ({c.plugin} could not list its items: {c.error})" for c in failed_lists), "")
            raise ThothError(f"no pending item {item_id!r}{cause}")
        who = await self._actor(actor, workspace)
        refusal = Policy.of(self.config).refusal(who, decision, item)
        if refusal is not None:
            raise ApprovalRefused(refusal)
        outcomes = await self.call(  # firstresult: the owner's answer ends the call
            "decide", item_id=item_id, decision=decision, actor=who.peer, reason=reason, text=text, runtime=self
        )
        result = first_answer(outcomes, f"could not {decision} {item_id}")
        if result is None:
            raise ThothError(f"no pending item {item_id!r}")
        return dict(result)

    async def hold_write(
        self, *, kind: str, text: str, session: Session, flags: list[str], tier: str, record: str | None = None
    ) -> str | None:
        """Queue a write the model proposed for a person's approval (`hold_write`); the item id, or None (no queue)."""
        outcomes = await self.call(
            "hold_write", kind=kind, text=text, record=record, flags=flags, tier=tier, session=session
        )
        result = first_answer(outcomes, "could not queue it for approval")
        return None if result is None else str(result)

    async def _pending(self) -> tuple[list[dict[str, Any]], list[PluginCall]]:
        """Every plugin's pending items, each naming whom it is about, and the calls that failed to list theirs."""
        outcomes = await self.call("approvals", runtime=self)
        items: list[dict[str, Any]] = []  # ApprovalItem, as the approvals policy reads them
        for plugin, result, _ in outcomes:
            for item in result or []:
                if not all(key in item for key in OWNER_KEYS):  # the hook's contract: shown to deciders only
                    logger.error("plugin %s: approvals item %s names no workspace and peer", plugin, item.get("id"))
                    item = {**item, "workspace": None, "peer": None}
                items.append(item)
        return items, [call for _, _, call in outcomes if call.status != "ok"]

    async def _actor(self, peer: str, workspace: str | None) -> Actor:
        """The person asking, as the policy sees them: an admin when the frontend serving their workspace says so."""
        if not isinstance(peer, str) or not peer.strip():
            raise ThothError(f"actor: expected a person's name, got {peer!r}")
        workspace = workspace or str(self.config.get("thoth.workspace"))
        if not Policy.of(self.config).may_be_admin(peer):
            return Actor(peer, workspace)
        outcomes = await self.call("workspace_admin", peer=peer, workspace=workspace, runtime=self)
        return Actor(peer, workspace, admin=any(result is True for _, result, _ in outcomes))

    async def feedback(
        self, kind: str, *, turn_id: str, text: str, actor: str, session: Session
    ) -> list[dict[str, Any]]:
        """A person reacted to a message; returns what each plugin did about it."""
        outcomes = await self.call("feedback", kind=kind, turn_id=turn_id, text=text, actor=actor, session=session)
        return [dict(result, plugin=plugin) for plugin, result, _ in outcomes if isinstance(result, dict)]

    def notify(self, event: str, **payload: Any) -> None:
        """Tell the frontends about something, in the background."""
        self.background(self.call("notify", event=event, payload=payload, runtime=self))

    # --- background work --------------------------------------------------------------

    def background(self, work: Awaitable[Any]) -> asyncio.Task[Any] | None:
        """Run work after the reply; `drain()` waits for it. Plain hook impls (worker threads) may call it too."""
        loop = hook_loop()
        if loop is not None and not in_loop_thread(loop):
            loop.call_soon_threadsafe(self._track, work)  # runs before the hook call's result is seen
            return None
        return self._track(work)

    def _track(self, work: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def drain(self, *, writes_within: float | None = None) -> None:
        """Wait for all background work; post-turn writes only `writes_within` seconds (then they are abandoned)."""
        loop = asyncio.get_running_loop()
        until = None if writes_within is None else loop.time() + writes_within
        while self._background:
            writing = until is not None and any(task in self.writes.running for task in self._background)
            timeout = max(0.0, until - loop.time()) if writing and until is not None else None
            done, _ = await asyncio.wait(list(self._background), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if not done and writing:
                self._background.difference_update(self.writes.abandon(writes_within or 0.0))

    async def aclose(self) -> None:
        """Finish background work (post-turn writes for at most `[thoth] exit_deadline` s) and close plugin state."""
        self.writes.stop_retrying()
        await self.drain(writes_within=float(self.config.get("thoth.exit_deadline")))
        await self.writes.at_exit()  # the last try to journal what only memory holds; one line for what is not saved
        for name, state in self._state.items():
            close = getattr(state, "close", None)
            if close is not None:
                try:
                    outcome = close()
                    if inspect.isawaitable(outcome):
                        await outcome
                except Exception as exc:  # noqa: BLE001
                    logger.error("plugin %s: closing state failed: %s", name, exc)
        self._state.clear()
        self.writes.close()


__all__ = ["MISSING_CONTEXT", "Command", "ConfigError", "Runtime", "TurnResult", "default_home"]
