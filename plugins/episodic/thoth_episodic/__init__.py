"""Thoth L3 episodic memory."""
