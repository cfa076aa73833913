"""Claude's memory tool (`memory_20250818`) on the five layers: `/memories` is what Thoth holds about the speaker.

The model sees one directory, always the session's peer's, whatever the path says:

- `/memories` lists one file per layer that holds records of the peer: `/memories/identity.md`,
  `/memories/working.md`, `/memories/episodic.md`, `/memories/procedural.md`, `/memories/reflection.md`
  (and a plugin's own name for a record of no layer).
- `view /memories/<layer>.md` shows that layer's records, newest first, one a line: `[id] text`
  (the ids `recall` and `correct` use), numbered as the SDK's file tool numbers lines.
- `create` (any `/memories/<name>.md`) and `insert` (any file) keep each non-empty line of the text
  as `remember` does: a plain fact about the peer at once, anything else held for a person. The
  whole text is refused when it holds a secret (also one spread over lines) or cannot be stored,
  or has more than 20 lines.
- `str_replace` in a layer's file changes the one record whose line holds `old_str`, as `correct`
  does: held for a person unless the policy allows it.
- `delete` and `rename` are refused: forgetting is the person's own act (`/forget`, `/correct ID delete`).

A path must be `/memories` or a file in it: anything else (`..`, a subfolder, a backslash, a NUL, a
path over 255 characters) is refused with one line. The SDK's own helper classes
(`anthropic.lib.tools.BetaAbstractMemoryTool`) are not used: the core does not depend on the SDK, and
the commands are plain JSON; the answers follow the wording of its file-backed tool.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .budget import count_tokens, truncate
from .memory_tools import ToolSettings, correct, remember, write_problem
from .types import MemoryRecord, Session, Turn

if TYPE_CHECKING:
    from .runtime import Runtime

TOOL = {"type": "memory_20250818", "name": "memory"}
ROOT = "/memories"
FILE = re.compile(r"/memories/([A-Za-z0-9][A-Za-z0-9_.-]{0,63})\.md")  # matched whole (`fullmatch`)
PATHS = {"rename": ("old_path", "new_path")}  # the paths a command names; the others name `path`
LINES = 20  # lines one create or insert may keep
SHOWN = 200  # records a layer's file shows at most
LINE_NUMBER_WIDTH = 6
REFUSED_DELETE = (
    "error: memory is not deleted on a model's word here; the person can forget it themselves (/forget, or "
    "/correct ID delete)"
)


class MemoryFiles:
    """The memory tool's commands for one session's peer, on the layers' records."""

    def __init__(self, runtime: Runtime, turn: Turn, session: Session, settings: ToolSettings) -> None:
        self.runtime, self.turn, self.session, self.settings = runtime, turn, session, settings

    async def __call__(self, command: Any) -> str:
        """Run one command (`{"command": "view", "path": ...}`); its answer to the model."""
        if not isinstance(command, dict):
            return "error: the memory tool takes a JSON object"
        name = command.get("command")
        paths = [command.get(key) for key in PATHS.get(str(name), ("path",))]
        problem = next((p for p in map(path_problem, paths) if p), None)
        if problem:
            return f"error: {problem}"
        if name == "view":
            return await self.view(str(command["path"]), command.get("view_range"))
        if name == "create":
            return await self.keep(str(command["path"]), command.get("file_text"))
        if name == "insert":
            return await self.keep(str(command["path"]), command.get("insert_text"))
        if name == "str_replace":
            return await self.replace(str(command["path"]), command.get("old_str"), command.get("new_str"))
        if name == "delete":
            return REFUSED_DELETE
        if name == "rename":
            return "error: the memory files are the memory layers; they cannot be renamed"
        return f"error: unknown memory command {name!r}; one of view, create, str_replace, insert, delete, rename"

    async def records(self, layer: str | None = None) -> list[MemoryRecord]:
        """The peer's records (of one layer), newest first."""
        return await self.runtime.records(
            peer=self.session.peer, workspace=self.session.workspace, layer=layer, limit=SHOWN
        )

    async def view(self, path: str, view_range: Any) -> str:
        """The directory (one file per layer), or a layer's records as numbered lines."""
        if path.rstrip("/") == ROOT:
            layers: dict[str, int] = {}
            for record in await self.records():
                layers[record["layer"]] = layers.get(record["layer"], 0) + len(line_of(record)) + 1
            listing = [f"{_size(sum(layers.values()))}\t{ROOT}"]
            listing += [f"{_size(size)}\t{ROOT}/{layer}.md" for layer, size in sorted(layers.items())]
            return f"Here're the files and directories up to 2 levels deep in {ROOT}, excluding hidden items:\n" + (
                "\n".join(listing)
            )
        records = await self.layer_records(path)
        if records is None:
            return f"error: the path {path} does not exist; `view {ROOT}` lists the files"
        lines = [line_of(record) for record in records]
        start, end = 1, len(lines)
        if isinstance(view_range, list) and len(view_range) == 2 and all(isinstance(n, int) for n in view_range):
            start, end = max(1, view_range[0]), len(lines) if view_range[1] == -1 else view_range[1]
        shown = [f"{str(n).rjust(LINE_NUMBER_WIDTH)}\t{lines[n - 1]}" for n in range(start, min(end, len(lines)) + 1)]
        text = f"Here's the content of {path} with line numbers:\n" + "\n".join(shown)
        if count_tokens(text) > self.settings.result_tokens:
            text = truncate(text, self.settings.result_tokens) + "\n[cut: view a line range for the rest]"
        return text

    async def layer_records(self, path: str) -> list[MemoryRecord] | None:
        """The records a layer's file shows; None when the path names no layer holding any."""
        match = FILE.fullmatch(path)
        if match is None:
            return None
        records = await self.records(match.group(1))
        return records or None

    async def keep(self, path: str, text: Any) -> str:
        """Remember each non-empty line of the text (`create`, `insert`), as the `remember` tool does."""
        if FILE.fullmatch(path) is None:
            return f"error: {path} is not a file of {ROOT} (a name like {ROOT}/notes.md)"
        if not isinstance(text, str) or not text.strip():
            return "error: there is no text to keep"
        problem = write_problem(self.runtime, text, self.settings)  # the whole text: nothing of it is kept
        if problem:
            return f"error: {problem}"
        lines = [line for line in (line.strip().lstrip("-*").strip() for line in text.splitlines()) if line]
        if len(lines) > LINES:
            return f"error: {len(lines)} lines; one write keeps at most {LINES}, one memory a line"
        answers = [await remember(self.runtime, self.turn, self.session, line, self.settings) for line in lines]
        return f"{path}: each line is kept as a memory about {self.session.peer}:\n" + "\n".join(
            f"- {answer}" for answer in answers
        )

    async def replace(self, path: str, old: Any, new: Any) -> str:
        """Change the one record whose line holds `old`, as the `correct` tool does."""
        if not isinstance(old, str) or not old or not isinstance(new, str):
            return "error: str_replace needs old_str and new_str"
        records = await self.layer_records(path)
        if records is None:
            return f"error: the path {path} does not exist; `view {ROOT}` lists the files"
        hits = [record for record in records if old in line_of(record)]
        if not hits:
            return f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}."
        if len(hits) > 1:
            return f"No replacement was performed. Multiple records hold old_str `{old}`; please make it unique"
        record = hits[0]
        changed = line_of(record).replace(old, new, 1).removeprefix(f"[{record['id']}]").strip()
        if not changed:
            return "error: the record's new text is empty"
        problem = write_problem(self.runtime, changed, self.settings)
        if problem:
            return f"error: {problem}"
        return await correct(self.runtime, self.session, record["id"], changed, self.settings)


def line_of(record: MemoryRecord) -> str:
    """A record as one line of its layer's file."""
    return f"[{record['id']}] " + " ".join(str(record["text"]).split())


def path_problem(path: Any) -> str | None:
    """Why a path is refused (outside `/memories`, a traversal, not text); None for a path in it."""
    if not isinstance(path, str) or not path:
        return "a path is required"
    if len(path) > 255 or "\x00" in path or "\\" in path:
        return f"the path {path[:80]!r} is refused (too long, a NUL or a backslash)"
    parts = path.split("/")
    if ".." in parts or "." in parts:
        return f"the path {path!r} is refused: it would leave {ROOT}"
    if path.rstrip("/") != ROOT and not path.startswith(ROOT + "/"):
        return f"the path must start with {ROOT}, got {path!r}"
    return None


def _size(chars: int) -> str:
    """A size as the SDK's file tool shows it."""
    return f"{chars / 1024:.1f}K" if chars >= 1024 else f"{chars}"
