"""Thoth blackboard: signals that agents publish for each other (seed 004, layer 2)."""

from __future__ import annotations

from .board import Board, BoardError, Signal, matches
from .memory import InProcessBoard
from .sqlite_board import SqliteBoard

__all__ = ["Board", "BoardError", "InProcessBoard", "Signal", "SqliteBoard", "matches"]
