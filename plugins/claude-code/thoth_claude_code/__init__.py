"""Thoth in Claude Code: hooks that bring the memory layers into each session."""
