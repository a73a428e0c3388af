"""The A2A binding's settings: the ``server.a2a`` section of framework.json.

Kept apart from the binding (`agentkeel.a2a`) so that loading a framework needs neither
the A2A SDK's servers nor grpcio; `agentkeel.framework` validates the section.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["A2ASettings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class A2ASettings:
    """The ``server.a2a`` section: the A2A binding's gRPC port and push-webhook policy."""

    grpc_port: int | None = None
    """Serve A2A over gRPC on this port of ``server.host`` (0: any free one); None: off."""
    allow_private_webhooks: bool = False
    """Let push notifications go to loopback and private addresses (tests, internal
    deployments); off, such webhook URLs are refused (SSRF)."""
