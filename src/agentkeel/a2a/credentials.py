"""What the A2A binding needs to check a caller's credentials, without the HTTP server.

The gRPC port authenticates with the same API keys and JWTs as the HTTP wires. The
binding never imports the native server package (the bindings depend on the runtime,
never on each other), so the app factory, which mounts both, hands it the server's
`Authenticator` through this small interface.
"""

from __future__ import annotations

from typing import Protocol

from starlette.datastructures import Headers

__all__ = ["CredentialCheck"]


class CredentialCheck(Protocol):
    """Checks a call's credentials and names its principal."""

    async def authenticate(self, headers: Headers) -> str:
        """The principal the headers' credentials prove; raise when they prove none."""
        ...
