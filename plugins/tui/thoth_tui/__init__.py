"""Thoth's Textual terminal frontend."""
