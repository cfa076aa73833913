"""The hook table cannot drift: each policy agrees with its spec's options, and docs/hooks.md shows the code's table."""

from __future__ import annotations

import inspect
import re
import types
from pathlib import Path

import pytest

from thoth_core import HookPolicy, hookspec, hookspecs
from thoth_core.manager import ThothPluginManager

ROOT = Path(__file__).resolve().parents[1]
HOOKS_MD = (ROOT / "docs" / "hooks.md").read_text()
ROW = re.compile(r"^\| `(\w+)` \| (\w+)(?: \((not isolated)\))? \| (\w+) \| (yes|no) \|", re.MULTILINE)


def documented() -> dict[str, tuple[str, str, bool, bool]]:
    """Each table row of hooks.md: hook -> (call style, deadline, firstresult, isolated)."""
    rows: dict[str, tuple[str, str, bool, bool]] = {}
    for name, style, not_isolated, deadline, first in ROW.findall(HOOKS_MD):
        assert name not in rows, f"docs/hooks.md: {name} has two rows"
        rows[name] = (style, deadline, first == "yes", not not_isolated)
    return rows


def declared() -> dict[str, HookPolicy]:
    """Every policy in code: the core's, reflection's and thoth-serve's (when installed)."""
    policies = dict(hookspecs.POLICIES)
    reflection = pytest.importorskip("thoth_reflection.hookspecs")
    policies.update(reflection.POLICIES)
    serve = pytest.importorskip("thoth_serve.hookspecs")
    policies.update(serve.POLICIES)
    return policies


def test_every_core_spec_has_a_policy_that_agrees_with_its_options():
    pm = ThothPluginManager()
    pm.add_hookspecs(hookspecs)  # raises on a contradiction
    specs = {name for name in vars(hookspecs) if pm.parse_hookspec_opts(hookspecs, name) is not None}
    assert specs == set(hookspecs.POLICIES)
    for name in specs:
        opts = getattr(pm.hook, name).spec.opts
        policy = pm.policy(name)
        assert (policy.firstresult, policy.historic) == (opts["firstresult"], opts["historic"]), name


def test_the_docs_table_is_the_code_table():
    rows = documented()
    policies = declared()
    assert set(rows) == set(policies), f"docs: {sorted(set(rows) ^ set(policies))} differ from the code"
    for name, policy in policies.items():
        assert rows[name] == (policy.style, policy.deadline, policy.firstresult, policy.isolated), name


def test_the_docs_no_longer_say_only_pre_spawn_context_has_a_deadline():
    assert "Only `pre_spawn_context` has one" not in HOOKS_MD
    turn_hooks = sorted(name for name, policy in hookspecs.POLICIES.items() if policy.deadline == "turn")
    assert turn_hooks == [
        "last_thread",
        "layer_status",
        "pre_spawn_context",
        "session_closed",
        "session_start",
        "turn_tools",
    ]


class Contradicting:
    """A hookspecs namespace whose table says `first` for a spec that is not firstresult."""

    @staticmethod
    @hookspec
    def pick(x: int) -> int | None:
        """Pick one."""

    POLICIES = {"pick": HookPolicy("first", "background")}


class Overreaching:
    """A table naming a hook with no spec."""

    @staticmethod
    @hookspec(firstresult=True)
    def pick(x: int) -> int | None:
        """Pick one."""

    POLICIES = {"pick": HookPolicy("first", "background"), "pock": HookPolicy("each", "turn")}


@pytest.mark.parametrize(("namespace", "message"), [(Contradicting, "firstresult=False"), (Overreaching, "pock")])
def test_a_table_that_contradicts_its_specs_is_refused(namespace, message):
    pm = ThothPluginManager()
    with pytest.raises(ValueError, match=message):
        pm.add_hookspecs(namespace)


def test_a_module_without_a_table_gets_its_specs_options():
    class Bare:
        @staticmethod
        @hookspec(firstresult=True)
        def pick(x: int) -> int | None:
            """Pick one."""

    pm = ThothPluginManager()
    pm.add_hookspecs(Bare)
    assert pm.policy("pick") == HookPolicy("first", "background")
    assert pm.policy("not_declared_anywhere") == HookPolicy("each", "background")


def plugin_sections(title: str) -> dict[str, str]:
    """The `### name(args)` sections under `## TITLE` (the hooks one plugin declares), up to the next `## `."""
    part = HOOKS_MD.split(f"\n## {title}\n")[1].split("\n## ")[0]
    parts = re.split(r"^### `([^`]+)`\n", part, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@pytest.mark.parametrize(
    ("module", "title"),
    [
        ("thoth_reflection.hookspecs", "Hooks the reflection plugin declares"),
        ("thoth_serve.hookspecs", "Hooks thoth-serve declares"),
    ],
)
def test_plugins_hooks_are_documented_with_examples_that_load_with_and_without_it(module, title):
    reflection = pytest.importorskip(module)
    specs = {name: getattr(reflection, name) for name in reflection.POLICIES}
    sections = plugin_sections(title)
    assert set(sections) == {f"{name}({', '.join(inspect.signature(fn).parameters)})" for name, fn in specs.items()}
    for heading, text in sections.items():
        name = heading.split("(")[0]
        for argument in inspect.signature(specs[name]).parameters:
            assert f"`{argument}`" in text, f"{name}: argument {argument} is not described"
        [source] = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
        for with_reflection in (True, False):
            module = types.ModuleType(f"hooks_md_{name}")
            exec(compile(source, f"docs/hooks.md ({name})", "exec"), module.__dict__)  # noqa: S102 - our own docs
            pm = ThothPluginManager()
            pm.add_hookspecs(hookspecs)
            if with_reflection:
                pm.add_hookspecs(reflection)
            pm.register(module)
            pm.check_pending()  # optionalhook: loads without the declaring plugin too
            assert name in {caller.name for caller in pm.get_hookcallers(module) or []}
