"""`thoth skills list|show|approve|reject`: the skill approval workflow from the command line."""

from __future__ import annotations

import asyncio
import getpass
import json
from typing import Any

import click

from thoth_core.cli import HelpGroup

from . import drafts
from .settings import Settings
from .skills import discover
from .validate import SkillError, check_slug


def _runtime() -> Any:
    from thoth_core.cli import runtime

    return runtime()


def _run(function: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a blocking workflow step the way every CLI command runs: then close the runtime."""
    from thoth_core.cli import run

    return run(asyncio.to_thread(function, *args, **kwargs))


actor_option = click.option(
    "--actor",
    default=getpass.getuser,
    show_default="your user name",
    help="Who decides (must be a founder when [thoth] founders is set).",
)


@click.group("skills", cls=HelpGroup)
def skills() -> None:
    """Skills: list installed ones and pending drafts, show one, approve or reject a draft."""


@skills.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_command(as_json: bool) -> None:
    """List installed skills and pending drafts."""
    rt = _runtime()
    settings = Settings.of(rt)
    catalog = discover(settings.skills, settings.limits)
    pending = _run(drafts.list_drafts, rt)
    if as_json:
        out = {
            "skills": [{"slug": s.slug, "description": s.description} for s in catalog.skills],
            "invalid": catalog.errors,
            "drafts": [d.as_item() for d in pending],
        }
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"Installed ({settings.skills}):")
    for skill in catalog.skills:
        click.echo(f"  {skill.slug:<28} {skill.description}")
    for error in catalog.errors:
        click.echo(f"  INVALID {error}")
    click.echo(f"Pending drafts ({settings.drafts}):")
    for draft in pending:
        flags = f"  FLAGGED: {', '.join(draft.flags)}" if draft.flags else ""
        click.echo(f"  {draft.slug:<28} {draft.description or draft.error}{flags}")
    if not pending:
        click.echo("  none")


@skills.command("show")
@click.argument("slug")
def show(slug: str) -> None:
    """Print a pending draft's (else an installed skill's) SKILL.md."""
    settings = Settings.of(_runtime())
    check_slug(slug)
    for folder, label in ((settings.drafts / slug, "pending draft"), (settings.skills / slug, "installed skill")):
        if (folder / "SKILL.md").is_file():
            click.echo(f"# {label}: {folder}", err=True)
            click.echo((folder / "SKILL.md").read_text(encoding="utf-8"), nl=False)
            return
    raise SkillError(f"no skill or draft {slug!r} in {settings.skills} or {settings.drafts}")


@skills.command("approve")
@click.argument("slug")
@actor_option
def approve(slug: str, actor: str) -> None:
    """Install a pending draft into the skills folder (and commit it with git)."""
    decision = _run(drafts.approve_draft, _runtime(), slug, actor=actor)
    click.echo(decision.message)


@skills.command("reject")
@click.argument("slug")
@click.option("--reason", required=True, help="Why; kept with the archived draft and in the audit log.")
@actor_option
def reject(slug: str, reason: str, actor: str) -> None:
    """Archive a pending draft with the reason."""
    archive = _run(drafts.reject, _runtime(), slug, actor=actor, reason=reason)
    click.echo(f"rejected skill {slug}: archived in {archive}")
