"""One recall hit as one line of at most 80 columns (`/recall`, `thoth recall`): standard library only.

Kept apart from memory.py so that `thoth recall`'s thin client (thin.py) prints the very same
lines from a running service's answer without importing the store or the embedder.
"""

from __future__ import annotations

import time
import unicodedata

LINE_WIDTH = 80  # /recall and `thoth recall` lines fit a classic terminal


def cells(text: str) -> int:
    """Terminal columns text takes: wide (CJK) characters two, combining marks none."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def fit(text: str, room: int) -> str:
    """text cut to at most `room` columns, ending in an ellipsis when cut."""
    if cells(text) <= room:
        return text
    kept, used = [], 1
    for char in text:
        used += cells(char)
        if used > room:
            break
        kept.append(char)
    return "".join(kept).rstrip() + "…"


def explain_line(
    index: int,
    *,
    at: float,
    peer: str,
    thread: str,
    words: str,
    dense: float | None,
    bm25_rank: int | None,
    width: int = LINE_WIDTH,
) -> str:
    """One hit as one line: date, peer/thread, the user's words, dense cosine and BM25 rank."""
    shown_dense = "–" if dense is None else f"{dense:.2f}"
    bm25 = "–" if bm25_rank is None else f"#{bm25_rank}"
    head = f"{index}. {time.strftime('%Y-%m-%d', time.gmtime(at))} {fit(f'{peer}/{thread}', 20)}  "
    tail = f"  dense {shown_dense} · bm25 {bm25}"
    room = max(width - cells(head) - cells(tail) - 2, 8)
    return f'{head}"{fit(" ".join(words.split()), room)}"{tail}'


__all__ = ["LINE_WIDTH", "cells", "explain_line", "fit"]
