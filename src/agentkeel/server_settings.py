"""The runtime forms of framework.json's ``server`` and ``retention`` sections.

They live apart from the loader (`agentkeel.framework`, which re-exports them) so that
code which only reads settings does not depend on how a file is parsed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from agentkeel.auth_settings import AuthSettings

__all__ = [
    "JSON_BODY",
    "A2ASettings",
    "ConcurrencyPolicy",
    "LimitSettings",
    "Retention",
    "ServerSettings",
]

JSON_BODY = "agentkeel.json_body"
"""Key of the decoded JSON body in the ASGI ``scope["state"]``: the server's request
limits set it (absent for an empty body), the native handlers and the bindings read it,
so that no body is decoded twice."""

ConcurrencyPolicy: TypeAlias = Literal["queue", "reject", "interrupt", "rollback"]
"""``server.concurrency``, and a turn's own ``multitask`` (SPEC 5)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class A2ASettings:
    """The ``server.a2a`` section: the A2A binding's gRPC port and push-webhook policy."""

    grpc_port: int | None = None
    """Serve A2A over gRPC on this port of ``server.host`` (0: any free one); None: off."""
    allow_private_webhooks: bool = False
    """Let push notifications go to loopback and private addresses (tests, internal
    deployments); off, such webhook URLs are refused (SSRF)."""
    deduplicate_messages: bool = True
    """A message sent again with the same ``messageId`` and content, on the same
    transport, joins the first one's task (a retry runs once); false runs every message,
    for senders that reuse ids (the A2A conformance kit does)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitSettings:
    """The ``server.limits`` section: what one principal may take (None: no limit).

    Over a limit a request gets ``429 rate_limited`` with ``Retry-After``; a message over
    `max_message_bytes` gets ``413 message_too_large``. Principals are those of
    ``server.auth``; without it every caller is the one anonymous principal.
    """

    streams_per_principal: int | None = None
    """SSE streams (turns streamed and reconnects) one principal holds open at once."""
    turns_per_minute_per_principal: int | None = None
    """Turns (messages and resumes) one principal starts in any 60 seconds."""
    turns_per_minute_per_context: int | None = None
    """Turns started on one context in any 60 seconds."""
    max_message_bytes: int | None = None
    """The largest message, in UTF-8 bytes of its text."""
    stream_stall_seconds: float = 30.0
    """A reader that stopped reading is dropped after its stream's send buffer stayed
    full this long (its run goes on, and keeps its frames for a reconnect)."""
    body_timeout_seconds: float = 30.0
    """A request body must arrive whole within this long, or ``408 request_timeout``."""
    counters: str | None = field(default=None, repr=False)  # a URL may hold a password
    """Where the counts live, as a URL (`agentkeel.runtime.limits_registry`); None:
    the coordination's own backend."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """The ``server`` section: how the HTTP server binds and what it tolerates."""

    host: str = "127.0.0.1"
    port: int = 8000
    ui: bool = True
    """Serve the demo chat page at ``/`` (it is bundled in the package); false turns it off."""
    transcript: bool = True
    """Serve a conversation's messages (SPEC 3); false answers 404 and leaves titles empty,
    for deployments that want nothing of a history on the wire."""
    max_body_bytes: int = 1_048_576
    concurrency: ConcurrencyPolicy = "queue"
    """What a turn on a busy context meets: it waits in line (``queue``), gets ``409
    context_busy`` (``reject``), or cancels the running run, which keeps what it
    completed (``interrupt``) or leaves the history as if never sent (``rollback``)."""
    cors: tuple[str, ...] = ()
    heartbeat_seconds: float = 15.0
    """A comment is sent on a stream idle this long, so proxies keep it open."""
    shutdown_timeout_seconds: float = 30.0
    """How long running turns may go on after a shutdown signal before they are cancelled."""
    auth: AuthSettings | None = None
    """API keys and JWTs (`agentkeel.server.auth`); None serves everyone as one principal."""
    a2a: A2ASettings = field(default_factory=A2ASettings)
    """The A2A binding's options beyond HTTP (SPEC 6)."""
    limits: LimitSettings = field(default_factory=LimitSettings)
    """Per-principal limits and slow-client timeouts."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Retention:
    """The ``retention`` section, in seconds (None: kept without a time limit)."""

    runs: float | None = None
    events: float | None = 3600.0
    """How long a run's stream frames stay available for a reconnect."""
    idle_sessions: float | None = None
