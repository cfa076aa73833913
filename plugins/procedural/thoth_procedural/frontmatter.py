"""StrictYAML's data for each frontmatter text, remembered in the agent's data folder.

A session start reads the frontmatter of every skill and reflexion record; importing strictyaml
and parsing them took ~95 ms of a cold `thoth ask` (its longest session-start hook). The data is
keyed by the frontmatter's own text, so an edited file is parsed again and nothing goes stale; a
text that fails to parse is never remembered, so its error comes every time. The file keeps the
`KEPT` texts used most recently.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
from pathlib import Path
from typing import Any

from thoth_core import ThothError
from thoth_core.storage import write_atomic

logger = logging.getLogger(__name__)

KEPT = 256
FILE = "frontmatter.json"

_parsed: dict[str, Any] = {}  # frontmatter text -> its data, least recently used first
_loaded: set[Path] = set()
_changed = False
_lock = threading.Lock()


def yaml_data(text: str) -> Any:
    """StrictYAML's data for a frontmatter text, parsed once; ValueError, in StrictYAML's words, when it is not YAML."""
    global _changed
    with _lock:
        if text in _parsed:
            _parsed[text] = _parsed.pop(text)
            return copy.deepcopy(_parsed[text])
    import strictyaml  # imported here: ~60 ms, paid only when some frontmatter is new

    try:
        data = strictyaml.load(text).data if text.strip() else {}
    except strictyaml.YAMLError as exc:
        raise ValueError(" ".join(str(exc).split())) from exc
    with _lock:
        _parsed[text] = data
        while len(_parsed) > KEPT:
            del _parsed[next(iter(_parsed))]
        _changed = True
    return copy.deepcopy(data)


def recall(folder: Path) -> None:
    """Take in what an earlier process of this agent parsed (once a process; a missing or bad file is none)."""
    path = folder / FILE
    with _lock:
        if path in _loaded:
            return
        _loaded.add(path)
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        logger.debug("procedural: ignoring %s: %s", path, exc)
        return
    if isinstance(stored, dict):
        with _lock:
            merged = {**stored, **_parsed}  # what this process parsed stays the most recent
            _parsed.clear()
            _parsed.update(merged)


def remember(folder: Path) -> None:
    """Write what this process parsed for later ones, when it parsed anything new."""
    global _changed
    with _lock:
        if not _changed:
            return
        _changed = False
        snapshot = dict(_parsed)
    try:
        write_atomic(folder / FILE, json.dumps(snapshot))
    except (OSError, TypeError, ValueError) as exc:  # a cache: the next start parses again
        logger.debug("procedural: could not write %s: %s", folder / FILE, exc)


def forget(folder: Path) -> None:
    """Drop everything remembered, here and in the file: a forgotten peer's draft may have been parsed."""
    global _changed
    with _lock:
        _parsed.clear()
        _changed = False
    try:
        (folder / FILE).unlink(missing_ok=True)
    except OSError as exc:
        raise ThothError(f"procedural: could not delete {folder / FILE}: {exc}") from exc
