"""The context budget: property tests of `assemble`, plus the token estimate and history trimming."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from thoth_core import LAYERS, ContextBlock, Message, count_tokens
from thoth_core.budget import _PIECE, assemble, block_tokens, trim_history, truncate

WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyzÄé0123456789_", min_size=1, max_size=20)
PIECES = st.one_of(WORDS, st.sampled_from([" ", "  ", "\n", "\n\n", ".", ",", "!", "<", ">", "/", "\t", "—", "日本"]))
TEXTS = st.lists(PIECES, max_size=60).map("".join)


@st.composite
def blocks(draw: st.DrawFn) -> list[ContextBlock]:
    """Up to 10 blocks with unique (plugin, tag), random layers, priorities, stability and text."""
    count = draw(st.integers(min_value=0, max_value=10))
    return [
        ContextBlock(
            tag=f"tag-{i}",
            text=draw(TEXTS),
            layer=draw(st.sampled_from([*LAYERS, "other"])),
            priority=draw(st.integers(min_value=-5, max_value=100)),
            stable=draw(st.booleans()),
            plugin=draw(st.sampled_from(["alpha", "beta", "gamma"])),
        )
        for i in range(count)
    ]


LAYER_BUDGETS = st.dictionaries(st.sampled_from(LAYERS), st.integers(min_value=0, max_value=150), max_size=len(LAYERS))


@settings(max_examples=250, deadline=None)
@given(blocks(), st.integers(min_value=1, max_value=400), LAYER_BUDGETS)
def test_assembly_never_exceeds_total_or_layer_budgets(given_blocks, total, layers):
    assembly = assemble(given_blocks, total=total, layers=layers)
    assert count_tokens(assembly.system) == assembly.tokens <= total
    for layer, limit in layers.items():
        assert sum(block_tokens(b) for b in assembly.blocks if b.layer == layer) <= limit


@settings(max_examples=250, deadline=None)
@given(blocks(), st.integers(min_value=1, max_value=400), LAYER_BUDGETS)
def test_every_block_is_kept_whole_kept_truncated_or_dropped_and_reported(given_blocks, total, layers):
    assembly = assemble(given_blocks, total=total, layers=layers)
    kept = {(b.plugin, b.tag): b for b in assembly.blocks}
    cuts: dict[tuple[str, str], list] = {}
    for cut in assembly.cuts:
        cuts.setdefault((cut.plugin, cut.tag), []).append(cut)
    assert len(kept) == len(assembly.blocks), "a block was duplicated"
    assert set(kept) <= {(b.plugin, b.tag) for b in given_blocks}, "a block appeared from nowhere"
    for block in given_blocks:
        key = (block.plugin, block.tag)
        out = kept.get(key)
        if out == block:
            assert key not in cuts, f"{key} kept whole but reported as cut"
        elif out is not None:
            assert block.text.startswith(out.text) and out.text != block.text, f"{key} changed, not truncated"
            assert (out.layer, out.priority, out.stable) == (block.layer, block.priority, block.stable)
            assert cuts.get(key), f"{key} truncated silently"
            assert cuts[key][-1].kept_tokens == block_tokens(out)
            assert cuts[key][0].tokens == block_tokens(block)
        else:
            assert cuts.get(key), f"{key} dropped silently"
            assert cuts[key][-1].kept_tokens == 0


@settings(max_examples=100, deadline=None)
@given(blocks(), st.integers(min_value=1, max_value=400), LAYER_BUDGETS)
def test_stable_blocks_come_first(given_blocks, total, layers):
    stability = [b.stable for b in assemble(given_blocks, total=total, layers=layers).blocks]
    assert stability == sorted(stability, reverse=True)


@given(TEXTS, st.integers(min_value=0, max_value=80))
def test_truncate_gives_the_longest_prefix_within_the_limit(text, limit):
    prefix = truncate(text, limit)
    assert text.startswith(prefix)
    assert count_tokens(prefix) <= limit
    following = _PIECE.search(text, len(prefix))
    if following:  # the prefix is the longest: one more piece would cross the limit
        assert count_tokens(text[: following.end()]) > limit
    else:
        assert prefix == text.rstrip() or not text.strip()


def test_everything_fits_when_the_budget_is_large():
    given_blocks = [
        ContextBlock("persona", "You are Thoth.", "procedural", stable=True, plugin="p"),
        ContextBlock("episodes", "Ann likes tea.", "episodic", priority=90, plugin="e"),
    ]
    assembly = assemble(given_blocks, total=6000, layers={"episodic": 1200})
    assert [b.tag for b in assembly.blocks] == ["persona", "episodes"]
    assert assembly.cuts == []
    assert assembly.system == "<persona>\nYou are Thoth.\n</persona>\n\n<episodes>\nAnn likes tea.\n</episodes>"


def test_layer_budget_cut_is_reported_with_its_reason():
    long_text = " ".join(f"word{i}" for i in range(200))
    given_blocks = [ContextBlock("episodes", long_text, "episodic", plugin="episodic")]
    assembly = assemble(given_blocks, total=6000, layers={"episodic": 50})
    [block] = assembly.blocks
    [cut] = assembly.cuts
    assert block_tokens(block) <= 50 and long_text.startswith(block.text)
    assert (cut.plugin, cut.tag, cut.tokens, cut.kept_tokens, cut.reason) == (
        "episodic",
        "episodes",
        block_tokens(given_blocks[0]),
        block_tokens(block),
        "layer budget episodic=50",
    )


def test_lower_priority_block_is_dropped_first_under_the_total():
    high = ContextBlock("high", "important " * 30, "identity", priority=90, plugin="a")
    low = ContextBlock("low", "minor " * 30, "identity", priority=10, plugin="b")
    assembly = assemble([low, high], total=block_tokens(high) + 5, layers={})
    assert [b.tag for b in assembly.blocks] == ["high"]
    assert [(c.tag, c.kept_tokens, c.reason) for c in assembly.cuts] == [
        ("low", 0, f"total budget {block_tokens(high) + 5}")
    ]


def test_token_estimate_counts_words_and_punctuation():
    assert count_tokens("") == 0
    assert count_tokens("hello, world!") == 4
    assert count_tokens("internationalisation") == 1 + len("internationalisation") // 8


def test_trim_history_keeps_recent_messages_starting_with_the_user():
    messages = [
        Message("user", "one two"),
        Message("assistant", "three"),
        Message("user", "four"),
        Message("assistant", "five"),
    ]
    assert trim_history(messages, budget=1000) == messages
    recent = trim_history(messages, budget=count_tokens("three four five") + 12)
    assert recent == messages[2:]
    assert trim_history(messages, budget=0) == []


MESSAGES = st.lists(st.builds(Message, st.sampled_from(["user", "assistant"]), TEXTS), max_size=12)


@settings(max_examples=150, deadline=None)
@given(MESSAGES, st.integers(min_value=0, max_value=300))
def test_trimmed_history_is_a_recent_suffix_within_budget_starting_with_the_user(messages, budget):
    kept = trim_history(messages, budget)
    assert kept == messages[len(messages) - len(kept) :]
    assert sum(count_tokens(m.content) + 4 for m in kept) <= budget
    assert not kept or kept[0].role == "user"


@given(st.one_of(TEXTS, st.text()))
def test_the_token_count_is_one_per_piece_plus_one_per_eight_characters_of_a_word(text):
    """The counter's shortcut (pieces, then the long words again) matches the estimate's definition."""
    pieces = _PIECE.findall(text)
    by_definition = sum(1 + (len(p) >> 3) if p[0].isalnum() or p[0] == "_" else 1 for p in pieces)
    assert count_tokens(text) == by_definition
