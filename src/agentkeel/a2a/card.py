"""The agent card: what an A2A client reads first, and how it is served and cached.

Each definition has two cards. The public one (``GET
/agents/{name}/a2a/.well-known/agent-card.json``) says who the agent is, how to reach
it (``supportedInterfaces``: JSONRPC at the base URL, HTTP+JSON at ``{base}/v1``, GRPC
when ``server.a2a.grpcPort`` is set) and how to authenticate. The extended card
(``GetExtendedAgentCard``) adds the skills: one per tool. With ``server.auth`` on, the
public card keeps the tools to itself (one skill saying what the agent does), so only
authenticated callers see them; without authentication every caller is the same
anonymous principal and both cards list them.

The public card carries a weak ``ETag`` and a ``Last-Modified`` (when this process first
served it, or when it last changed: a factory's tools may become known later), answers
``304`` to a matching ``If-None-Match`` or ``If-Modified-Since``, and may be cached
for five minutes.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from email.utils import formatdate, parsedate_to_datetime
from importlib.metadata import PackageNotFoundError, version

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentkeel.auth_settings import AuthSettings
from agentkeel.framework import AgentDefinition

__all__ = ["CARD_PATH", "REST_PATH", "CardSource", "agent_card"]

CARD_PATH = "/.well-known/agent-card.json"
"""Where a card is served, below an agent's A2A base URL."""
REST_PATH = "/v1"
"""Where the HTTP+JSON binding lives, below an agent's A2A base URL."""
INPUT_MODES = ("text/plain", "application/json")
"""Text parts, and data parts (answers to interrupts, structured input)."""
OUTPUT_MODES = ("text/plain", "application/json")
_CACHE_CONTROL = "public, max-age=300"


def _version() -> str:
    try:
        return version("agentkeel")
    except PackageNotFoundError:
        return "0.0.0"


def _overall_skill(definition: AgentDefinition) -> AgentSkill:
    return AgentSkill(
        id=definition.name,
        name=definition.name,
        description=definition.description or "Converses, one turn at a time.",
        tags=["chat"],
    )


def _skills(definition: AgentDefinition) -> list[AgentSkill]:
    """One skill per tool (what the agent can do); a tool-less agent converses."""
    descriptions = definition.describe().tools  # a factory's: see CATALOG_CONTEXT_ID
    skills = [
        AgentSkill(
            id=name,
            name=name,
            description=(descriptions.get(name) or f"The {name} tool.").strip().split("\n")[0],
            tags=["tool"],
        )
        for name in definition.skills
    ]
    return skills or [_overall_skill(definition)]


def agent_card(
    definition: AgentDefinition,
    url: str,
    *,
    auth: AuthSettings | None = None,
    skills: bool = True,
    grpc_url: str | None = None,
) -> AgentCard:
    """The agent card of `definition` served at `url` (its A2A base URL).

    Args:
        definition: The agent definition.
        url: The JSON-RPC endpoint (the base URL, as the client reaches it); the
            HTTP+JSON interface is at ``url + "/v1"``.
        auth: The server's authentication, declared as the card's security schemes
            (``Authorization: Bearer`` with an API key or a JWT; ``X-API-Key``).
        skills: Build the skills from the agent's tools (`AgentDefinition.describe`).
        grpc_url: ``host:port`` of the gRPC port, declared with the definition's name
            as its tenant; None when gRPC is off.
    """
    interfaces = [
        AgentInterface(
            url=url,
            protocol_binding=TransportProtocol.JSONRPC.value,
            protocol_version=PROTOCOL_VERSION_1_0,
        ),
        AgentInterface(
            url=url + REST_PATH,
            protocol_binding=TransportProtocol.HTTP_JSON.value,
            protocol_version=PROTOCOL_VERSION_1_0,
        ),
    ]
    if grpc_url is not None:
        interfaces.append(
            AgentInterface(
                url=grpc_url,
                protocol_binding=TransportProtocol.GRPC.value,
                protocol_version=PROTOCOL_VERSION_1_0,
                tenant=definition.name,
            )
        )
    card = AgentCard(
        name=definition.name,
        description=definition.description or f"The agentkeel agent {definition.name}.",
        version=_version(),
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=True, extended_agent_card=True
        ),
        default_input_modes=list(INPUT_MODES),
        default_output_modes=list(OUTPUT_MODES),
        skills=_skills(definition) if skills else [],
    )
    if auth is not None:
        _declare_security(card, auth)
    return card


def _declare_security(card: AgentCard, auth: AuthSettings) -> None:
    """The credentials `AuthMiddleware` takes, as schemes any one of which will do."""
    kinds = [name for name, on in (("an API key", auth.api_keys), ("a JWT", auth.jwt)) if on]
    bearer = HTTPAuthSecurityScheme(
        scheme="Bearer",
        description=f"{' or '.join(kinds) or 'A credential'}; the principal is the key's "
        "name or the token's sub",
    )
    if auth.jwt is not None and not auth.api_keys:
        bearer.bearer_format = "JWT"
    card.security_schemes["bearer"].CopyFrom(SecurityScheme(http_auth_security_scheme=bearer))
    card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    if auth.api_keys:
        api_key = APIKeySecurityScheme(
            location="header", name="X-API-Key", description="An API key."
        )
        card.security_schemes["apiKey"].CopyFrom(SecurityScheme(api_key_security_scheme=api_key))
        card.security_requirements.append(SecurityRequirement(schemes={"apiKey": StringList()}))


class CardSource:
    """Both cards of one definition, for any base URL; the skills are built once.

    Args:
        definition: The agent definition.
        auth: The server's authentication (None: off).
        grpc_port: The bound gRPC port, read when a card is built (None: off).
    """

    def __init__(
        self,
        definition: AgentDefinition,
        auth: AuthSettings | None,
        grpc_port: Callable[[], int | None],
    ) -> None:
        self.definition = definition
        self.auth = auth
        self.grpc_port = grpc_port
        self.last_base = ""
        """The base URL the card was last fetched at (how the extended card names it)."""
        self.modified = int(time.time())
        """When the public card last changed (`Last-Modified`), whole seconds."""
        self._etag = ""

    def skills(self) -> list[AgentSkill]:
        """The tool skills (a factory's are learned lazily: they may appear later)."""
        return _skills(self.definition)

    def card(self, base: str, host: str | None, *, extended: bool) -> AgentCard:
        """The card for clients reaching the agent at `base` (gRPC on `host`)."""
        port = self.grpc_port()
        grpc_url = None
        if port is not None and host:
            grpc_url = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        card = agent_card(self.definition, base, auth=self.auth, skills=False, grpc_url=grpc_url)
        if extended or self.auth is None:
            card.skills.extend(self.skills())
        else:
            card.skills.append(_overall_skill(self.definition))
        return card

    def endpoint(self) -> Callable[[Request], Awaitable[Response]]:
        """The public card's route endpoint, with its caching headers."""

        async def serve(request: Request) -> Response:
            base = str(request.base_url).rstrip("/") + f"/agents/{self.definition.name}/a2a"
            self.last_base = base
            body = agent_card_to_dict(self.card(base, request.url.hostname, extended=False))
            encoded = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")
            etag = f'W/"{hashlib.sha256(encoded).hexdigest()[:32]}"'
            if etag != self._etag:  # first served, or a factory's tools became known
                self._etag, self.modified = etag, max(self.modified, int(time.time()))
            headers = {
                "ETag": etag,
                "Last-Modified": formatdate(self.modified, usegmt=True),
                "Cache-Control": _CACHE_CONTROL,
                "Vary": "Host",
            }
            if _not_modified(request, etag, self.modified):
                return Response(status_code=304, headers=headers)
            return JSONResponse(body, headers=headers)

        return serve


def _not_modified(request: Request, etag: str, modified: int) -> bool:
    """RFC 9110: ``If-None-Match`` decides when present, else ``If-Modified-Since``."""
    match = request.headers.get("if-none-match")
    if match is not None:
        candidates = {item.strip().removeprefix("W/") for item in match.split(",")}
        return etag.removeprefix("W/") in candidates or "*" in candidates
    since = request.headers.get("if-modified-since")
    if since is None:
        return False
    try:
        return modified <= parsedate_to_datetime(since).timestamp()
    except (TypeError, ValueError):
        return False  # an unreadable date: send the card
