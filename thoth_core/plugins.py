"""Building the plugin manager: specs, blocked names, entry points, built-in defaults, then the pending check.

Each plugin gets the historic `add_hookspecs` call as it is registered, so the hooks it declares are
in before any implementation is checked; the check of implementations without a spec runs once
every plugin is in, and fails only the plugin that has one (a misspelt hook name).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import logging
import os
from importlib.metadata import entry_points

import pluggy

from . import hookspecs
from ._calls import call_here, replay
from .config import ESSENTIAL, Config, check_plugin_tables, missing_plugins
from .errors import ConfigError
from .manager import GROUP, PluginInfo, ThothPluginManager
from .schema import check_plugin_values

logger = logging.getLogger(__name__)

DEFAULT_PLUGINS = {
    "replay": "thoth_core.default_plugins.replay_model",
    "uninstalled-models": "thoth_core.default_plugins.uninstalled_model",
    "commands": "thoth_core.default_plugins.commands",
    "repl": "thoth_core.default_plugins.repl",
    "memory_tools": "thoth_core.default_plugins.memory_tools",
}

FIRST_PARTY = ("working", "identity", "episodic", "procedural", "reflection", "blackboard", "tui", "slack")
PROVIDERS = ("anthropic", "openai", "claude-cli")  # the model providers of the thoth-models distribution

ENV_SWITCHES = {"HONCHO_DISABLED": "identity", "EPISODIC_DISABLED": "episodic", "REFLECTION_DISABLED": "reflection"}


def install_hint(name: str) -> str:
    """How a pip user installs the plugin of this name."""
    if name in FIRST_PARTY:
        return f"pip install thoth-{name}"
    if name in PROVIDERS:
        return "pip install thoth-models"
    return f"pip install the distribution that provides the {name!r} plugin"


def disabled_names(config: Config) -> set[str]:
    """Plugins switched off by thoth.toml or the *_DISABLED environment switches."""
    names = set(config.disabled)
    for variable, name in ENV_SWITCHES.items():
        if os.environ.get(variable, "").strip().lower() in ("1", "true", "yes", "on"):
            names.add(name)
    essential = sorted(names & ESSENTIAL)
    if essential:
        raise config.error(
            "plugins.disabled",
            f"plugin {essential[0]!r} is essential (L1 working and L4 procedural always run) and cannot be disabled",
        )
    return names


def make_plugin_manager(config: Config, *, autoload: bool = True) -> ThothPluginManager:
    """A fresh manager with the hookspecs, installed plugins (unless blocked) and the defaults."""
    pm = ThothPluginManager(GROUP)
    pm.add_hookspecs(hookspecs)
    call_here(pm, "add_hookspecs", {"pluginmanager": pm})  # historic: each plugin gets it as it is registered
    blocked = disabled_names(config)
    for name in blocked:
        pm.set_blocked(name)
    installed = {ep.name: ep for ep in entry_points(group=GROUP)}
    if autoload:
        allowed = os.environ.get("THOTH_LOAD_PLUGINS")
        wanted = set(installed) if allowed is None else {n.strip() for n in allowed.split(",") if n.strip()}
        for name, key in missing_plugins(config, (set(installed) & wanted) | set(DEFAULT_PLUGINS)).items():
            error = f"not installed ({install_hint(name)})"
            logger.warning("%s", config.error(key, f"plugin {name!r} is {error}; running without it"))
            pm.info[name] = PluginInfo(name, "-", "-", enabled=False, error=error)
        for name in sorted(wanted - set(installed)):
            logger.warning(
                "THOTH_LOAD_PLUGINS names %r, which is not installed; installed: %s",
                name,
                ", ".join(sorted(installed)) or "none",
            )
        for name, ep in sorted(installed.items()):
            if name not in wanted:
                continue
            dist = ep.dist.name if ep.dist else "?"
            version = ep.dist.version if ep.dist else "?"
            info = PluginInfo(name, dist, version, enabled=name not in blocked)
            pm.info[name] = info
            if name in blocked:
                logger.info("plugin %s-%s disabled", name, version)
                continue
            try:
                pm.register(ep.load(), name=name)
                replay(pm, name)  # its own hookspecs (add_hookspecs)
                logger.info("plugin %s-%s registered", name, version)
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not stop the others
                _fail(pm, info, exc)
    for name, module in DEFAULT_PLUGINS.items():
        if name in blocked or pm.has_plugin(name):
            continue
        pm.register(importlib.import_module(module), name=name)
        replay(pm, name)
        pm.info[name] = PluginInfo(name, "thoth-core", _core_version(), enabled=True)
    check_pending(pm)
    check_plugin_tables(config, pm.get_plugins())
    check_plugin_values(config, pm.get_plugins(), declared_only=True)  # at start, not when a layer reads it
    return pm


def check_pending(pm: ThothPluginManager) -> None:
    """Unregister each installed plugin that implements a hook no plugin declares (and is not optional).

    Runs once every plugin's hookspecs are in; a built-in default with such a hook is a ConfigError.
    """
    while True:
        try:
            pm.check_pending()
            return
        except pluggy.PluginValidationError as exc:
            name = pm.get_name(exc.plugin)
            info = pm.info.get(name or "")
            if name is None or info is None or info.distribution == "thoth-core":
                problem = signature_problem(pm, exc.plugin) or " ".join(str(exc).split())
                raise ConfigError(f"built-in plugin {name or exc.plugin!r}: wrong signature: {problem}") from exc
            _fail(pm, info, exc)


def _fail(pm: ThothPluginManager, info: PluginInfo, exc: Exception) -> None:
    """Take a plugin that could not load out of the manager; `thoth plugins` shows why, in one line."""
    if pm.get_plugin(info.name) is not None:
        pm.unregister(name=info.name)
    if isinstance(exc, pluggy.PluginValidationError):
        info.error = f"wrong signature: {signature_problem(pm, exc.plugin) or ' '.join(str(exc).split())}"
    else:
        info.error = " ".join(f"{type(exc).__name__}: {exc}".split())
    info.enabled = False
    logger.error("plugin %s failed to load: %s", info.name, info.error)


def signature_problem(pm: pluggy.PluginManager, plugin: object) -> str | None:
    """What is wrong with a plugin's hook implementations, in one line with a did-you-mean; None: nothing found."""
    specs = {name: caller.spec for name, caller in vars(pm.hook).items() if getattr(caller, "spec", None)}
    for attribute in dir(plugin):
        opts = pm.parse_hookimpl_opts(plugin, attribute)
        if opts is None:
            continue
        hook = opts.get("specname") or attribute
        spec = specs.get(hook)
        if spec is None:
            if opts.get("optionalhook"):
                continue
            close = difflib.get_close_matches(hook, list(specs), n=1)
            return f"unknown hook {hook!r}" + (f"; did you mean {close[0]!r}?" if close else "")
        try:
            names = list(inspect.signature(getattr(plugin, attribute)).parameters)
        except (TypeError, ValueError):
            continue
        allowed = [*spec.argnames, *spec.kwargnames]
        for name in names:
            if name not in allowed:
                close = difflib.get_close_matches(name, allowed, n=1)
                mean = f"; did you mean {close[0]!r}?" if close else ""
                return f"{hook}({', '.join(names)}): no argument {name!r} (the hook passes {', '.join(allowed)}){mean}"
    return None


@functools.cache
def _core_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("thoth-core")
    except PackageNotFoundError:
        return "dev"
