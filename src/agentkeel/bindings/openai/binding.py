"""The Chat Completions binding: ``POST /v1/chat/completions`` and ``GET /v1/models``.

``model`` is the agent's name. The conversation is the context named by the
``X-Conversation-Id`` header, or Open WebUI's ``X-OpenWebUI-Chat-Id``: the server keeps
its history, so only the last message of the request (the user's new one) is taken and
the rest is never read. A request without either header is a conversation of its own:
a fresh context seeded from the messages it carries, run once and deleted when the
answer is complete (also when the client went away), so nothing of it is kept.

Everything goes through the runtime's `RunFacade`, as the native wire does: the same
context cache, concurrency rule, budgets and run channels, so one conversation can be
started here and continued on the native wire or A2A.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import aclosing

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from agentkeel.bindings.calls import batches, context_key, json_body
from agentkeel.bindings.openai.completion import CompletionMapper, encode_event
from agentkeel.bindings.openai.errors import ModelNotFoundError, error_json, error_response
from agentkeel.bindings.openai.request import ChatRequest, parse_chat_request
from agentkeel.errors import AgentkeelError, InvalidRequestError
from agentkeel.ids import new_context_id
from agentkeel.messages import JSONObject
from agentkeel.runtime.facade import RunFacade
from agentkeel.runtime.runs import RunJob
from agentkeel.runtime.wire import SendRequest
from agentkeel.storage.base import SessionKey

__all__ = ["CONTEXT_HEADERS", "OpenAIBinding"]

logger = logging.getLogger(__name__)

CONTEXT_HEADERS = ("x-conversation-id", "x-openwebui-chat-id")
"""The headers that name the conversation, first one present wins."""
_KEEP_ALIVE = b": keep-alive\n\n"
_DONE = encode_event("[DONE]")


class OpenAIBinding:
    """Serves every agent definition of a runtime as an OpenAI chat model.

    Args:
        runtime: The runtime's facade (the app's shared `ServerRuntime`).
    """

    def __init__(self, runtime: RunFacade) -> None:
        self.runtime = runtime
        self.created = 0  # the model list's `created`: no agent has a release date

    @property
    def routes(self) -> list[BaseRoute]:
        """The binding's routes, for the app factory to mount."""
        return [
            Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
            Route("/v1/models", self.list_models, methods=["GET"]),
            Route("/v1/models/{model:path}", self.get_model, methods=["GET"]),
        ]

    def _model(self, name: str) -> JSONObject:
        return {"id": name, "object": "model", "created": self.created, "owned_by": "agentkeel"}

    async def list_models(self, request: Request) -> Response:
        """``GET /v1/models``: every agent definition, as a model."""
        del request
        names = list(self.runtime.framework.definitions)
        return JSONResponse({"object": "list", "data": [self._model(name) for name in names]})

    async def get_model(self, request: Request) -> Response:
        """``GET /v1/models/{model}``: one agent, or NotFoundError."""
        name = request.path_params["model"]
        if name not in self.runtime.framework.definitions:
            return error_response(ModelNotFoundError(f"the model {name!r} does not exist"))
        return JSONResponse(self._model(name))

    async def chat_completions(self, request: Request) -> Response:
        """``POST /v1/chat/completions``: one turn, streamed or as one completion."""
        try:
            body = await self._body(request)
            parsed = parse_chat_request(body)
            definition = parsed.model
            if definition not in self.runtime.framework.definitions:
                raise ModelNotFoundError(f"the model {definition!r} does not exist")
            sent = next((request.headers[h] for h in CONTEXT_HEADERS if h in request.headers), None)
            key = context_key(request, definition, new_context_id() if sent is None else sent)
            job = await self._submit(key, parsed, kept=sent is not None, request=request)
        except Exception as exc:
            return error_response(exc)
        mapper = CompletionMapper(definition, key.context_id if sent is not None else None)
        forget = None if sent is not None else key
        if parsed.stream:
            return StreamingResponse(
                self._stream(job, mapper, parsed.include_usage, forget),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
            )
        try:
            done = await self._collect(job, mapper)
        finally:
            await self._forget(forget, job)
        if done.get("status") == "failed":
            return self._failed(done)
        return JSONResponse(mapper.completion(done))

    async def _body(self, request: Request) -> object:
        try:
            return await json_body(request)
        except ValueError:
            raise InvalidRequestError("the request body is not valid JSON") from None

    async def _submit(
        self, key: SessionKey, parsed: ChatRequest, *, kept: bool, request: Request
    ) -> RunJob:
        """Start the turn; a conversation that is not kept is seeded first."""
        prompt = parsed.prompt()
        turn = SendRequest.model_validate({"message": prompt, "contextId": key.context_id})
        if kept:
            return await self.runtime.submit(
                key, turn, idempotency_key=request.headers.get("idempotency-key"), body=prompt
            )
        definition = self.runtime.framework.definitions[key.definition]
        seeded = parsed.seed()
        if seeded and definition.kind == "agent":  # a swarm keeps its history per member
            await self.runtime.framework.storage.append(key, seeded, None)
        try:
            return await self.runtime.submit(key, turn)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.runtime.delete_context(key)
            raise

    async def _forget(self, key: SessionKey | None, job: RunJob) -> None:
        """Delete a conversation that is not kept, once its turn is over."""
        if key is None:
            return
        with anyio.CancelScope(shield=True):
            await job.finished.wait()
            try:
                await self.runtime.delete_context(key)
            except AgentkeelError as exc:
                logger.warning("code=<%s> | an unkept conversation stayed: %s", exc.code, exc)

    async def _collect(self, job: RunJob, mapper: CompletionMapper) -> JSONObject:
        if job.channel is None:
            raise RuntimeError("internal error: a started turn has no channel")
        async with aclosing(batches(self.runtime, job.channel, job.start_after)) as stream:
            async for batch in stream:
                for frame in batch:
                    if frame.get("done") is True:
                        return frame
                    mapper.event(frame)
        raise RuntimeError("internal error: a run's frames ended without a done frame")

    def _failed(self, done: JSONObject) -> Response:
        status, body = _failure(done)
        return JSONResponse(body, status)

    async def _stream(
        self,
        job: RunJob,
        mapper: CompletionMapper,
        include_usage: bool,
        forget: SessionKey | None,
    ) -> AsyncIterator[bytes]:
        if job.channel is None:
            raise RuntimeError("internal error: a started turn has no channel")
        try:
            async with aclosing(batches(self.runtime, job.channel, job.start_after)) as stream:
                async for batch in stream:
                    if not batch:
                        yield _KEEP_ALIVE
                    out: list[bytes] = []
                    for frame in batch:
                        if frame.get("done") is True:
                            out.extend(self._ending(frame, mapper, include_usage))
                            yield b"".join(out)
                            return
                        if (encoded := mapper.encoded(frame)) is not None:
                            out.append(encoded)
                    if out:  # a burst of frames is one write, as on the native wire
                        yield b"".join(out)
        finally:
            await self._forget(forget, job)

    def _ending(self, done: JSONObject, mapper: CompletionMapper, usage: bool) -> list[bytes]:
        if done.get("status") == "failed":
            return [encode_event(_failure(done)[1]), _DONE]
        chunks = mapper.finish(done, include_usage=usage)
        return [*(encode_event(chunk) for chunk in chunks), _DONE]


def _failure(done: JSONObject) -> tuple[int, JSONObject]:
    """The status and error of a failed run (its error is safe to show, as natively)."""
    error = done.get("error")
    item = error if isinstance(error, dict) else {}
    code = str(item.get("code") or "run_failed")
    status = 429 if code == "budget_exceeded" else 500
    return status, error_json(status, code, str(item.get("message") or "the run failed"))
