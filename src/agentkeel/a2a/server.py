"""The A2A binding's routes: one agent card and one JSON-RPC endpoint per agent definition.

For each definition ``name`` of the framework:

- ``GET /agents/{name}/a2a/.well-known/agent-card.json``: the agent card, with a weak
  ``ETag`` (and ``304`` on ``If-None-Match``) and ``Cache-Control``; its JSONRPC
  interface URL is the base URL as the client reached it;
- ``POST /agents/{name}/a2a`` and ``POST /agents/{name}/a2a/``: JSON-RPC 2.0, protocol
  1.0, parsed, version-checked and encoded by the official SDK's dispatcher, answered
  by `AgentRequestHandler` over the server's shared runtime.

The caller's principal is read from ``scope["state"]["principal"]``, where the
authentication middleware puts it for every route (None while authentication is off),
exactly as the native handlers read it; it scopes contexts and tasks alike.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder
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
from starlette.routing import BaseRoute, Route

from agentkeel.a2a.executor import A2AExecutor
from agentkeel.a2a.handler import PRINCIPAL_STATE, AgentRequestHandler
from agentkeel.a2a.mapping import output_artifact
from agentkeel.a2a.stream import A2ADispatcher
from agentkeel.a2a.tasks import INDEX_DEFINITION
from agentkeel.a2a.turn import current_turn, publish_artifact
from agentkeel.auth_settings import AuthSettings
from agentkeel.errors import ConfigurationError
from agentkeel.framework import AgentDefinition
from agentkeel.hooks.events import AfterRunEvent
from agentkeel.output import output_json
from agentkeel.server.handlers import PRINCIPAL
from agentkeel.server.runs import ServerRuntime

__all__ = ["CARD_PATH", "a2a_routes", "agent_card"]

logger = logging.getLogger(__name__)

CARD_PATH = "/.well-known/agent-card.json"
"""Where a card is served, below an agent's A2A base URL."""
INPUT_MODES = ("text/plain", "application/json")
"""Text parts, and data parts (answers to interrupts, structured input)."""
OUTPUT_MODES = ("text/plain", "application/json")
_CACHE_CONTROL = "public, max-age=300"


def _version() -> str:
    try:
        return version("agentkeel")
    except PackageNotFoundError:
        return "0.0.0"


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
    if not skills:
        skills.append(
            AgentSkill(
                id=definition.name,
                name=definition.name,
                description=definition.description or "Converses, one turn at a time.",
                tags=["chat"],
            )
        )
    return skills


def agent_card(
    definition: AgentDefinition,
    url: str,
    *,
    auth: AuthSettings | None = None,
    skills: bool = True,
) -> AgentCard:
    """The agent card of `definition` served at `url` (its A2A base URL).

    Args:
        definition: The agent definition.
        url: The JSON-RPC endpoint (the base URL, as the client reaches it).
        auth: The server's authentication, declared as the card's security schemes
            (``Authorization: Bearer`` with an API key or a JWT; ``X-API-Key``).
        skills: Build the skills from the agent's tools (`AgentDefinition.describe`).
    """
    card = AgentCard(
        name=definition.name,
        description=definition.description or f"The agentkeel agent {definition.name}.",
        version=_version(),
        supported_interfaces=[
            AgentInterface(
                url=url,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_1_0,
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
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


class _CallContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, plus the principal the authentication middleware set."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        principal = request.scope.get("state", {}).get(PRINCIPAL)
        context.state[PRINCIPAL_STATE] = principal if isinstance(principal, str) else None
        return context


def _card_endpoint(
    definition: AgentDefinition, auth: AuthSettings | None
) -> Callable[[Request], Awaitable[Response]]:
    """The endpoint of one definition's card; a factory's skills are learned lazily."""

    async def card(request: Request) -> Response:
        skills = _skills(definition)  # describes the definition first (CATALOG_CONTEXT_ID)
        base = str(request.base_url).rstrip("/") + f"/agents/{definition.name}/a2a"
        served = agent_card(definition, base, auth=auth, skills=False)
        served.skills.extend(skills)
        body = agent_card_to_dict(served)
        encoded = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")
        headers = {
            "ETag": f'W/"{hashlib.sha256(encoded).hexdigest()[:32]}"',
            "Cache-Control": _CACHE_CONTROL,
            "Vary": "Host",
        }
        match = request.headers.get("if-none-match", "")
        candidates = {item.strip().removeprefix("W/") for item in match.split(",")}
        if headers["ETag"].removeprefix("W/") in candidates or "*" in candidates:
            return Response(status_code=304, headers=headers)
        return JSONResponse(body, headers=headers)

    return card


async def _publish_output(event: AfterRunEvent) -> None:
    """An output-typed run's answer joins its A2A task as a data artifact."""
    output = event.result.output
    if output is not None and current_turn() is not None:
        await publish_artifact(output_artifact(output_json(output)))


def a2a_routes(runtime: ServerRuntime) -> list[BaseRoute]:
    """The A2A routes of every definition served by `runtime` (mounted by `create_app`).

    Raises:
        ConfigurationError: A definition is named like the task index.
    """
    if INDEX_DEFINITION in runtime.framework.definitions:
        raise ConfigurationError(
            f"{runtime.framework.source}: agents.{INDEX_DEFINITION}: this name is reserved "
            "for the A2A task index; choose another"
        )
    runtime.agent_hooks.append((AfterRunEvent, _publish_output))
    auth = runtime.framework.server.auth
    routes: list[BaseRoute] = []
    builder = _CallContextBuilder()
    for name, definition in runtime.framework.definitions.items():
        base = f"/agents/{name}/a2a"
        handler = AgentRequestHandler(
            A2AExecutor(runtime, name), agent_card(definition, base, skills=False)
        )
        dispatcher = A2ADispatcher(
            heartbeat=runtime.framework.server.heartbeat_seconds,
            request_handler=handler,
            context_builder=builder,
        )
        routes.append(Route(base + CARD_PATH, _card_endpoint(definition, auth), methods=["GET"]))
        routes.append(Route(base, dispatcher.handle_requests, methods=["POST"]))
        routes.append(Route(base + "/", dispatcher.handle_requests, methods=["POST"]))
    return routes
