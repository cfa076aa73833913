"""thoth-hello's tests, written with Thoth's conformance kit (`thoth_core.testing`)."""

import pytest

import thoth_hello
from thoth_core.testing import context_for

pytestmark = pytest.mark.asyncio


async def test_the_block_greets_the_speaker(make_runtime):
    runtime = make_runtime({"hello": thoth_hello}, config={"plugins": {"hello": {"greeting": "Howdy"}}})
    assembly = await context_for(runtime, "hi", peer="ann", thread="t")
    [block] = assembly.blocks
    assert (block.plugin, block.tag, block.text) == ("hello", "hello", 'Start your reply with "Howdy, ann!"')


async def test_the_slash_command_answers_without_a_model(make_runtime):
    runtime = make_runtime({"hello": thoth_hello})
    result = await runtime.turn("/hello", peer="ann", thread="t")
    assert result.reply.text == "Hello, ann!"
