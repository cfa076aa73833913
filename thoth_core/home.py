"""Agent homes: the folder with `thoth.toml`, the persona, skills and notes of one agent.

`thoth init DIR` makes one from the templates installed with the core and the plugins
(each plugin writes its defaults in `init_home`), as a git repository so that approved skills
are committed there. Commands find the home like git finds a repository: `$THOTH_CONFIG`,
else the nearest `thoth.toml` in the working directory or its parents.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

import pluggy

from ._calls import call_sync
from .config import CONFIG_NAME, Config
from .errors import ThothError
from .git import git_init, tracks_files

DATA_DIR = ".thoth"  # the home's own data ([thoth] home in the template), ignored by git
GITIGNORE = f"""# Thoth: data and drafts stay out of the agent's history
{DATA_DIR}/
.claude/skill-drafts/
__pycache__/
"""

RUNNING_WITHOUT_HOME = "; running with built-in defaults: no persona, skills or notes"


def default_home(config: Config) -> Path:
    """Where data lives: `$THOTH_HOME`, `[thoth] home`, else the per-user app dir."""
    if os.environ.get("THOTH_HOME"):
        return Path(os.environ["THOTH_HOME"]).expanduser()
    if config.get("thoth.home"):
        return (config.root / str(config.get("thoth.home"))).expanduser()
    import click

    return Path(click.get_app_dir("thoth"))


def no_home_hint(*, running: bool = True) -> str:
    """The one line commands print outside an agent home (`running`: and that they go on with defaults)."""
    return (
        f"no agent home here (no {CONFIG_NAME} in {os.getcwd()} or its parents)"
        f"{RUNNING_WITHOUT_HOME if running else ''}. "
        "Make one with `thoth init DIR` and run thoth inside it, or set THOTH_CONFIG."
    )


@dataclass
class InitReport:
    """What `thoth init` did: the files it wrote (relative to root) and the commit it made."""

    root: Path
    written: list[str] = field(default_factory=list)
    commit: str | None = None


def init_home(root: Path, pm: pluggy.PluginManager) -> InitReport:
    """Create (or complete) an agent home at root; existing files are never overwritten."""
    if not (root / CONFIG_NAME).exists() and tracks_files(root):
        raise ThothError(
            f"{root.resolve()}: a git repository with files of its own (a source checkout?); an agent home is a "
            "repository of its own, so run `thoth init` on a new folder"
        )
    root.mkdir(parents=True, exist_ok=True)
    report = InitReport(root.resolve())
    core_files = {
        CONFIG_NAME: files("thoth_core").joinpath("templates", CONFIG_NAME).read_text(encoding="utf-8"),
        ".gitignore": GITIGNORE,
    }
    for name, text in core_files.items():
        if not (root / name).exists():
            (root / name).write_text(text, encoding="utf-8")
            report.written.append(name)
    for _plugin, written in call_sync(pm, "init_home", root=report.root):
        report.written += written or []
    if report.written:
        report.commit = git_init(report.root, "Create agent home (thoth init)", report.written)
    return report
