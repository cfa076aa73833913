"""Thoth L1 working memory: persistent sessions, JSONL transcripts, MEMORY.md and a scratch store."""

from __future__ import annotations

from .scratch import Scratch, record_tool, scratch
from .store import SessionStore, read_transcript, transcript_path

__all__ = ["Scratch", "SessionStore", "read_transcript", "record_tool", "scratch", "transcript_path"]
