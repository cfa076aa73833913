"""Thoth's plugin manager: pluggy's, plus what `thoth plugins` shows and each hook's calling policy.

`info` says, for every plugin found (registered or not), its distribution, version and whether it is
enabled. `policies` holds the `HookPolicy` of every declared hook: the core's table
(`hookspecs.POLICIES`) and those of the hookspecs modules plugins add (`add_hookspecs`); a module's
policy must agree with its spec's `firstresult` and `historic` options. `history` keeps the
historic calls made so far, which the dispatcher replays for a plugin registered later.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pluggy

from .hookspecs import HookPolicy

GROUP = "thoth"


@dataclass
class PluginInfo:
    """What `thoth plugins` shows about one plugin."""

    name: str
    distribution: str
    version: str
    enabled: bool
    error: str | None = None


class ThothPluginManager(pluggy.PluginManager):
    """A pluggy manager that knows each plugin's distribution and each hook's policy."""

    def __init__(self, project_name: str = GROUP) -> None:
        super().__init__(project_name)
        self.info: dict[str, PluginInfo] = {}
        self.policies: dict[str, HookPolicy] = {}
        self.history: list[tuple[str, dict[str, Any]]] = []

    @property
    def thoth_info(self) -> dict[str, PluginInfo]:
        """The former name of `info`, kept for plugins written before it."""
        return self.info

    def add_hookspecs(self, module_or_class: ModuleType | type) -> None:
        """Add a module's hookspecs and its `POLICIES`; a policy that contradicts its spec raises ValueError."""
        super().add_hookspecs(module_or_class)
        declared: dict[str, HookPolicy] = dict(getattr(module_or_class, "POLICIES", {}))
        for name in dir(module_or_class):
            opts = self.parse_hookspec_opts(module_or_class, name)
            if opts is None:
                continue
            policy = declared.pop(name, None) or HookPolicy.of_spec(opts)
            if policy.firstresult != bool(opts.get("firstresult")) or policy.historic != bool(opts.get("historic")):
                raise ValueError(
                    f"{getattr(module_or_class, '__name__', module_or_class)}: POLICIES[{name!r}] is {policy.style!r},"
                    f" but the spec says firstresult={bool(opts.get('firstresult'))},"
                    f" historic={bool(opts.get('historic'))}"
                )
            self.policies[name] = policy
        if declared:
            raise ValueError(f"POLICIES names hooks with no spec: {', '.join(sorted(declared))}")

    def policy(self, hook: str) -> HookPolicy:
        """How a hook is called; a hook without a spec (its declaring plugin absent) is called like a plain one."""
        found = self.policies.get(hook)
        if found is not None:
            return found
        caller = getattr(self.hook, hook, None)
        spec = caller.spec if caller is not None else None
        return HookPolicy.of_spec(spec.opts if spec is not None else {})

    def implementers(self, hook: str) -> list[str]:
        """The names of the plugins that implement a hook, in registration order (trylast first, tryfirst last)."""
        caller = getattr(self.hook, hook, None)
        return [impl.plugin_name for impl in caller.get_hookimpls()] if caller is not None else []
