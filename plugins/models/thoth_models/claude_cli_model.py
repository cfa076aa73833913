"""The `claude-cli` provider: each request runs `claude -p` (Claude Code) as a subprocess.

Useful where Claude Code is already logged in (a subscription instead of an API key), and the
way the seed's reflection runs. The prompt goes on stdin, the assembled context as
`--system-prompt`; with `--output-format stream-json --include-partial-messages` the text
deltas stream as they arrive and the final `result` event gives usage and cost.

Options, in `[models.claude-cli]`: `command` (default `claude`), `model` (e.g. `sonnet`),
`effort` (`low`, `medium`, `high`, ...), `timeout` (seconds for the whole run, default 300),
`output_format` (`stream-json`, or `text` for plain stdout), `system_prompt` (`replace`
Claude Code's own prompt, the default, or `append` to it), `tools` (Claude Code's built-in
tools, default `""`: none, so a chat turn cannot run commands), `extra_args` (a list).
A request's `answer` schema is appended to the system prompt as text, and the reply validated by
the caller (`thoth_core.answers`).
"""

from __future__ import annotations

import asyncio
import codecs
import json
import shutil
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from thoth_core import ModelError, ModelNotConfigured, ModelRequest, Usage, hookimpl
from thoth_core.answers import system_with_schema
from thoth_core.types import quoted

if TYPE_CHECKING:
    from thoth_core import Runtime

DEFAULT_TIMEOUT = 300.0
CONFIG_DEFAULTS = {  # every key of [models.claude-cli]; None: no default in the file
    "models.claude-cli": {
        "command": "claude",
        "timeout": DEFAULT_TIMEOUT,
        "output_format": "stream-json",
        "system_prompt": "replace",
        "extra_args": [],
        "tools": "",
        "model": None,
        "effort": None,
    }
}
LINE_LIMIT = 16 * 1024 * 1024  # one stream-json line holds a whole message
INSTALL_HELP = (
    "install Claude Code (npm install -g @anthropic-ai/claude-code) or set [models.claude-cli] command = PATH"
)


def prompt_text(request: ModelRequest) -> str:
    """What goes on stdin: the last message, after earlier turns as a transcript."""
    *earlier, last = request.messages
    if not earlier:
        return last.content
    lines = [f"<{m.role}>\n{quoted(m.content)}\n</{m.role}>" for m in earlier]  # a message cannot close its tag
    return "<conversation>\n" + "\n".join(lines) + f"\n</conversation>\n\nReply to this message:\n{last.content}"


class ClaudeCliModel:
    """Runs `claude -p` once per request and streams its stdout."""

    name = "claude-cli"

    def __init__(
        self,
        command: str = "claude",
        *,
        model: str | None = None,
        effort: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        output_format: str = "stream-json",
        system_prompt: str = "replace",
        tools: str = "",
        extra_args: list[str] | None = None,
    ) -> None:
        self.command = command
        self.model = model
        self.effort = effort
        self.timeout = timeout
        self.output_format = output_format
        self.system_prompt = system_prompt
        self.tools = tools
        self.extra_args = list(extra_args or [])

    def argv(self, request: ModelRequest) -> list[str]:
        """The command line for a request."""
        argv = [self.command, "-p", "--output-format", self.output_format]
        if self.output_format == "stream-json":
            argv += ["--verbose", "--include-partial-messages"]
        argv += ["--tools", self.tools]
        system = system_with_schema(request)  # an `answer` schema goes as text: the CLI cannot force one
        if system:
            argv += [
                "--system-prompt" if self.system_prompt == "replace" else "--append-system-prompt",
                "\n\n".join(block.render() for block in system),
            ]
        if self.model:
            argv += ["--model", self.model]
        if self.effort:
            argv += ["--effort", self.effort]
        return argv + self.extra_args

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Usage]:
        """Yield stdout as text deltas, then the run's Usage; raises ModelError on failure."""
        try:
            process = await asyncio.create_subprocess_exec(
                *self.argv(request),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=LINE_LIMIT,
            )
        except FileNotFoundError as exc:
            raise ModelNotConfigured(f"claude-cli: command {self.command!r} not found; {INSTALL_HELP}") from exc
        assert process.stdin and process.stdout and process.stderr
        stderr = asyncio.ensure_future(process.stderr.read())
        deadline = asyncio.get_running_loop().time() + self.timeout
        try:
            process.stdin.write(prompt_text(request).encode())
            await process.stdin.drain()
            process.stdin.close()
            parse = self._events if self.output_format == "stream-json" else self._text
            async for item in parse(process.stdout, deadline):
                yield item
            await asyncio.wait_for(process.wait(), max(deadline - asyncio.get_running_loop().time(), 0.1))
        except TimeoutError as exc:
            raise ModelError(
                f"claude-cli: no answer within {self.timeout:g}s; raise [models.claude-cli] timeout"
            ) from exc
        except (BrokenPipeError, ConnectionResetError):
            pass  # it exited before reading the prompt; the exit code and stderr say why
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            errors = (await asyncio.wait_for(stderr, 5)).decode(errors="replace").strip().splitlines()
        if process.returncode != 0:
            last = errors[-1] if errors else "no error output"
            raise ModelError(f"claude-cli: {self.command} exited with {process.returncode}: {last}")

    async def check(self) -> str:
        """For `thoth doctor`: the CLI's version and where it is; raises ModelError if it fails."""
        process = await asyncio.create_subprocess_exec(
            self.command, "--version", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        try:
            out, _ = await asyncio.wait_for(process.communicate(), 10)
        except TimeoutError as exc:
            process.kill()
            await process.wait()
            raise ModelError(f"claude-cli: `{self.command} --version` did not answer within 10s") from exc
        text = out.decode(errors="replace").strip()
        if process.returncode != 0:
            raise ModelError(f"claude-cli: `{self.command} --version` exited with {process.returncode}: {text[-200:]}")
        return f"{text} at {shutil.which(self.command)}"

    async def _text(self, stdout: asyncio.StreamReader, deadline: float) -> AsyncIterator[str | Usage]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while chunk := await _before(stdout.read(4096), deadline):
            if text := decoder.decode(chunk):
                yield text
        yield Usage()

    async def _events(self, stdout: asyncio.StreamReader, deadline: float) -> AsyncIterator[str | Usage]:
        usage = Usage()
        deltas = 0
        while line := await _before(stdout.readline(), deadline):
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            kind = event.get("type")
            if kind == "stream_event":
                inner = event.get("event", {})
                delta = inner.get("delta", {})
                if inner.get("type") == "content_block_delta" and delta.get("type") == "text_delta":
                    deltas += 1
                    yield delta["text"]
            elif kind == "assistant":
                if not deltas:  # no partial messages from this CLI: the whole message at once
                    for block in event.get("message", {}).get("content", []):
                        if block.get("type") == "text":
                            yield block["text"]
                deltas = 0
            elif kind == "result":
                if event.get("is_error"):
                    detail = event.get("result") or "; ".join(map(str, event.get("errors", []))) or event.get("subtype")
                    raise ModelError(f"claude-cli: {detail}")
                usage = result_usage(event)
        yield usage


async def _before(read: Any, deadline: float) -> bytes:
    """Await a stream read, raising TimeoutError at the deadline."""
    return await asyncio.wait_for(read, max(deadline - asyncio.get_running_loop().time(), 0.0))  # type: ignore[no-any-return]


def result_usage(event: dict[str, Any]) -> Usage:
    """Usage and cost from Claude Code's final `result` event."""
    usage = event.get("usage") or {}
    return Usage(
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read_tokens=int(usage.get("cache_read_input_tokens") or 0),
        cache_write_tokens=int(usage.get("cache_creation_input_tokens") or 0),
        cost_usd=event.get("total_cost_usd"),
    )


def make_claude_cli(runtime: Runtime, options: dict[str, Any]) -> ClaudeCliModel:
    """Build the provider from `[models.claude-cli]`; the command must be on PATH."""

    def error(key: str, message: str) -> Exception:
        return runtime.config.error(f"models.claude-cli.{key}", message)  # type: ignore[no-any-return]

    command = options.get("command", CONFIG_DEFAULTS["models.claude-cli"]["command"])
    if not isinstance(command, str) or not command:
        raise error("command", f"expected a command name or path, got {command!r}")
    if shutil.which(command) is None:
        raise ModelNotConfigured(f"claude-cli: command {command!r} not found on PATH; {INSTALL_HELP}")
    for key in ("model", "effort", "tools"):
        if key in options and not isinstance(options[key], str):
            raise error(key, f"expected a string, got {options[key]!r}")
    timeout = runtime.config.number("models.claude-cli.timeout", options.get("timeout", DEFAULT_TIMEOUT), positive=True)
    output_format = options.get("output_format", CONFIG_DEFAULTS["models.claude-cli"]["output_format"])
    if output_format not in ("stream-json", "text"):
        raise error("output_format", f"expected 'stream-json' or 'text', got {output_format!r}")
    system_prompt = options.get("system_prompt", CONFIG_DEFAULTS["models.claude-cli"]["system_prompt"])
    if system_prompt not in ("replace", "append"):
        raise error("system_prompt", f"expected 'replace' or 'append', got {system_prompt!r}")
    extra_args = options.get("extra_args", [])
    if not isinstance(extra_args, list) or not all(isinstance(a, str) for a in extra_args):
        raise error("extra_args", f"expected a list of strings, got {extra_args!r}")
    return ClaudeCliModel(
        command,
        model=options.get("model"),
        effort=options.get("effort"),
        timeout=timeout,
        output_format=output_format,
        system_prompt=system_prompt,
        tools=options.get("tools", ""),
        extra_args=extra_args,
    )


@hookimpl
def register_models(register):  # type: ignore[no-untyped-def]
    register("claude-cli", make_claude_cli)
