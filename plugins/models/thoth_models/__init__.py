"""Thoth's model providers: `anthropic`, `openai` and `claude-cli`, one plugin (entry point) each."""
