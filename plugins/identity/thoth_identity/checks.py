"""`thoth doctor` lines for the Honcho backend: reachable, the key accepted, a server version this SDK speaks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
from honcho import __version__ as sdk_version

from .honcho_errors import describe

if TYPE_CHECKING:
    from .honcho_backend import HonchoBackend
    from .settings import IdentitySettings

API_MAJOR = 3  # honcho-ai 2.x speaks Honcho's /v3 routes: servers 3.x
CHECK_TIMEOUT = 3.0


def server_version(base_url: str) -> str | None:
    """The Honcho server's version from its OpenAPI document, or None when it does not say."""
    response = httpx.get(f"{base_url.rstrip('/')}/openapi.json", timeout=CHECK_TIMEOUT)
    if response.status_code != 200:
        return None
    version = (response.json().get("info") or {}).get("version")
    return str(version) if version else None


def honcho_checks(settings: IdentitySettings, backend: HonchoBackend) -> list[tuple[bool, str]]:
    """One (ok, line) per check; the later checks are skipped when the server cannot be reached."""
    url = str(settings.base_url)
    try:
        health = httpx.get(f"{url.rstrip('/')}/health", timeout=CHECK_TIMEOUT)
    except httpx.HTTPError as exc:
        return [(False, f"honcho: cannot connect to {url}: {type(exc).__name__}: {exc}")]
    if health.status_code != 200:
        return [(False, f"honcho: {url}/health answered {health.status_code}, not 200")]
    lines: list[tuple[bool, str]] = [(True, f"honcho: {url} is reachable")]
    try:
        version = server_version(url)
    except (httpx.HTTPError, ValueError) as exc:
        version, error = None, f"{type(exc).__name__}: {exc}"
    else:
        error = "its /openapi.json names no version"
    if version is None:
        lines.append((False, f"honcho: cannot tell the server's version ({error}); honcho-ai {sdk_version} needs 3.x"))
    else:
        major = version.split(".")[0]
        compatible = major.isdigit() and int(major) == API_MAJOR
        verdict = "compatible" if compatible else f"incompatible: honcho-ai {sdk_version} speaks the v3 API (3.x)"
        lines.append((compatible, f"honcho: server {version}, SDK honcho-ai {sdk_version}: {verdict}"))
    workspace = str(backend.runtime.config.get("thoth.workspace") or "default")
    try:
        backend.client(workspace, fast=False).peers(size=1)
    except Exception as exc:  # noqa: BLE001 - doctor reports, never crashes
        lines.append((False, f"honcho: {describe(exc, url)}"))
    else:
        key = "with the configured key" if settings.api_key else "without a key"
        lines.append((True, f"honcho: authenticated {key} (workspace {backend.workspace_id(workspace)})"))
    lines.append(_outbox_line(backend, workspace))
    return lines


def _outbox_line(backend: Any, workspace: str) -> tuple[bool, str]:
    waiting = backend.outbox.waiting() if backend.outbox is not None else 0
    if not waiting:
        return True, "honcho: no message waits in the outbox"
    return True, f"honcho: {waiting} message(s) wait in the outbox ({backend.store.where}); sent with the next turn"
