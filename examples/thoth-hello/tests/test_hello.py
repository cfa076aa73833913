"""thoth-hello's tests, written with Thoth's conformance kit (`thoth_core.testing`)."""

import thoth_hello

from thoth_core.testing import check_layer_plugin, context_for


async def test_the_block_greets_the_speaker(make_runtime):
    runtime = make_runtime({"hello": thoth_hello}, config={"plugins": {"hello": {"greeting": "Howdy"}}})
    assembly = await context_for(runtime, "hi", peer="ann", thread="t")
    [block] = assembly.blocks
    assert (block.plugin, block.tag, block.text) == ("hello", "hello", 'Start your reply with "Howdy, ann!"')


async def test_the_greeting_defaults_to_the_declared_one(make_runtime):
    [block] = (await context_for(make_runtime({"hello": thoth_hello}), "hi", peer="ann", thread="t")).blocks
    assert block.text == 'Start your reply with "Hello, ann!"'


async def test_the_slash_command_answers_without_a_model(make_runtime):
    runtime = make_runtime({"hello": thoth_hello})
    result = await runtime.turn("/hello", peer="ann", thread="t")
    assert result.reply.text == "Hello, ann!"


async def test_the_conformance_checks_pass(make_runtime):
    await check_layer_plugin(make_runtime({"hello": thoth_hello}), "hello")
