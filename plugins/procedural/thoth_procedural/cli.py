"""`thoth skills list|show|approve|reject`: the skill approval workflow from the command line.

Drafts are listed, shown and decided through the runtime, so the approvals policy decides what
`--actor` may see and do, exactly as in every other frontend.
"""

from __future__ import annotations

import getpass
import json
from typing import TYPE_CHECKING, Any

import click

from thoth_core.cli import HelpGroup

from . import drafts
from .settings import Settings
from .shared import sync_skills
from .skills import discover
from .validate import SkillError, check_slug

if TYPE_CHECKING:
    from thoth_core import Runtime


def _runtime() -> Runtime:
    from thoth_core.cli import runtime

    return runtime()


def _run_async(work: Any) -> Any:
    """Run the command's one coroutine the way every CLI command runs: then close the runtime."""
    from thoth_core.cli import run

    return run(work)


actor_option = click.option(
    "--actor",
    default=getpass.getuser,
    show_default="your user name",
    help="Who you are: a decider ([thoth] founders, else the home's owner) sees and decides every draft, "
    "anyone else only drafts from their own sessions, and may only withdraw (reject) those.",
)


async def _visible_drafts(rt: Runtime, actor: str) -> list[dict[str, Any]]:
    """The skill drafts the approvals policy lets actor see."""
    return [item for item in await rt.approvals(actor=actor) if item.get("kind") == "skill"]


def _decide(name: str, decision: str, actor: str, reason: str = "") -> str:
    """A decision on a draft (named by key, or by slug when only one draft has it), through the runtime."""
    from thoth_core.cli import run

    rt = _runtime()
    key = drafts.resolve_key(rt, name)
    outcome = run(rt.decide(f"skill:{key}", decision, actor=actor, reason=reason))
    return str(outcome.get("message", f"{decision}: skill:{key}"))


@click.group("skills", cls=HelpGroup)
def skills() -> None:
    """Skills: list installed ones and pending drafts, show one, approve or reject a draft."""


@skills.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@actor_option
def list_command(as_json: bool, actor: str) -> None:
    """List installed skills and the pending drafts --actor may see."""
    rt = _runtime()
    settings = Settings.of(rt)
    sync_skills(rt)  # skills approved on other hosts, with a shared store
    catalog = discover(settings.skills, settings.limits)
    pending = _run_async(_visible_drafts(rt, actor))
    if as_json:
        out = {
            "skills": [{"slug": s.slug, "description": s.description} for s in catalog.skills],
            "invalid": catalog.errors,
            "drafts": pending,
        }
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"Installed ({settings.skills}):")
    for skill in catalog.skills:
        click.echo(f"  {skill.slug:<28} {skill.description}")
    for error in catalog.errors:
        click.echo(f"  INVALID {error}")
    click.echo(f"Pending drafts ({drafts.drafts_where(rt)}):")
    for item in pending:
        flags = f"  FLAGGED: {', '.join(item['flags'])}" if item.get("flags") else ""
        click.echo(f"  {str(item['id']).removeprefix('skill:'):<28} {item['title']}{flags}")
    if not pending:
        click.echo("  none")


@skills.command("show")
@click.argument("name")
@actor_option
def show(name: str, actor: str) -> None:
    """Print a pending draft's (by key, or slug when only one draft has it), else an installed skill's, SKILL.md."""
    rt = _runtime()
    settings = Settings.of(rt)
    key = drafts.resolve_key(rt, name)
    visible = {str(item["id"]) for item in _run_async(_visible_drafts(rt, actor))}
    draft = drafts.find_draft(rt, key) if f"skill:{key}" in visible else None
    if draft is not None and draft.text:
        click.echo(f"# pending draft: {draft.where or draft.path}", err=True)
        click.echo(draft.text, nl=False)
        return
    sync_skills(rt)
    folder = settings.skills / check_slug(name) if "--" not in name else None
    if folder is not None and (folder / "SKILL.md").is_file():
        click.echo(f"# installed skill: {folder}", err=True)
        click.echo((folder / "SKILL.md").read_text(encoding="utf-8"), nl=False)
        return
    where = drafts.drafts_where(rt)
    raise SkillError(f"no skill or draft {name!r} that {actor} may see in {settings.skills} or {where}")


@skills.command("approve")
@click.argument("name")
@actor_option
def approve(name: str, actor: str) -> None:
    """Install a pending draft (by key, or slug when only one draft has it) into the skills folder, commit it."""
    click.echo(_decide(name, "approve", actor))


@skills.command("reject")
@click.argument("name")
@click.option("--reason", required=True, help="Why; kept with the archived draft and in the audit log.")
@actor_option
def reject(name: str, reason: str, actor: str) -> None:
    """Archive a pending draft (by key, or slug when only one draft has it) with the reason."""
    click.echo(_decide(name, "reject", actor, reason=reason))
