"""A2A over gRPC: the SDK's `GrpcHandler` per definition, on one port of the server.

gRPC has no URL path to name an agent, so the port serves every definition and a
request names its agent in the A2A ``tenant`` field: each definition's card declares
its GRPC interface with ``tenant`` = the definition name, and the SDK client copies it
into every request. A request without a tenant goes to the only definition when there
is one (the kit's client sends none).

A present ``a2a-version`` metadata value must be 1.0 (the SDK's HTTP dispatchers check
the header; its gRPC handler does not), answered with the SDK's VersionNotSupported
status otherwise.

Authentication is the HTTP side's (a `CredentialCheck` the app factory hands over):
the same ``authorization`` (or ``x-api-key``) credentials, sent as gRPC metadata;
without valid ones a call ends ``UNAUTHENTICATED`` before it reaches the handler.

Requires the ``a2a-grpc`` extra (``grpcio``); `GrpcServer` is only built when
``server.a2a.grpcPort`` is set.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, Mapping
from contextlib import aclosing
from contextvars import ContextVar
from typing import Any

import a2a.types.a2a_pb2_grpc as a2a_grpc
import grpc
import grpc.aio
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.grpc_handler import (
    DefaultGrpcServerCallContextBuilder,
    GrpcHandler,
)
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import a2a_pb2
from a2a.utils.constants import PROTOCOL_VERSION_1_0, VERSION_HEADER
from a2a.utils.errors import A2AError, VersionNotSupportedError
from a2a.utils.proto_utils import to_stream_response
from starlette.datastructures import Headers

from agentkeel.a2a.call_state import PRINCIPAL_STATE, TRANSPORT_STATE
from agentkeel.a2a.credentials import CredentialCheck
from agentkeel.a2a.handler import AgentRequestHandler
from agentkeel.a2a.mapping import RESPONSE_ARTIFACT, Mapped, TextChunk
from agentkeel.errors import AgentkeelError

__all__ = ["GrpcServer"]

logger = logging.getLogger(__name__)

_Context = grpc.aio.ServicerContext[Any, Any]
_principal: ContextVar[str | None] = ContextVar("agentkeel_grpc_principal", default=None)
_STOP_GRACE_SECONDS = 5.0


class _CallContextBuilder(DefaultGrpcServerCallContextBuilder):
    """The SDK's call context, plus the principal `_Router` authenticated."""

    def build(self, context: _Context) -> ServerCallContext:
        built = super().build(context)
        built.state[PRINCIPAL_STATE] = _principal.get()
        built.state[TRANSPORT_STATE] = "GRPC"
        return built


class _Router(a2a_grpc.A2AServiceServicer):
    """Authenticates a call, then hands it to the GrpcHandler of the tenant it names."""

    def __init__(
        self,
        handlers: Mapping[str, GrpcHandler],
        authenticator: CredentialCheck | None,
        builder: _CallContextBuilder,
    ) -> None:
        self.handlers = handlers
        self.authenticator = authenticator
        self.builder = builder

    async def _pick(self, request: Any, context: _Context) -> GrpcHandler:
        tenant = str(getattr(request, "tenant", "") or "")
        if not tenant and len(self.handlers) == 1:
            handler = next(iter(self.handlers.values()))
        else:
            found = self.handlers.get(tenant)
            if found is None:
                names = ", ".join(sorted(self.handlers))
                await context.abort(
                    grpc.StatusCode.NOT_FOUND,
                    f"no agent {tenant!r} here: name one of {names} in the request's tenant",
                )
                raise AssertionError("unreachable: abort raises")
            handler = found
        metadata = context.invocation_metadata() or ()
        headers = Headers({str(k).lower(): v for k, v in metadata if isinstance(v, str)})
        asked = headers.get(VERSION_HEADER.lower(), "").strip()
        if asked and asked != PROTOCOL_VERSION_1_0 and not asked.startswith("1.0."):
            # the SDK checks the header on HTTP only; a missing one is fine here, since
            # the 1.0 service name (lf.a2a.v1) already says which protocol the client speaks
            error = VersionNotSupportedError(message=f"A2A-Version {asked} is not supported")
            await handler.abort_context(error, context)
        principal = None
        if self.authenticator is not None:
            try:
                principal = await self.authenticator.authenticate(headers)
            except AgentkeelError as exc:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, exc.message)
        _principal.set(principal)
        return handler

    async def SendMessage(
        self, request: a2a_pb2.SendMessageRequest, context: _Context
    ) -> a2a_pb2.SendMessageResponse:
        return await (await self._pick(request, context)).SendMessage(request, context)

    async def SendStreamingMessage(
        self, request: a2a_pb2.SendMessageRequest, context: _Context
    ) -> AsyncIterable[a2a_pb2.StreamResponse]:
        """The handler's batches as StreamResponses, without the SDK's layers per event.

        The SDK's path wraps every event in four generators and copies it twice (into
        an event, then into the response); a token-by-token stream sends one per token.
        Errors end the call as the SDK's `GrpcHandler` ends it.
        """
        handler = await self._pick(request, context)
        agent = handler.request_handler
        if not isinstance(agent, AgentRequestHandler):
            async for item in handler.SendStreamingMessage(request, context):
                yield item
            return
        call = self.builder.build(context)
        call.tenant = request.tenant
        try:
            async with aclosing(agent.stream_batches(request, call)) as batches:
                async for batch in batches:
                    for event in batch:
                        yield _stream_response(event)
        except A2AError as exc:
            await handler.abort_context(exc, context)

    async def SubscribeToTask(
        self, request: a2a_pb2.SubscribeToTaskRequest, context: _Context
    ) -> AsyncIterable[a2a_pb2.StreamResponse]:
        handler = await self._pick(request, context)
        async for item in handler.SubscribeToTask(request, context):
            yield item

    async def GetTask(self, request: a2a_pb2.GetTaskRequest, context: _Context) -> a2a_pb2.Task:
        return await (await self._pick(request, context)).GetTask(request, context)

    async def ListTasks(
        self, request: a2a_pb2.ListTasksRequest, context: _Context
    ) -> a2a_pb2.ListTasksResponse:
        return await (await self._pick(request, context)).ListTasks(request, context)

    async def CancelTask(
        self, request: a2a_pb2.CancelTaskRequest, context: _Context
    ) -> a2a_pb2.Task:
        return await (await self._pick(request, context)).CancelTask(request, context)

    async def CreateTaskPushNotificationConfig(
        self, request: a2a_pb2.TaskPushNotificationConfig, context: _Context
    ) -> a2a_pb2.TaskPushNotificationConfig:
        handler = await self._pick(request, context)
        return await handler.CreateTaskPushNotificationConfig(request, context)

    async def GetTaskPushNotificationConfig(
        self,
        request: a2a_pb2.GetTaskPushNotificationConfigRequest,
        context: _Context,
    ) -> a2a_pb2.TaskPushNotificationConfig:
        handler = await self._pick(request, context)
        return await handler.GetTaskPushNotificationConfig(request, context)

    async def ListTaskPushNotificationConfigs(
        self,
        request: a2a_pb2.ListTaskPushNotificationConfigsRequest,
        context: _Context,
    ) -> a2a_pb2.ListTaskPushNotificationConfigsResponse:
        handler = await self._pick(request, context)
        return await handler.ListTaskPushNotificationConfigs(request, context)

    async def DeleteTaskPushNotificationConfig(
        self,
        request: a2a_pb2.DeleteTaskPushNotificationConfigRequest,
        context: _Context,
    ) -> Any:
        handler = await self._pick(request, context)
        return await handler.DeleteTaskPushNotificationConfig(request, context)

    async def GetExtendedAgentCard(
        self, request: a2a_pb2.GetExtendedAgentCardRequest, context: _Context
    ) -> a2a_pb2.AgentCard:
        handler = await self._pick(request, context)
        return await handler.GetExtendedAgentCard(request, context)


def _stream_response(event: Mapped) -> a2a_pb2.StreamResponse:
    """`event` as the StreamResponse a gRPC stream sends (a text chunk built in place)."""
    if not isinstance(event, TextChunk):
        return to_stream_response(event)
    response = a2a_pb2.StreamResponse()
    update = response.artifact_update
    update.task_id, update.context_id = event.task_id, event.context_id
    update.append, update.last_chunk = event.append, event.last
    artifact = update.artifact
    artifact.artifact_id = artifact.name = RESPONSE_ARTIFACT
    artifact.parts.add(text=event.text)
    return response


class GrpcServer:
    """The A2A gRPC port of a server: every definition's handler behind one router.

    Args:
        handlers: The request handler of each definition, by name (the tenant).
        host: The address to listen on (``server.host``).
        port: The port (``server.a2a.grpcPort``; 0 picks a free one).
        authenticator: Checks credentials when ``server.auth`` is on.
    """

    def __init__(
        self,
        handlers: Mapping[str, RequestHandler],
        *,
        host: str,
        port: int,
        authenticator: CredentialCheck | None,
    ) -> None:
        builder = _CallContextBuilder()
        grpc_handlers = {
            name: GrpcHandler(handler, context_builder=builder)
            for name, handler in handlers.items()
        }
        self.router = _Router(grpc_handlers, authenticator, builder)
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        """The bound port, once started."""
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        """Listen (raises AgentkeelError when the port cannot be bound)."""
        server = grpc.aio.server()
        a2a_grpc.add_A2AServiceServicer_to_server(self.router, server)  # type: ignore[no-untyped-call]
        shown = f"[{self.host}]" if ":" in self.host else self.host
        try:
            port = server.add_insecure_port(f"{shown}:{self.requested_port}")
        except RuntimeError:
            port = 0
        if not port:
            raise AgentkeelError(
                f"the A2A gRPC server could not listen on {shown}:{self.requested_port}"
            )
        await server.start()
        self._server, self.port = server, port
        logger.info("port=<%d> | serving A2A over gRPC", port)

    async def stop(self) -> None:
        """Stop taking calls; running ones get a short grace."""
        if self._server is not None:
            await self._server.stop(_STOP_GRACE_SECONDS)
            self._server = None
