"""Thoth L5 reflection: session-end reflection, the approval queue, auto-memory and nightly consolidation."""
