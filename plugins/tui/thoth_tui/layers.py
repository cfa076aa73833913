"""The layers panel: the five layers, what each gave the last turn, and their counts."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from thoth_core import LAYERS, LayerStatus
from thoth_core.budget import block_tokens
from thoth_core.types import layer_label

if TYPE_CHECKING:
    from thoth_core import Runtime

HIDDEN_STATUS_KEYS = {"layer", "plugin"}
WITHOUT_CONTEXT = "turns without context"  # a status key (the working layer's): what recent turns went without
WIDTH = 34  # the panel's text width: 40 columns less border, padding and a scrollbar


@dataclass
class LayerView:
    """What the panel shows for one layer (or for one plugin outside the five layers)."""

    layer: str
    state: str  # on, disabled, not installed
    plugins: list[str] = field(default_factory=list)
    blocks: list[tuple[str, int]] = field(default_factory=list)  # (tag, tokens)
    seconds: float | None = None
    failures: list[str] = field(default_factory=list)
    cuts: list[str] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    budget: int | None = None
    alerts: list[str] = field(default_factory=list)  # failures of recent turns, shown with or without a last turn


def layer_views(runtime: Runtime, statuses: list[LayerStatus]) -> list[LayerView]:
    """The five layers in order, then each other plugin that reported or contributed, under its own name.

    Blocks and cuts stay with the layer whose budget they count against; a status belongs to a
    layer only when the plugin is that layer (the blackboard's signals are not L1's).
    """
    budgets = runtime.config.layer_budgets
    views = {layer: LayerView(layer, "not installed", budget=budgets.get(layer)) for layer in LAYERS}
    others: dict[str, LayerView] = {}
    disabled = {name for name, info in runtime.pm.info.items() if not info.enabled}
    for name in disabled & set(LAYERS):
        views[name].state = "disabled"
    for name, _ in runtime.pm.list_name_plugin():
        view = views.get(runtime.layer_of(name))
        if view is not None:
            view.state = "on"
            view.plugins.append(name)

    def view_of(layer: str, plugin: str) -> LayerView:
        if layer in views:
            return views[layer]
        return others.setdefault(plugin, LayerView(plugin, "on", plugins=[plugin]))

    for status in statuses:
        counts = {k: v for k, v in status.items() if k not in HIDDEN_STATUS_KEYS}
        plugin = str(status["plugin"])
        view = views[plugin] if plugin in views else view_of("other", plugin)
        missing = counts.pop(WITHOUT_CONTEXT, None)
        if missing:
            view.alerts.append(f"{WITHOUT_CONTEXT}: {missing}")
        view.counts.update(counts)
    assembly = runtime.last.assembly if runtime.last is not None else None
    if assembly is not None:
        for block in assembly.blocks:
            view_of(block.layer, block.plugin).blocks.append((block.tag, block_tokens(block)))
        for call in assembly.calls:
            view = view_of(runtime.layer_of(call.plugin), call.plugin)
            view.seconds = max(view.seconds or 0.0, call.seconds)
            if call.status != "ok":
                view.failures.append(f"{call.plugin} {call.status}")
        for cut in assembly.cuts:
            cut_text = f"{cut.tag} {cut.tokens}->{cut.kept_tokens}\n      by {cut.reason}"
            view_of(cut.layer, cut.plugin).cuts.append(cut_text)
    shown = [views[layer] for layer in LAYERS]
    extra = [v for v in others.values() if v.blocks or v.cuts or v.counts or v.failures or v.alerts]
    return shown + extra


def render(views: list[LayerView], *, pending: int, has_turn: bool) -> Text:
    """The panel's text: one section per layer, then one per other plugin."""
    text = Text()
    for number, view in enumerate(views, start=1):
        is_layer = number <= len(LAYERS)
        title = layer_label(view.layer) if is_layer else view.layer
        style = {"on": "bold", "disabled": "dim strike", "not installed": "dim"}[view.state]
        text.append(title, style=style)
        text.append("\n")
        if view.state != "on":  # on a line of its own: a title with its Sefirah leaves no room
            text.append(f"  {view.state}", style="italic dim")
            text.append("\n")
        if view.counts:
            counts = ", ".join(f"{k} {v}" for k, v in view.counts.items())
            text.append("\n".join(textwrap.wrap(counts, WIDTH, initial_indent="  ", subsequent_indent="  ")) + "\n")
        for alert in view.alerts:
            text.append(
                "\n".join(textwrap.wrap(alert, WIDTH, initial_indent="  ", subsequent_indent="    ")) + "\n",
                style="red",
            )
        if has_turn and view.state == "on" and (is_layer or view.blocks or view.seconds is not None):
            time = f" in {view.seconds * 1000:.0f} ms" if view.seconds is not None else ""
            total = sum(tokens for _, tokens in view.blocks)
            budget = f"/{view.budget}" if view.budget is not None else ""
            text.append(f"  last turn: {total}{budget} tokens{time}\n", style="cyan")
            for tag, tokens in view.blocks:
                text.append(f"    <{tag}> {tokens}\n")
            for cut in view.cuts:
                text.append(f"    cut {cut}\n", style="yellow")
            for failure in view.failures:
                text.append(f"    {failure}\n", style="red")
    text.append(f"pending approvals: {pending}", style="bold")
    return text


class LayersPanel(VerticalScroll):
    """A side panel that makes the architecture visible."""

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static("Layers", classes="title")
        yield Static(id="layers-body")

    async def refresh_from(self, runtime: Runtime, *, peer: str, workspace: str) -> None:
        """Re-read statuses, approvals and the last turn's assembly."""
        statuses = await runtime.status(peer=peer, workspace=workspace)
        pending = len(await runtime.approvals(actor=peer, workspace=workspace))
        body = render(layer_views(runtime, statuses), pending=pending, has_turn=runtime.last is not None)
        self.query_one("#layers-body", Static).update(body)
