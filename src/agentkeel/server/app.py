"""The Starlette app: route table, middleware stack and the lifespan that owns the runs.

Routing only: the handlers parse and encode, the runtime (`ServerRuntime`) runs turns in
the task group this lifespan opens, and shutting down drains that task group. The
middleware stack, outermost first: CORS (when origins are configured), the JSON error
guard, authentication (when ``server.auth`` is set), the request limits. All of it is
pure ASGI, so streams pass straight through. Every Agent a definition builds gets the
run log line (logger ``agentkeel.server``) and, when OpenTelemetry is installed, spans
(`agentkeel.telemetry`).
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from pathlib import Path

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentkeel.agent import Agent
from agentkeel.checkpoint.base import Checkpointer
from agentkeel.checkpoint.memory import InMemoryCheckpointer
from agentkeel.errors import ConfigurationError
from agentkeel.framework import (
    AgentDefinition,
    AgentFactory,
    Framework,
    Retention,
    ServerSettings,
    checked_factory,
    describe_factory,
    load_framework,
)
from agentkeel.ids import DEFINITION_NAME_PATTERN
from agentkeel.multiagent import Swarm
from agentkeel.runtime.coordination_registry import coordination_running, open_coordination
from agentkeel.runtime.runs import ServerRuntime
from agentkeel.runtime.toolsets import open_toolsets
from agentkeel.server import handlers
from agentkeel.server.auth import Authenticator, AuthMiddleware
from agentkeel.server.conversations import conversation_routes
from agentkeel.server.errors import ErrorMiddleware, RouteNotFoundError, error_response
from agentkeel.server.limits import RequestLimits
from agentkeel.server.memory import memory_routes
from agentkeel.server.openapi import build_document, openapi_endpoint
from agentkeel.server.sweeper import RetentionSweeper
from agentkeel.storage.base import SessionStorage
from agentkeel.storage.memory import InMemoryStorage
from agentkeel.telemetry import instrument

__all__ = ["A2AServer", "FrameworkSource", "create_app"]

logger = logging.getLogger(__name__)

FrameworkSource = Framework | str | os.PathLike[str] | Mapping[str, object]
"""A Framework, the path of a framework.json, or its parsed content."""

_UI_PAGE = Path(__file__).with_name("static") / "index.html"
_RUN_LOG = logging.getLogger("agentkeel.server")
"""Where the one line per run goes (see `agentkeel.telemetry.RunLogHooks`)."""


class _NoCache:
    """Pure ASGI wrapper adding ``Cache-Control: no-cache`` to the page's assets."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_no_cache(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"cache-control", b"no-cache")]
            await send(message)

        await self.app(scope, receive, send_no_cache)


def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 as JSON error bodies."""
    del request
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status == 405:
        body = b'{"error":{"code":"method_not_allowed","message":"method not allowed here"}}'
        return Response(body, status_code=405, media_type="application/json")
    status, body = error_response(RouteNotFoundError("no endpoint at this path"))
    return Response(body, status_code=status, media_type="application/json")


def _routes(settings: ServerSettings) -> list[BaseRoute]:
    routes: list[BaseRoute] = [
        Route("/agents", handlers.list_agents, methods=["GET"]),
        Route("/agents/{name}/stream", handlers.stream, methods=["POST"]),
        Route("/agents/{name}/send", handlers.send, methods=["POST"]),
        Route("/agents/{name}/contexts/{context_id}/stream", handlers.reconnect, methods=["GET"]),
        Route("/agents/{name}/contexts/{context_id}", handlers.delete_context, methods=["DELETE"]),
        Route("/agents/{name}/contexts/{context_id}/cancel", handlers.cancel, methods=["POST"]),
        *conversation_routes(),
        Route("/healthz", handlers.healthz, methods=["GET"]),
        Route("/readyz", handlers.readyz, methods=["GET"]),
        Route("/metrics", handlers.metrics, methods=["GET"]),
        Route("/openapi.json", openapi_endpoint, methods=["GET"]),
        *memory_routes(),
    ]
    if settings.ui and _UI_PAGE.is_file():
        # the bundle's file names carry no hash, so caches must revalidate them
        fresh = {"Cache-Control": "no-cache"}
        routes.append(
            Route("/", lambda request: FileResponse(_UI_PAGE, headers=fresh), methods=["GET"])
        )
        routes.append(
            Mount("/assets", app=_NoCache(StaticFiles(directory=_UI_PAGE.parent / "assets")))
        )
    elif settings.ui:
        logger.warning("server.ui is on, but the demo page is not bundled in this build")
    return routes


def _observed(framework: Framework) -> Framework:
    """`framework` with factories that instrument what they build (run log, spans)."""

    def observed(factory: AgentFactory) -> AgentFactory:
        def build(context_id: str) -> Agent | Swarm:
            served = factory(context_id)
            instrument(served, logger=_RUN_LOG)
            return served

        return build

    definitions = {
        name: replace(item, factory=observed(item.factory))
        for name, item in framework.definitions.items()
    }
    return replace(framework, definitions=definitions)


_frozen = False


def _freeze_startup_heap() -> None:
    """Take what startup built out of the cyclic collector's view, once per process.

    The modules, classes and tables that imports leave (the A2A and gRPC SDKs, pydantic,
    protobuf: some 120,000 objects) live as long as the process, yet every full
    collection walked all of them again: a pause of 25-70 ms that stalled every stream
    at once and cost a few hundred microseconds per turn. `gc.freeze` moves them to the
    permanent generation (a collection first, so no garbage is frozen); objects made
    later are collected as before.
    """
    global _frozen
    if not _frozen:
        _frozen = True
        gc.collect()
        gc.freeze()


def create_app(source: FrameworkSource, *, routes: list[BaseRoute] | None = None) -> Starlette:
    """The ASGI app serving every agent of a framework on the native wire.

    Args:
        source: A Framework, a framework.json path, or its parsed content.
        routes: Extra routes (another binding, such as A2A), mounted before the native ones;
            they reach the shared runtime as ``request.app.state.runtime``.

    Raises:
        ConfigurationError: The framework is invalid (naming the key and the file).
    """
    framework = source if isinstance(source, Framework) else load_framework(source)
    coordination = open_coordination(
        framework.coordination,
        framework.storage,
        framework.retention,
        limits=framework.server.limits.counters,
    )
    runtime = ServerRuntime(_observed(framework), coordination)
    settings = framework.server
    sweeper = RetentionSweeper(
        framework.storage,
        framework.retention,
        delete_context=runtime.delete_context,
        on_swept=lambda kind, count: runtime.metrics.swept.inc(kind, amount=count),
    )

    from agentkeel.a2a import A2ABinding  # the A2A binding (SPEC 6), on the same runtime
    from agentkeel.bindings.ai_sdk import ai_sdk_routes  # SPEC 10's AI SDK stream, likewise

    authenticator = (
        None if settings.auth is None else Authenticator(settings.auth, source=framework.source)
    )
    binding = A2ABinding(runtime, authenticator)
    # the bindings of SPEC 10, on the same runtime facade
    from agentkeel.bindings.agui import AGUIBinding
    from agentkeel.bindings.openai import OpenAIBinding

    chat_completions, ag_ui = OpenAIBinding(runtime), AGUIBinding(runtime)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        del app
        storage, memory = runtime.framework.storage, runtime.framework.memory
        stack = AsyncExitStack()
        await storage.open()  # connect and migrate before the first request
        try:
            if memory is not None:
                await memory.open()  # a PostgreSQL memory store's own pool, if it has one
            await stack.enter_async_context(coordination_running(runtime.coordination))
            # MCP servers open before the first turn and close after the last one drained;
            # the A2A binding (gRPC, push delivery) stops after the turns drained too
            async with (
                binding.running(),
                open_toolsets(framework),
                runtime.running(),
                anyio.create_task_group() as sweeping,
            ):
                sweeping.start_soon(sweeper.run_forever)  # retention, on a tick of its own
                _freeze_startup_heap()
                yield
                sweeping.cancel_scope.cancel()
        finally:
            await stack.aclose()  # the coordination closes after the turns drained
            if memory is not None:
                await memory.close()
            await storage.close()

    middleware = []
    if settings.cors:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(settings.cors),
                allow_methods=["GET", "POST", "DELETE"],
                allow_headers=[
                    *("content-type", "last-event-id", "idempotency-key", "authorization"),
                    "x-api-key",
                    *("x-conversation-id", "x-openwebui-chat-id"),
                    *("a2a-version", "a2a-extensions"),
                ],
                max_age=600,
            )
        )
    middleware.append(Middleware(ErrorMiddleware))
    if authenticator is not None:
        middleware.append(Middleware(AuthMiddleware, authenticator=authenticator))
    middleware.append(
        Middleware(
            RequestLimits,
            max_body_bytes=settings.max_body_bytes,
            body_timeout=settings.limits.body_timeout_seconds,
            on_refused=runtime.metrics.refusals.inc,
        )
    )
    app = Starlette(
        routes=[
            *(routes or []),
            *binding.routes,
            *chat_completions.routes,
            *ag_ui.routes,
            *ai_sdk_routes(),
            *_routes(settings),
        ],
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error},
    )
    app.state.runtime = runtime
    app.state.sweeper = sweeper
    app.state.openapi = build_document(framework.definitions, ui=settings.ui and _UI_PAGE.is_file())
    return app


class A2AServer:
    """Serve one agent built in code, with the same server as ``agentkeel serve``.

    The factory is called once per context (``agent_factory(context_id)``) and must
    return a new Agent each time. At start it is called once with `CATALOG_CONTEXT_ID`
    (never a real context) to check it and list its tools. The native wire is served
    now; the A2A binding mounts on the same app, so the two share contexts, sessions
    and runs.

    Args:
        agent_factory: Builds the Agent of one context.
        name: The definition name (``/agents/{name}/...``, session ids).
        description: What `GET /agents` says the agent does (default: the Agent's own).
        storage: Where sessions live (default: in memory).
        checkpointer: Where suspended runs wait (default: in memory).
        max_contexts: How many idle Agents the context cache keeps.
        settings: Host, port, limits, concurrency policy.
        retention: How long run frames stay available for reconnects.
    """

    def __init__(
        self,
        agent_factory: Callable[[str], Agent],
        *,
        name: str = "agent",
        description: str = "",
        storage: SessionStorage | None = None,
        checkpointer: Checkpointer | None = None,
        max_contexts: int = 1000,
        settings: ServerSettings | None = None,
        retention: Retention | None = None,
    ) -> None:
        if not DEFINITION_NAME_PATTERN.fullmatch(name):
            raise ConfigurationError(f"agent name {name!r} must match ^[a-z0-9][a-z0-9_-]{{0,63}}$")
        factory = checked_factory(agent_factory, name)
        definition = AgentDefinition(
            name=name, factory=factory, catalog=describe_factory(factory, description)
        )
        self.framework = Framework(
            definitions={name: definition},
            storage=InMemoryStorage() if storage is None else storage,
            checkpointer=InMemoryCheckpointer() if checkpointer is None else checkpointer,
            max_contexts=max_contexts,
            server=settings or ServerSettings(),
            retention=retention or Retention(),
        )
        self.app = create_app(self.framework)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve as an ASGI app (e.g. ``uvicorn module:server``)."""
        await self.app(scope, receive, send)

    def serve(self, *, host: str | None = None, port: int | None = None) -> None:
        """Run the server with uvicorn until it is stopped (see `serve_framework`)."""
        from agentkeel.server.serve import run_app

        run_app(self.app, self.framework, host=host, port=port)
