"""Every token sent is budgeted: the message, a plugin without a layer, a huge file among its siblings."""

from __future__ import annotations

from thoth_core import ContextBlock, hookimpl
from thoth_core.budget import assemble, block_tokens, count_tokens
from thoth_core.testing import make_test_runtime
from thoth_core.types import Turn


class Blocks:
    """A third-party plugin with no LAYER, returning fixed blocks."""

    def __init__(self, *blocks: ContextBlock) -> None:
        self.blocks = list(blocks)

    @hookimpl
    def pre_spawn_context(self):
        return self.blocks


async def test_a_huge_message_and_a_long_history_are_cut_to_their_budgets_and_reported(tmp_path):
    runtime = make_test_runtime(tmp_path, {}, replies=[{"reply": "ok " * 50}])
    for i in range(40):
        await runtime.turn(f"turn {i} " + "chatter " * 60, peer="ann", thread="t")
    requests = []
    original = runtime.model()

    class Spy:
        name = original.name

        async def stream(self, request):
            requests.append(request)
            async for item in original.stream(request):
                yield item

    runtime._model = Spy()
    huge = "word " * 30_000
    result = await runtime.turn(huge, peer="ann", thread="t")
    (request,) = requests
    sent = sum(count_tokens(m.content) + 4 for m in request.messages)
    assert count_tokens(huge) == 30_000
    assert sent <= 4000 + 8000 + 4  # history budget + message budget (+ the message's framing)
    assert request.messages[-1].content.endswith("the limit is 8000.]")
    (cut,) = [c for c in result.assembly.cuts if c.tag == "message"]
    assert (cut.plugin, cut.tokens, cut.reason) == ("core", count_tokens(huge), "message budget 8000")
    await runtime.aclose()


def test_a_plugin_without_a_layer_cannot_take_the_total():
    megabyte = ContextBlock("dump", "x " * 500_000, "other", plugin="thirdparty", priority=100)
    episodes = ContextBlock("episodes", "ann likes green tea " * 20, "episodic", plugin="episodic", priority=50)
    assembly = assemble([megabyte, episodes], total=6000, layers={"episodic": 1200}, per_plugin=800)
    assert [b.tag for b in assembly.blocks if b.tag == "episodes"] == ["episodes"]
    assert sum(block_tokens(b) for b in assembly.blocks if b.plugin == "thirdparty") <= 800
    assert [c.reason for c in assembly.cuts] == ["plugin share thirdparty=800"]


def test_a_huge_persona_file_cannot_push_its_siblings_out():
    soul = ContextBlock("persona", "be kind " * 30_000, "procedural", plugin="procedural", priority=95)
    siblings = [
        ContextBlock("persona", f"{name}: " + "rule " * 40, "procedural", plugin=f"p-{name}", priority=90)
        for name in ("RULES", "AGENTS", "TOOLS")
    ]
    assembly = assemble([soul, *siblings], total=6000, layers={"procedural": 2500})
    kept = {b.plugin: b for b in assembly.blocks}
    assert {"p-RULES", "p-AGENTS", "p-TOOLS"} <= set(kept)  # each keeps at least its floor
    assert all(kept[s.plugin] == s for s in siblings)  # small siblings are kept whole
    assert sum(block_tokens(b) for b in assembly.blocks) <= 2500
    assert [(c.plugin, c.reason) for c in assembly.cuts] == [("procedural", "layer budget procedural=2500")]


async def test_in_a_runtime_a_plugin_without_layer_gets_the_configured_share(tmp_path):
    megabyte = ContextBlock("dump", "x " * 500_000, priority=100)
    runtime = make_test_runtime(tmp_path, {"thirdparty": Blocks(megabyte)}, config={"budget": {"per_plugin": 300}})
    session = await runtime.session(peer="ann", thread="t")
    assembly = await runtime.context(Turn("hi", "ann", "t"), session)
    assert 0 < assembly.tokens <= 300
    assert [c.reason for c in assembly.cuts] == ["plugin share thirdparty=300"]
    await runtime.aclose()
