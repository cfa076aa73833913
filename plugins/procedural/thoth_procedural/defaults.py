"""The default agent home this plugin ships: persona stack, skills, knowledge and reflexion notes.

They are package data (`thoth_procedural/defaults/`), copied into a new home by `thoth init`.
"""

from __future__ import annotations

from importlib.resources import as_file, files
from pathlib import Path

from .settings import FOLDERS

SHIPPED = {
    "persona": FOLDERS["persona_dir"],
    "skills": FOLDERS["skills_dir"],
    "knowledge": FOLDERS["knowledge_dir"],
    "reflexion": FOLDERS["reflexion_dir"],
}


def copy_defaults(root: Path) -> list[str]:
    """Copy the shipped files into root's default folders, never over an existing file; returns what was written."""
    written = []
    with as_file(files(__package__).joinpath("defaults")) as shipped:
        for source, target in SHIPPED.items():
            for path in sorted((shipped / source).rglob("*")):
                destination = root / target / path.relative_to(shipped / source)
                if path.is_dir():
                    destination.mkdir(parents=True, exist_ok=True)  # a skill's empty src/ is part of its shape
                elif "__pycache__" not in path.parts and not destination.exists():
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    destination.write_bytes(path.read_bytes())
                    written.append(destination.relative_to(root).as_posix())
    return written
