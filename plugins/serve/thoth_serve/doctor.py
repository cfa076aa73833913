"""`thoth doctor`'s line for the service: none advertised (fine), running and answering, or not answering."""

from __future__ import annotations

from pathlib import Path

from thoth_core.errors import ThothError


def service_line(home: Path) -> tuple[bool | None, str]:
    """(ok, what): ok True when none runs or it answers /v1/health; False when advertised but not answering."""
    from thoth_core.service import find_service

    try:
        service = find_service(home)
    except ThothError as exc:
        return False, f"service: {exc}"
    if service is None:
        return True, "service: none running for this home (thoth serve starts one; commands work in-process)"
    try:
        health = service.get("/v1/health")
    except ThothError as exc:
        return False, f"service: {service.url} is advertised but does not answer /v1/health: {exc}"
    return True, f"service: {service.url} answers (pid {health.get('pid')}, version {health.get('version') or '?'})"


__all__ = ["service_line"]
