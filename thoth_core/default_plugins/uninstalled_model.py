"""The providers of `thoth-models` when it is not installed: choosing one says what to install, in one line."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from thoth_core import ModelNotConfigured, hookimpl
from thoth_core.plugins import PROVIDERS, install_hint

if TYPE_CHECKING:
    from thoth_core.runtime import Runtime


def not_installed(name: str) -> Callable[[Any, dict[str, Any]], Any]:
    """A factory that refuses to build the provider: it names `thoth.model` and the pip command."""

    def make(runtime: Runtime, options: dict[str, Any]) -> Any:
        problem = runtime.config.error(
            "thoth.model", f"model provider {name!r} is not installed ({install_hint(name)})"
        )
        raise ModelNotConfigured(str(problem))

    return make


def uninstalled(installed: set[str]) -> list[str]:
    """The providers of thoth-models that no installed distribution offers."""
    return [name for name in PROVIDERS if name not in installed]


@hookimpl
def register_models(register: Callable[[str, Any], None]) -> None:
    installed = {ep.name for ep in entry_points(group="thoth")}  # installed but not loaded: the runtime says so
    for name in uninstalled(installed):
        register(name, not_installed(name))
