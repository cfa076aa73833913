"""`thoth review` (the whole approval queue) and `thoth reflect session|idle|nightly|promote|records|audit`.

`promote` takes a transient record (into knowledge) or a reflexion record (into a persona guideline).
"""

from __future__ import annotations

import getpass
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from thoth_core import Session, ThothError
from thoth_core.cli import HelpGroup, run, runtime

from . import reflexion_files  # queue, nightly and reflect (pydantic schemas) load when a command runs
from .settings import state
from .spans import turns_in, unreflected

if TYPE_CHECKING:
    from thoth_core import Runtime

actor_option = click.option(
    "--actor",
    default=getpass.getuser,
    show_default="your user name",
    help="Who you are: a decider ([thoth] founders, else the home's owner) sees and decides every item, "
    "anyone else only the items about them, and may only withdraw (reject) those.",
)


def _show(item: dict[str, Any]) -> str:
    flags = f"  FLAGGED: {', '.join(item['flags'])}" if item.get("flags") else ""
    source = item.get("source") or {}
    origin = (
        f"session {source['session']}"
        if source.get("session")
        else ", ".join(f"{k} {v}" for k, v in source.items() if isinstance(v, str))
    )
    tier = f"  TIER: {item['tier']}" if item.get("tier") else ""
    heading = f"{item['id']}  [{item['kind']}] {item['title']}{flags}{tier}"
    return f"{heading}\n    from {origin}\n    {item.get('body', '')[:500]}"


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="The queue as JSON.")
@click.option(
    "-i", "--interactive", is_flag=True, help="Go through the items one by one: approve, edit, reject or skip."
)
@actor_option
@click.pass_context
def review(ctx: click.Context, as_json: bool, interactive: bool, actor: str) -> None:
    """List what waits for approval (all layers) that --actor may see, or decide on items."""
    if ctx.invoked_subcommand is not None:
        return

    async def go() -> None:
        rt = runtime()
        items = await rt.approvals(actor=actor)
        if as_json:
            click.echo(json.dumps(items, indent=2, default=str))
            return
        if not items:
            click.echo("Nothing is waiting for approval.")
            return
        for item in items:
            click.echo(_show(item))
            if not interactive:
                continue
            choice = click.prompt(
                "  [a]pprove, [e]dit, [r]eject, [s]kip", type=click.Choice(["a", "e", "r", "s"]), default="s"
            )
            if choice == "s":
                continue
            if choice == "e":
                text = click.edit(item.get("body", "")) or ""
                outcome = await rt.decide(item["id"], "edit", actor=actor, text=text.strip())
                click.echo(f"  {outcome.get('message', outcome)}")
                if not click.confirm("  approve the edited text now?", default=True):
                    continue
                choice = "a"
            decision = {"a": "approve", "r": "reject"}[choice]
            reason = click.prompt("  reason", default="", show_default=False) if decision == "reject" else ""
            outcome = await rt.decide(item["id"], decision, actor=actor, reason=reason)
            click.echo(f"  {outcome.get('message', outcome)}")

    run(go())


def _decide(item_id: str, decision: str, actor: str, reason: str = "", text: str | None = None) -> None:
    outcome = run(runtime().decide(item_id, decision, actor=actor, reason=reason, text=text))
    click.echo(outcome.get("message", json.dumps(outcome)))


@review.command("approve")
@click.argument("item_id")
@actor_option
def review_approve(item_id: str, actor: str) -> None:
    """Approve ITEM_ID (skill:, persona:, note:, knowledge:, ...)."""
    _decide(item_id, "approve", actor)


@review.command("reject")
@click.argument("item_id")
@click.option("--reason", default="", help="Why (kept in the audit log).")
@actor_option
def review_reject(item_id: str, reason: str, actor: str) -> None:
    """Reject ITEM_ID."""
    _decide(item_id, "reject", actor, reason=reason)


@review.command("edit")
@click.argument("item_id")
@click.option("--text", required=True, help="The new text.")
@actor_option
def review_edit(item_id: str, text: str, actor: str) -> None:
    """Replace ITEM_ID's text (it stays pending until approved)."""
    _decide(item_id, "edit", actor, text=text)


@click.group("reflect", cls=HelpGroup)
def reflect_group() -> None:
    """Reflection: run it on a session, run the nightly job, inspect records and the audit log."""


def find_session(rt: Runtime, session_id: str) -> Session:
    """A session rebuilt from the working layer's transcript."""
    from .nightly import transcript_of

    rows = transcript_of(rt, session_id) if re.fullmatch(r"[\w\-]{1,100}", session_id) else []
    if not rows:
        raise ThothError(f"no transcript for session {session_id!r} (thoth reflect idle lists ended sessions)")
    first = next((r for r in rows if r.get("peer")), {})
    session = Session(
        str(first.get("workspace") or rt.config.get("thoth.workspace")),
        str(first.get("peer", "unknown")),
        str(first.get("thread", "unknown")),
        id=session_id,
        home=rt.home,
        runtime=rt,
        ended=True,
    )
    session.started_at = float(rows[0].get("at", session.started_at)) if rows else session.started_at
    session.transcript = [r for r in rows if r.get("type") in ("turn", "error", "tool")]
    return session


@reflect_group.command("session")
@click.argument("session_id")
@click.option("--again", is_flag=True, help="Reflect on every turn, also those a successful run already covered.")
def reflect_session(session_id: str, again: bool) -> None:
    """Reflect on one ended session's turns not reflected yet (from its working-layer transcript)."""

    from .reflect import reflect

    async def go() -> None:
        rt = runtime()
        session = find_session(rt, session_id)
        if not again and turns_in(session.transcript) and not turns_in(unreflected(state(rt).store, session)):
            raise ThothError(f"session {session_id} was already reflected on; pass --again to run it again")
        result = await reflect(session, "manual", runtime=rt, again=again)
        if result is None:
            raise ThothError(
                f"no reflection written for session {session_id}; see the log (-v) and `thoth reflect audit`"
            )
        click.echo(json.dumps(result, indent=2))

    run(go())


@reflect_group.command("idle")
def reflect_idle() -> None:
    """End and reflect on sessions idle past `[thoth] idle_minutes` that exited processes left (cron-friendly)."""
    ended = run(runtime().reap_idle())
    click.echo(json.dumps([{"session_id": s.id, "peer": s.peer, "thread": s.thread} for s in ended], indent=2))


@reflect_group.command("nightly")
@click.option("--now", "now_text", default=None, help="Pretend it is this ISO-8601 time (for catch-up runs and tests).")
def reflect_nightly(now_text: str | None) -> None:
    """Consolidate the day's sessions into the memory snapshot (cron-friendly, idempotent)."""
    from .nightly import run_nightly

    now = None
    if now_text:
        try:
            when = datetime.fromisoformat(now_text)
        except ValueError as exc:
            raise ThothError(f"--now: {now_text!r} is not an ISO-8601 time") from exc
        now = (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
    summary = run(run_nightly(runtime(), now=now))
    click.echo(json.dumps(summary, indent=2))


@reflect_group.command("records")
def reflect_records() -> None:
    """List transient reflection and validation records."""
    from .reflect import records

    for record in records(state(runtime())).all():
        click.echo(f"{record.id}  {record.path}")


@reflect_group.command("promote")
@click.argument("record_id")
@click.option(
    "--topic", default=None, help="Knowledge topic slug (transient records): the note goes to knowledge/<topic>.md."
)
@click.option("--text", default=None, help="Promote this text instead of the whole record (or its guideline).")
@actor_option
def reflect_promote(record_id: str, topic: str | None, text: str | None, actor: str) -> None:
    """Propose a record's promotion, queued for approval: a reflexion record (reflexion/NAME.md) becomes a
    guideline of the persona rules; a transient record becomes a knowledge note (needs --topic)."""
    from . import queue
    from .reflect import records

    async def go() -> str:
        st = state(runtime())
        reflexion = reflexion_files.locate(st.path(st.settings.reflexion_dir), record_id)
        if reflexion is not None:
            guideline = text or reflexion_files.guideline_of(reflexion)
            return queue.propose_guideline(st, record=reflexion.name, text=guideline, actor=actor)
        record = records(st).get(record_id)
        if record is None:
            raise ThothError(
                f"no record {record_id!r}: not in {st.path(st.settings.reflexion_dir)} (reflexion) nor in "
                f"{st.store.db.where if st.store.shared else Path(st.dir) / 'transient'} (see `thoth reflect records`)"
            )
        if not topic:
            raise ThothError(f"promoting transient record {record_id} needs --topic (the knowledge note's slug)")
        return queue.propose_promotion(st, record_id=record_id, topic=topic, text=text or record.text(), actor=actor)

    item_id = run(go())
    click.echo(f"queued {item_id}; approve it with `thoth review approve {item_id}`")


@reflect_group.command("audit")
@click.option("--run", "run_id", default=None, help="Only this run.")
@click.option("--json", "as_json", is_flag=True)
def reflect_audit(run_id: str | None, as_json: bool) -> None:
    """Show the permanent audit log."""
    entries = state(runtime()).store.audit_log(run_id=run_id)
    if as_json:
        click.echo(json.dumps(entries, indent=2))
        return
    for entry in entries:
        when = datetime.fromtimestamp(entry["at"]).isoformat(timespec="seconds")
        click.echo(
            f"{when} {entry['event']:<20} run {entry['run_id'] or '-'} session {entry['session_id'] or '-'} "
            f"{entry['actor'] or ''} {json.dumps(entry['payload'])[:200]}"
        )
