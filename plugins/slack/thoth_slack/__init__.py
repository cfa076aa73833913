"""Thoth Slack frontend."""
