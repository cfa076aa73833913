"""Thoth L2 identity memory: an evolving model of who each peer is, with hard facts."""

from __future__ import annotations

from .facts import ParsedFact, parse_remember
from .store import IdentityStore

__all__ = ["IdentityStore", "ParsedFact", "parse_remember"]
