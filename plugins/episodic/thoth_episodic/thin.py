"""`thoth recall` as a client of the home's running service (`thoth serve`): the same lines, no store loaded.

The service's `GET /v1/peers/PEER/episodes/search` answers the episodic layer's recall hits (its
`recall` hook: the episode's words, thread, time and why it matched); each is printed as the
command in-process prints it (explain.py). `--json` and `--as-of` (whole episodes, a past state of
the store), a hit the service could not give, and a service not reached in time: in-process.
"""

from __future__ import annotations

import sys
from urllib.parse import quote

from thoth_core.service import Service
from thoth_core.thin import CONTEXT_WAIT, parse_args, write

from .explain import explain_line

LAYER = "episodic"  # as plugin.LAYER (not imported: the plugin module imports the store)


def main(service: Service, args: list[str]) -> int | None:
    """`thoth recall QUERY --peer P [--workspace W] [--k N]` through the service; None to run it in-process."""
    parsed = parse_args(args, values=("--peer", "--workspace", "--k", "--as-of"), flags=("--json",), positional=1)
    if parsed is None:
        return None
    (query,), options = parsed
    peer, k = options.get("--peer"), str(options.get("--k", "5"))
    if not isinstance(peer, str) or "--json" in options or "--as-of" in options or not k.isdigit() or not query.strip():
        return None
    service.get("/v1/health")  # a hung service is found out within the connect timeout
    path = f"/v1/peers/{quote(peer, safe='')}/episodes/search"
    found = service.get(path, wait=CONTEXT_WAIT, q=query, k=k, workspace=options.get("--workspace"))
    hits = [hit for hit in found.get("hits", []) if hit.get("plugin") == LAYER or hit.get("layer") == LAYER]
    if found.get("failed") or any(not isinstance(hit.get("why"), dict) or "thread" not in hit for hit in hits):
        return None  # the layer failed, or answers without what a line shows: in-process says it its own way
    lines = [
        explain_line(
            i,
            at=float(hit["at"]),
            peer=peer,
            thread=str(hit["thread"]),
            words=str(hit["text"]),
            dense=hit.get("dense", hit["why"].get("dense")),
            bm25_rank=hit["why"].get("bm25_rank"),
        )
        for i, hit in enumerate(hits, 1)
    ]
    write("".join(line + "\n" for line in lines) or "No related episodes.\n")
    sys.stdout.flush()
    return 0


__all__ = ["main"]
