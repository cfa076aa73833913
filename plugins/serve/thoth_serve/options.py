"""What one `thoth serve` runs with: the bind, the token, the peer pin, CORS origins.

The parent process passes them to uvicorn's worker processes through one environment variable
(`THOTH_SERVE_OPTIONS`, JSON), since each worker builds its own app from the factory.
"""

from __future__ import annotations

import ipaddress
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from thoth_core.errors import ThothError

ENV = "THOTH_SERVE_OPTIONS"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8766


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and `localhost`."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ServeOptions:
    """One service's settings; `config` is the thoth.toml it loads (None: `$THOTH_CONFIG`, else the nearest)."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None
    peer: str | None = None
    workspace: str | None = None
    cors_origins: tuple[str, ...] = field(default_factory=tuple)
    config: str | None = None

    @property
    def loopback(self) -> bool:
        """Whether the service listens on a loopback address only."""
        return is_loopback(self.host)

    def check(self) -> ServeOptions:
        """These options, or a ThothError of one line: a non-loopback bind needs a token."""
        if not self.loopback and not self.token:
            raise ThothError(
                f"--host {self.host}: not a loopback address, and no token is set: set THOTH_TOKEN or --token-file "
                "(whoever reaches the port could read and delete this agent's memory)"
            )
        for origin in self.cors_origins:
            if origin != "*" and not origin.startswith(("http://", "https://")):
                raise ThothError(f"--cors-origin {origin!r}: expected an origin such as https://example.org")
        return self

    def to_env(self) -> str:
        """These options as the value of `THOTH_SERVE_OPTIONS`."""
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> ServeOptions:
        """The options the parent process left in `THOTH_SERVE_OPTIONS` (defaults without it)."""
        raw = os.environ.get(ENV)
        if not raw:
            return cls()
        data = json.loads(raw)
        data["cors_origins"] = tuple(data.get("cors_origins") or ())
        return cls(**data)


def read_token(path: Path | None) -> str | None:
    """The token: the file's first line (`--token-file`), else `$THOTH_TOKEN`, else None."""
    if path is not None:
        try:
            token = path.read_text(encoding="utf-8").strip().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ThothError(f"--token-file {path}: cannot read: {exc}") from exc
        if not token or not token[0].strip():
            raise ThothError(f"--token-file {path}: empty; expected the token on its first line")
        return token[0].strip()
    return os.environ.get("THOTH_TOKEN", "").strip() or None


__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "ENV", "ServeOptions", "is_loopback", "read_token"]
