"""Identity memory's part of `thoth bundle`: one `thoth identity export` document per peer."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from thoth_core import BundleSection, ThothError, hookimpl

from .backend import IdentityBackend
from .layer import backend_for

if TYPE_CHECKING:
    from thoth_core import Runtime

SECTION = "identity"
VERSION = 1


def held_peers(backend: IdentityBackend) -> list[tuple[str, str]]:
    """Every (workspace, peer) the store holds anything about."""
    return backend.store.held_peers()


@hookimpl
def bundle_export(runtime: Runtime) -> BundleSection:
    """Each peer's export document (facts with history, observations, messages; Honcho's data too)."""
    backend = backend_for(runtime)
    peers = held_peers(backend)

    def documents() -> Iterator[dict[str, Any]]:
        for workspace, peer in peers:
            yield backend.export(workspace, peer)

    return {"name": SECTION, "version": VERSION, "count": len(peers), "records": documents()}


@hookimpl
def bundle_import(section: dict[str, Any], runtime: Runtime, progress: Callable[[int], None]) -> dict[str, int] | None:
    """Add each peer's document (rows already held are skipped); counts added, summed over the peers that gained any."""
    from thoth_core.bundle import own_section

    if not own_section(section, SECTION, VERSION):
        return None
    backend = backend_for(runtime)
    totals: dict[str, int] = {"peers": 0}
    for number, document in enumerate(section["records"], 1):
        workspace, peer = document.get("workspace"), document.get("peer")
        if not isinstance(workspace, str) or not isinstance(peer, str):
            raise ThothError(f"bundle section {SECTION}: record {number}: no workspace and peer")
        try:
            added = backend.import_document(document, workspace=workspace, peer=peer)
        except ThothError as exc:
            raise ThothError(f"bundle section {SECTION}: record {number} ({peer}): {exc}") from exc
        totals["peers"] += any(added.values())
        for what, n in added.items():
            totals[what] = totals.get(what, 0) + n
        progress(1)
    return totals
