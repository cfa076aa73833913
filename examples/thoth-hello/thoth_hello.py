"""thoth-hello: a third-party Thoth plugin that asks the agent to greet the speaker."""

from __future__ import annotations

from thoth_core import Command, ContextBlock, hookimpl

CONFIG_DEFAULTS = {"plugins.hello": {"greeting": "Hello"}}  # every key of [plugins.hello], with its default


@hookimpl
def pre_spawn_context(turn, session):
    greeting = session.runtime.config.plugin("hello")["greeting"]  # the file's value, else the default above
    return ContextBlock(tag="hello", text=f'Start your reply with "{greeting}, {turn.peer}!"', stable=True)


@hookimpl
def register_commands(register):
    register(Command("hello", "say hello", lambda session, **_: f"Hello, {session.peer}!"))
