"""The REST API's request and response bodies (pydantic): what `/openapi.json` documents."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_TEXT = 20_000  # characters of a fact, note or message a request may carry


class Open(BaseModel):
    """A body that may carry more keys than it names (a plugin's extra fields are passed on)."""

    model_config = ConfigDict(extra="allow")


class ErrorOut(BaseModel):
    """Every 4xx/5xx answer: one line naming the key or value."""

    error: str


class HealthOut(BaseModel):
    status: Literal["ok"] = "ok"
    version: str
    home: str
    pid: int
    plugins: list[str]
    peer: str | None = Field(None, description="The peer the service is pinned to (--peer), if any.")
    workspace: str = Field(description="The default workspace (--workspace, else thoth.toml's).")


class TextIn(BaseModel):
    text: str = Field(min_length=1, max_length=MAX_TEXT, description="The fact, note or message.")
    thread: str | None = Field(None, description="The thread it belongs to (default `api`).")


class TurnIn(TextIn):
    turn_id: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_.:-]{1,64}$",
        description="An id of the client's choosing: a retry with the same id (after a lost connection) is kept once.",
    )
    saved: bool = Field(
        False,
        description="Wait for the turn's post-turn writes (at most `[thoth] exit_deadline` s) and say what could "
        "not save it: a last `saved` event {failed, message}, or `not_saved` in the JSON answer.",
    )


class RememberOut(BaseModel):
    answer: str = Field(description="What /remember answered.")
    peer: str
    workspace: str
    thread: str


class RecallHitOut(Open):
    layer: str
    kind: str
    id: str
    text: str
    score: float | None = None
    why: dict[str, Any] = Field(default_factory=dict, description="The signals it matched on.")
    at: float | None = None
    plugin: str
    fused: dict[str, Any] = Field(
        default_factory=dict, description="Its place in the one list: score, rank in its layer, rank by meaning."
    )


class PluginFailure(BaseModel):
    plugin: str
    status: str
    error: str | None = None


class RecallOut(BaseModel):
    peer: str
    workspace: str
    query: str
    hits: list[RecallHitOut]
    failed: list[PluginFailure]


class ToolOut(BaseModel):
    """A memory tool's definition, as a turn's model is given it (`thoth_core.memory_tools.SCHEMAS`)."""

    name: str
    description: str
    input_schema: dict[str, Any] = Field(description="The JSON schema of the tool's input.")


class ToolAnswerOut(BaseModel):
    tool: str
    peer: str
    workspace: str
    text: str = Field(description="The tool's answer, as the model reads it (`error: ...` when it refused).")


class ContextIn(BaseModel):
    message: str = Field(min_length=1, max_length=MAX_TEXT)
    thread: str | None = None


class ContextOut(BaseModel):
    peer: str
    workspace: str
    thread: str
    tokens: int
    budget: int
    system: str = Field(description="The rendered system prompt, as `thoth context` prints it (empty: no blocks).")
    blocks: list[dict[str, Any]] = Field(description="As `thoth context --json`: each block with its token count.")
    cut: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    tools: list[dict[str, Any]] = Field(default_factory=list, description="The model's tool calls (none here).")


class TurnOut(BaseModel):
    reply: str
    turn_id: str
    model: str
    usage: dict[str, Any]
    tools: list[dict[str, Any]] = Field(
        default_factory=list, description="The model's tool calls: name, plugin, result tokens, ms, status."
    )
    cut_short: bool
    thread: str
    error: str | None = Field(None, description="A slash command's one-line error.")
    not_saved: str | None = Field(None, description="With `saved`: the line saying which layers could not save it.")


class RecordOut(Open):
    layer: str
    kind: str
    id: str
    text: str
    at: float
    plugin: str | None = None
    editable: bool | None = None
    meta: dict[str, Any] | None = None
    history: list[dict[str, Any]] | None = None


class RecordsOut(BaseModel):
    records: list[RecordOut]


class EditIn(BaseModel):
    text: str = Field(min_length=1, max_length=MAX_TEXT, description="The corrected text.")


class DeletedOut(BaseModel):
    id: str
    deleted: bool


class ForgetIn(BaseModel):
    confirm: bool = Field(False, description="Must be true: the deletion cannot be undone.")
    thread: str | None = Field(None, description="Only this thread; default: all of the peer's data.")


class ForgetOut(BaseModel):
    peer: str
    workspace: str
    thread: str | None
    receipt: dict[str, dict[str, int]]


class ApprovalsOut(BaseModel):
    items: list[dict[str, Any]]


class DecideIn(BaseModel):
    decision: Literal["approve", "reject"]
    peer: str | None = Field(None, description="Who decides (default: the pinned peer).")
    reason: str = ""
    text: str | None = Field(None, max_length=MAX_TEXT, description="The item as edited, when approving.")


class DecideOut(BaseModel):
    item_id: str
    decision: str
    outcome: dict[str, Any]


class ImportOut(BaseModel):
    added: dict[str, dict[str, int]]
    written: list[str]
    unchanged: list[str]
    kept: list[str]
    unread: dict[str, int]


class MetricsOut(BaseModel):
    uptime_s: float
    pid: int
    counts: dict[str, int]
    latency: dict[str, dict[str, int | float]] = Field(description="Per kind: n, median_ms, p95_ms.")
    samples: list[dict[str, Any]] = Field(description="Recent {at, kind, ms}, oldest first.")
    layers: list[dict[str, Any]] = Field(default_factory=list, description="Each layer's counts (with ?peer=).")
