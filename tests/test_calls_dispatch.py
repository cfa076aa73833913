"""The dispatcher honours each hook's policy: firstresult stops early, historic replays, deadlines and isolation
per call style, and hooks a plugin declares (`add_hookspecs`) load and run with and without that plugin."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thoth_core import ConfigError, HookPolicy, PluginInfo, ThothError, hookimpl, hookspec, hookspecs
from thoth_core._calls import call, call_here, deadline_of
from thoth_core.config import Config
from thoth_core.manager import ThothPluginManager
from thoth_core.plugins import check_pending, make_plugin_manager

# --- first: stops at the first answer -------------------------------------------------------


class Owner:
    """Holds one pending item and decides it; counts the decide calls it gets."""

    def __init__(self, item_id: str) -> None:
        self.item_id = item_id
        self.asked: list[str] = []

    @hookimpl
    def approvals(self):
        return [{"id": self.item_id, "kind": "note", "title": "t", "body": "b", "workspace": None, "peer": None}]

    @hookimpl
    def decide(self, item_id, decision):
        self.asked.append(item_id)
        return {"message": f"{decision} {item_id}"} if item_id == self.item_id else None


async def test_decide_stops_at_the_first_answer(make_runtime):
    first, last = Owner("a:1"), Owner("b:1")
    runtime = make_runtime({"first": first, "last": last}, config={"thoth": {"owner": "boss"}})
    # pluggy's order: the last registered first; its answer ends the call
    assert await runtime.decide("b:1", "approve", actor="boss") == {"message": "approve b:1"}
    assert (first.asked, last.asked) == ([], ["b:1"])
    # an item of the first: the last is asked (None), then the first answers
    assert await runtime.decide("a:1", "reject", actor="boss") == {"message": "reject a:1"}
    assert (first.asked, last.asked) == (["a:1"], ["b:1", "a:1"])


class Broken:
    @hookimpl
    def decide(self, item_id):
        raise RuntimeError("store gone")


class Slow:
    @hookimpl
    def decide(self, item_id):
        time.sleep(1.0)
        return {"message": "too late"}


@pytest.mark.parametrize(("blocker", "status"), [(Broken(), "error"), (Slow(), "timeout")])
async def test_a_failing_or_late_first_answerer_is_isolated_and_the_next_one_answers(make_runtime, blocker, status):
    owner = Owner("a:1")
    config = {"plugins": {"blocker": {"background_deadline": 0.2}}}
    runtime = make_runtime({"owner": owner, "blocker": blocker}, config=config)
    kwargs = {"item_id": "a:1", "decision": "approve", "actor": "x", "reason": "", "text": None, "runtime": runtime}
    outcomes = await runtime.call("decide", **kwargs)
    assert [(plugin, result, call.status) for plugin, result, call in outcomes] == [
        ("blocker", None, status),
        ("owner", {"message": "approve a:1"}, "ok"),
    ]


class Answerer:
    """Answers `decide` with a value, None, or by raising; records that it was asked."""

    def __init__(self, answer: object, asked: list[int], index: int) -> None:
        self.answer, self.asked, self.index = answer, asked, index

    @hookimpl
    def decide(self, item_id):
        self.asked.append(self.index)
        if self.answer == "raise":
            raise RuntimeError("no store")
        return self.answer


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([None, "raise", 1, 2]), max_size=6), st.booleans())
def test_a_first_hook_asks_in_pluggys_order_until_the_first_answer(answers, on_a_thread):
    pm = ThothPluginManager()
    pm.add_hookspecs(hookspecs)
    asked: list[int] = []
    for index, answer in enumerate(answers):
        pm.register(Answerer(answer, asked, index), name=f"p{index}")
    kwargs = {"item_id": "x"}
    outcomes = call_here(pm, "decide", kwargs) if on_a_thread else asyncio.run(call(pm, "decide", kwargs))
    order = list(range(len(answers)))[::-1]  # pluggy: the last registered first
    answering = [i for i in order if answers[i] not in (None, "raise")]
    expected = order[: order.index(answering[0]) + 1] if answering else order
    assert asked == expected  # nobody after the first answer is asked
    assert [plugin for plugin, _, _ in outcomes] == [f"p{i}" for i in expected]
    statuses = ["error" if answers[i] == "raise" else "ok" for i in expected]
    assert [record.status for _, _, record in outcomes] == statuses
    final = outcomes[-1][1] if outcomes else None
    assert final == (answers[answering[0]] if answering else None)


# --- historic: replayed for a plugin registered later -------------------------------------


class Configured:
    def __init__(self) -> None:
        self.runtimes: list[object] = []

    @hookimpl
    def configure(self, runtime):
        self.runtimes.append(runtime)


def test_configure_is_replayed_once_for_a_plugin_registered_late(make_runtime):
    early = Configured()
    runtime = make_runtime({"early": early})
    late = Configured()
    runtime.register(late, name="late")
    assert early.runtimes == [runtime] and late.runtimes == [runtime]  # the early one is not called again
    assert ("configure", {"runtime": runtime}) in runtime.pm.history


class BadConfig:
    @hookimpl
    def configure(self, runtime):
        raise runtime.config.error("plugins.bad.limit", "expected a number")


class Crashing:
    @hookimpl
    def configure(self):
        raise ValueError("oops")


def test_historic_calls_stop_on_config_errors_and_isolate_the_rest(make_runtime, caplog):
    runtime = make_runtime()
    with pytest.raises(ConfigError, match=r"plugins\.bad\.limit"):
        runtime.register(BadConfig(), name="bad")
    runtime.register(Crashing(), name="crashing")  # logged, the plugin runs on
    assert "plugin crashing: configure failed: ValueError: oops" in caplog.text


def test_a_historic_async_impl_is_reported_not_left_unawaited(make_runtime, caplog):
    class Async:
        @hookimpl
        async def configure(self, runtime):
            raise AssertionError("never awaited")

    make_runtime().register(Async(), name="async")
    assert "must be a plain function" in caplog.text


# --- each: deadlines by kind, isolation ------------------------------------------------------


class Sleeper:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    @hookimpl
    def layer_status(self):
        time.sleep(self.seconds)
        return {"layer": "working"}

    @hookimpl
    def approvals(self):
        time.sleep(self.seconds)
        return []


async def test_each_hook_gets_the_deadline_its_table_names(make_runtime):
    config = {"plugins": {"sleeper": {"deadline": 0.1, "background_deadline": 2.0}}}
    runtime = make_runtime({"sleeper": Sleeper(0.4)}, config=config)
    [(_, _, turn_call)] = await runtime.call("layer_status", workspace="default", peer="ann", runtime=runtime)
    [(_, _, background_call)] = await runtime.call("approvals", runtime=runtime)
    assert (turn_call.status, background_call.status) == ("timeout", "ok")  # turn: 0.1 s; background: 2 s


@pytest.mark.parametrize("hook", sorted(hookspecs.POLICIES))
def test_deadline_of_each_hook_follows_its_policy(make_runtime, hook):
    config = {"thoth": {"deadline": 1.5, "background_deadline": 7.0}}
    runtime = make_runtime(config=config)
    policy = runtime.pm.policy(hook)
    expected = {"turn": 1.5, "background": 7.0, "none": None}[policy.deadline]
    assert deadline_of(policy, "anyone", runtime) == (None if policy.in_caller_thread else expected)
    if expected is not None and not policy.in_caller_thread:
        assert deadline_of(policy, "anyone", runtime, extra=3.0) == expected + 3.0
        assert deadline_of(policy, "anyone", runtime, until=time.monotonic() - 1) == 0.01


def test_sync_calls_run_on_the_callers_thread_isolated_but_config_errors_stop(make_runtime, caplog):
    seen: list[str] = []

    class Registers:
        @hookimpl
        def register_commands(self, register):
            seen.append(threading.current_thread().name)
            raise ValueError("half a registry")

    runtime = make_runtime({"registers": Registers()})
    assert "help" in runtime.commands  # the built-in commands are still there
    assert seen == [threading.current_thread().name]
    assert "plugin registers: register_commands failed" in caplog.text


def test_a_config_error_from_a_sync_hook_stops_the_caller(make_runtime):
    class Refuses:
        @hookimpl
        def register_commands(self, register):
            raise ConfigError("thoth.toml: plugins.refuses.x: bad")

    runtime = make_runtime({"refuses": Refuses()})
    with pytest.raises(ConfigError, match="plugins.refuses.x"):
        runtime.commands  # noqa: B018 - the registry is built on first use


def test_a_bundle_export_failure_is_not_isolated(make_runtime):
    class Exporter:
        @hookimpl
        def bundle_export(self):
            raise ThothError("cannot read the store")

    runtime = make_runtime({"exporter": Exporter()})
    with pytest.raises(ThothError, match="cannot read the store"):
        runtime.call_sync("bundle_export", runtime=runtime)


# --- hooks a plugin declares ---------------------------------------------------------------


def greeted(peer):
    """A peer was greeted."""


def picked(x):
    """The first plugin's pick."""


HELLO_HOOKS = SimpleNamespace(
    greeted=hookspec(greeted),
    picked=hookspec(firstresult=True)(picked),
    POLICIES={"greeted": HookPolicy("each", "turn"), "picked": HookPolicy("first", "background")},
)


class Declarer:
    @hookimpl
    def add_hookspecs(self, pluginmanager):
        pluginmanager.add_hookspecs(HELLO_HOOKS)


class Implementer:
    def __init__(self, answer: int | None) -> None:
        self.answer = answer
        self.peers: list[str] = []

    @hookimpl(optionalhook=True)
    def greeted(self, peer):
        self.peers.append(peer)

    @hookimpl(optionalhook=True)
    def picked(self, x):
        return None if self.answer is None else self.answer + x


async def test_a_plugin_declared_hook_is_called_by_its_own_policy(make_runtime):
    one, two = Implementer(1), Implementer(None)
    runtime = make_runtime({"one": one, "two": two})  # implementers first: their hooks wait for the spec
    runtime.register(Declarer(), name="declarer")  # add_hookspecs replayed as it is registered
    assert runtime.pm.policy("greeted") == HookPolicy("each", "turn")
    outcomes = await runtime.call("picked", x=10)
    assert [(plugin, result) for plugin, result, _ in outcomes] == [("two", None), ("one", 11)]
    await runtime.call("greeted", peer="ann")
    assert one.peers == two.peers == ["ann"]


async def test_implementers_load_and_run_without_the_declaring_plugin(make_runtime):
    one = Implementer(1)
    runtime = make_runtime({"one": one})
    runtime.pm.check_pending()  # optionalhook: nothing pending
    assert runtime.pm.policy("picked") == HookPolicy("each", "background")  # no spec: called as a plain hook
    assert runtime.pm.implementers("picked") == ["one"]


def test_a_plugin_with_an_unknown_hook_fails_alone_once_every_spec_is_in():
    class Misspelt:
        @hookimpl
        def pre_spawn_contxt(self):
            return None

    pm = ThothPluginManager()
    pm.add_hookspecs(hookspecs)
    for name, plugin in (("misspelt", Misspelt()), ("fine", Implementer(1))):
        pm.register(plugin, name=name)
        pm.info[name] = PluginInfo(name, f"thoth-{name}", "1.0", enabled=True)
    check_pending(pm)
    assert pm.get_plugin("misspelt") is None and pm.get_plugin("fine") is not None
    assert not pm.info["misspelt"].enabled and "pre_spawn_contxt" in str(pm.info["misspelt"].error)


@pytest.mark.parametrize("disabled", [[], ["reflection"]])
def test_the_layers_load_with_and_without_reflection(thoth_env, monkeypatch, disabled):
    pytest.importorskip("thoth_reflection")
    monkeypatch.setenv("THOTH_LOAD_PLUGINS", "working,episodic,identity,procedural,reflection")
    pm = make_plugin_manager(Config(data={"plugins": {"disabled": disabled}}))
    for name in ("working", "episodic", "identity", "procedural"):
        assert pm.info[name].enabled and pm.info[name].error is None, name
    assert ("transcript" in pm.policies) is (not disabled)
    assert set(pm.implementers("transcript")) == {"working"}
    reflection = set() if disabled else {"reflection"}
    assert set(pm.implementers("reflection_result")) == {"identity", "procedural"} | reflection
