"""The A2A binding of a server: every definition on JSON-RPC, HTTP+JSON and gRPC.

For each definition ``name`` of the framework:

- ``GET /agents/{name}/a2a/.well-known/agent-card.json``: the agent card (`CardSource`);
- ``POST /agents/{name}/a2a`` and ``POST /agents/{name}/a2a/``: JSON-RPC 2.0, protocol
  1.0, parsed, version-checked and encoded by the official SDK's dispatcher (the plain
  streaming send by `StreamEndpoints`, to the same wire);
- ``/agents/{name}/a2a/v1/...``: HTTP+JSON, the SDK's REST routes
  (``POST /v1/message:send``, ``GET /v1/tasks/{id}``, ...; ``message:stream`` likewise);
- gRPC on ``server.a2a.grpcPort`` when set (`GrpcServer`), the definition named by
  the request's ``tenant``.

All three call the same `A2AService` per definition, over the server's shared runtime.
The caller's principal is read from ``scope["state"]["principal"]``, where the
authentication middleware puts it for every HTTP route (None while authentication is
off), exactly as the native handlers read it; gRPC calls authenticate with the same
`Authenticator`. `A2ABinding.running` (in the app's lifespan) starts the gRPC port and
push delivery, and stops them after the runtime drained its turns.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from importlib.util import find_spec

from a2a.server.context import ServerCallContext
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.types import AgentCard
from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from agentkeel.a2a.call_state import PRINCIPAL_STATE, TRANSPORT_STATE
from agentkeel.a2a.card import CARD_PATH, REST_PATH, CardSource, agent_card
from agentkeel.a2a.credentials import CredentialCheck
from agentkeel.a2a.delivery import PushDelivery
from agentkeel.a2a.endpoints import StreamEndpoints
from agentkeel.a2a.executor import A2AExecutor
from agentkeel.a2a.mapping import output_artifact
from agentkeel.a2a.push import PUSH_INDEX_DEFINITION, StoredPushConfigs
from agentkeel.a2a.rest import rest_mount
from agentkeel.a2a.service import A2AService
from agentkeel.a2a.stream import A2ADispatcher
from agentkeel.a2a.tasks import INDEX_DEFINITION
from agentkeel.a2a.turn import current_turn, publish_artifact
from agentkeel.auth_settings import PRINCIPAL
from agentkeel.errors import ConfigurationError
from agentkeel.hooks.events import AfterRunEvent
from agentkeel.output import output_json
from agentkeel.runtime.facade import RunFacade

__all__ = ["CARD_PATH", "A2ABinding", "a2a_routes", "agent_card"]

logger = logging.getLogger(__name__)

_REQUEST_STATE = "agentkeel.request"
_REST_MARK = f"/a2a{REST_PATH}"  # in the path of every request under /agents/{name}/a2a/v1


class _CallContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, plus the principal the authentication middleware set.

    The request itself is kept for the extended card, which alone needs its URL: parsing
    that on every call would cost each turn more than the rest of this context.
    """

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        scope = request.scope
        principal = scope.get("state", {}).get(PRINCIPAL)
        context.state[PRINCIPAL_STATE] = principal if isinstance(principal, str) else None
        context.state[_REQUEST_STATE] = request
        rest = _REST_MARK in scope["path"] or _REST_MARK in scope.get("root_path", "")
        context.state[TRANSPORT_STATE] = "HTTP+JSON" if rest else "JSONRPC"
        return context


async def _publish_output(event: AfterRunEvent) -> None:
    """An output-typed run's answer joins its A2A task as a data artifact."""
    output = event.result.output
    if output is not None and current_turn() is not None:
        await publish_artifact(output_artifact(output_json(output)))


class A2ABinding:
    """The A2A routes, gRPC port and push delivery of every definition of `runtime`.

    Args:
        runtime: The runtime's facade (the one the native wire uses).
        authenticator: Checks gRPC calls' credentials; the app factory passes the HTTP
            server's when ``server.auth`` is on (None: calls are anonymous).

    Raises:
        ConfigurationError: A definition takes a name the binding reserves.
    """

    def __init__(self, runtime: RunFacade, authenticator: CredentialCheck | None = None) -> None:
        framework = runtime.framework
        for reserved in (INDEX_DEFINITION, PUSH_INDEX_DEFINITION):
            if reserved in framework.definitions:
                raise ConfigurationError(
                    f"{framework.source}: agents.{reserved}: this name is reserved for the "
                    "A2A binding's indexes; choose another"
                )
        self.runtime = runtime
        self.authenticator = authenticator
        """Checks gRPC calls' credentials (the server's, when ``server.auth`` is on)."""
        runtime.agent_hooks.append((AfterRunEvent, _publish_output))
        self.settings = framework.server.a2a
        if self.settings.grpc_port is not None and find_spec("grpc") is None:
            raise ConfigurationError(
                f"{framework.source}: server.a2a.grpcPort: gRPC needs the a2a-grpc extra "
                "(pip install 'agentkeel[a2a-grpc]')"
            )
        self.grpc_port: int | None = None
        """The bound gRPC port while serving (None: gRPC off or not started)."""
        self.services: dict[str, A2AService] = {}
        self.deliveries: list[PushDelivery] = []
        self.routes: list[BaseRoute] = []
        builder = _CallContextBuilder()
        for name, definition in framework.definitions.items():
            base = f"/agents/{name}/a2a"
            cards = CardSource(definition, framework.server.auth, lambda: self.grpc_port)
            executor = A2AExecutor(runtime, name, deduplicate=self.settings.deduplicate_messages)
            configs = StoredPushConfigs(framework.storage, name)
            delivery = PushDelivery(
                executor, configs, allow_private=self.settings.allow_private_webhooks
            )

            def extended(context: ServerCallContext, cards: CardSource = cards) -> AgentCard:
                request = context.state.get(_REQUEST_STATE)
                url = cards.last_base  # gRPC: the URL the public card was last read at
                host = None
                if isinstance(request, Request):
                    base_url = str(request.base_url).rstrip("/")
                    url, host = (
                        f"{base_url}/agents/{cards.definition.name}/a2a",
                        request.url.hostname,
                    )
                return cards.card(url, host, extended=True)

            service = A2AService(
                executor,
                agent_card(definition, base, skills=False),
                configs=configs,
                delivery=delivery,
                extended_card=extended,
                allow_private_webhooks=self.settings.allow_private_webhooks,
            )
            self.services[name] = service
            self.deliveries.append(delivery)
            dispatcher = A2ADispatcher(request_handler=service, context_builder=builder)
            endpoints = StreamEndpoints(service, builder, jsonrpc=dispatcher.handle_requests)
            self.routes += [
                Route(base + CARD_PATH, cards.endpoint(), methods=["GET"]),
                Route(base, endpoints.jsonrpc, methods=["POST"]),
                Route(base + "/", endpoints.jsonrpc, methods=["POST"]),
                rest_mount(base + REST_PATH, service, builder, endpoints.rest_endpoint),
            ]

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve gRPC (when configured) and deliver push notifications until exit."""
        async with AsyncExitStack() as stack:
            for delivery in self.deliveries:
                await stack.enter_async_context(delivery.running())
            grpc_server = None
            if self.settings.grpc_port is not None:
                from agentkeel.a2a.grpc_server import GrpcServer  # the a2a-grpc extra

                grpc_server = GrpcServer(
                    self.services,
                    host=self.runtime.framework.server.host,
                    port=self.settings.grpc_port,
                    authenticator=self.authenticator,
                )
                await grpc_server.start()
                self.grpc_port = grpc_server.port
            try:
                yield
            finally:
                self.grpc_port = None
                if grpc_server is not None:
                    await grpc_server.stop()


def a2a_routes(runtime: RunFacade) -> list[BaseRoute]:
    """The A2A routes of every definition served by `runtime`.

    Routes only (no gRPC, no push delivery): `A2ABinding` is the whole binding, which
    `create_app` mounts.

    Raises:
        ConfigurationError: A definition takes a reserved name.
    """
    return A2ABinding(runtime).routes
