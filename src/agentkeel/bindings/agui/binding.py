"""The AG-UI 1.0 binding: ``POST /agents/{name}/ag-ui`` takes a RunAgentInput, streams events.

``threadId`` is the contextId. Each run starts with RUN_STARTED and, unless the client's
copy of the thread is in step with the server's (`agentkeel.bindings.agui.sync`), a
MESSAGES_SNAPSHOT of the server's transcript; then, when the input's last message is a
new user message,
that message is the turn (submitted through the runtime's `RunFacade`, exactly as a
native turn), and its frames are mapped by `EventMapper`. An input without a new user
message (a reloaded page, a new ``HttpAgent`` on the thread) gets the snapshot and a
finished run, and runs nothing.

A run that suspends ends with RUN_FINISHED's interrupt outcome. The next run carries
``resume`` with one entry for it, which releases the suspended native run; an entry is
an idempotency key of its own, so an identical resume sent again gets the events of the
run it released instead of an error (AG-UI's rule; the native wire answers 404 there).
Errors after the stream started are RUN_ERROR events; a body that is not a RunAgentInput
and an unknown agent are HTTP errors (``{"error": {"code", "message"}}``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from agentkeel.bindings.agui.body import read_run_input
from agentkeel.bindings.agui.events import (
    EventMapper,
    encode,
    interrupt_of,
    run_error,
    user_message,
)
from agentkeel.bindings.agui.request import InputMessage, RunAgentInput
from agentkeel.bindings.agui.snapshot import snapshot_event, transcript_messages
from agentkeel.bindings.agui.sync import in_step, message_prefix
from agentkeel.bindings.calls import batches, context_key
from agentkeel.errors import AgentkeelError, InvalidRequestError, StorageError
from agentkeel.messages import JSONObject, JSONValue
from agentkeel.runtime.facade import RunFacade
from agentkeel.runtime.runs import RunJob
from agentkeel.runtime.wire import SendRequest, interrupt_json
from agentkeel.storage.base import RunRecord, SessionKey

__all__ = ["AGUIBinding"]

_KEEP_ALIVE = b": keep-alive\n\n"


def _error(status: int, code: str, message: str) -> Response:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


class AGUIBinding:
    """Serves every agent definition of a runtime to AG-UI clients.

    Args:
        runtime: The runtime's facade (the app's shared `ServerRuntime`).
    """

    def __init__(self, runtime: RunFacade) -> None:
        self.runtime = runtime

    @property
    def routes(self) -> list[BaseRoute]:
        """The binding's route, for the app factory to mount."""
        return [Route("/agents/{name}/ag-ui", self.run, methods=["POST"])]

    async def run(self, request: Request) -> Response:
        """``POST /agents/{name}/ag-ui``: one AG-UI run, as server-sent events."""
        definition = request.path_params["name"]
        if definition not in self.runtime.framework.definitions:
            return _error(404, "agent_not_found", f"no agent is named {definition!r}")
        try:
            # of the client's copy of the thread only the last two messages are decoded
            parsed = await read_run_input(request)
            key = context_key(request, definition, parsed.thread_id)
        except (ValueError, RecursionError) as exc:
            message = exc.message if isinstance(exc, InvalidRequestError) else "not JSON"
            code = exc.code if isinstance(exc, InvalidRequestError) else "invalid_json"
            return _error(400, code, message)
        return StreamingResponse(
            self._events(key, parsed),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    async def _events(self, key: SessionKey, parsed: RunAgentInput) -> AsyncIterator[bytes]:
        mapper = EventMapper(key.context_id, parsed.run_id)
        # RUN_STARTED leaves with the first events that follow it: one write fewer a run
        head = encode(mapper.started())
        try:
            latest = await self.runtime.framework.storage.latest_run(key)
            pending = latest if latest is not None and latest.status == "suspended" else None
            new = parsed.last_user if parsed.resume is None else None
            if not in_step(parsed, latest):
                snapshot, new = await self._snapshot(key, pending, new)
                out = [head, encode(snapshot_event(snapshot))]
                if new is not None:
                    out.extend(encode(event) for event in user_message(new.id, new.text()))
                yield b"".join(out)
                head = b""
            job = await self._submit(key, parsed, new)
        except AgentkeelError as exc:
            yield head + encode(run_error(exc.code, _shown(exc)))
            return
        if job is None:
            # nothing to run; a reloaded page learns of an approval still pending
            waiting_for = [] if pending is None else _record_interrupts(pending)
            status = "suspended" if waiting_for else "completed"
            finished = mapper.finished({"status": status}, waiting_for)
            yield b"".join([head, *(encode(event) for event in finished)])
            return
        if job.channel is not None:
            mapper.bind(message_prefix(job.channel.run_id, parsed.run_id))
        async for chunk in self._follow(key, job, mapper, head):
            yield chunk

    async def _snapshot(
        self, key: SessionKey, pending: RunRecord | None, new: InputMessage | None
    ) -> tuple[list[JSONObject], InputMessage | None]:
        """The snapshot's messages, and the new message unless the server has it already.

        The new message is not in the snapshot: `user_message` follows it.
        """
        snapshot = await self._transcript(key)
        known = {item["id"] for item in snapshot}
        if pending is not None and isinstance(pending.input, str) and pending.input:
            # the suspended turn is not committed yet: show what it answers
            waiting = {"id": f"{pending.run_id}:input", "role": "user"}
            snapshot.append({**waiting, "content": pending.input})
            known.add(f"{pending.run_id}:input")
        if new is not None and new.id in known:
            new = None  # the client's copy ends with a message the server has
        return snapshot, new

    async def _transcript(self, key: SessionKey) -> list[JSONObject]:
        return transcript_messages(await self.runtime.transcript(key))

    async def _submit(
        self, key: SessionKey, parsed: RunAgentInput, new: InputMessage | None
    ) -> RunJob | None:
        """Start the turn: a resume, a new user message, or nothing to run."""
        if parsed.resume is not None:
            if len(parsed.resume) != 1:
                raise InvalidRequestError(
                    "a run suspends for one interrupt at a time: send one resume entry"
                )
            entry = parsed.resume[0]
            resume: JSONObject = {"interruptId": entry.interrupt_id}
            if entry.status == "cancelled":
                resume["cancel"] = True
            else:
                resume["decision"] = entry.decision()
            body: JSONValue = {"contextId": key.context_id, "resume": resume}
            turn = SendRequest.model_validate(body)
            idempotency = f"ag-ui-resume:{entry.interrupt_id}"
        elif new is not None:
            body = {"contextId": key.context_id, "message": new.text()}
            turn = SendRequest.model_validate(body)
            idempotency = f"ag-ui-message:{new.id}"
        else:
            return None
        job, _ = await self.runtime.submit_claimed(
            key, turn, idempotency_key=idempotency, body=body, sent_context_id=key.context_id
        )
        return job

    async def _follow(
        self, key: SessionKey, job: RunJob, mapper: EventMapper, head: bytes
    ) -> AsyncIterator[bytes]:
        """The run's events; `head` (events not sent yet) goes first, with the first burst."""
        if job.channel is None:
            raise RuntimeError("internal error: a started turn has no channel")
        async with aclosing(batches(self.runtime, job.channel, job.start_after)) as stream:
            async for batch in stream:
                out: list[bytes] = [head] if head else []
                head = b""
                if not batch:
                    out.append(_KEEP_ALIVE)
                for frame in batch:
                    if frame.get("done") is True:
                        interrupts = await self._interrupts(key, frame)
                        out.extend(encode(event) for event in mapper.finished(frame, interrupts))
                        yield b"".join(out)
                        return
                    out.append(mapper.encoded(frame))
                if out:  # a burst of frames is one write, as on the native wire
                    yield b"".join(out)

    async def _interrupts(self, key: SessionKey, done: JSONObject) -> list[JSONObject]:
        """The AG-UI interrupts of a suspended run, bound to their tool calls."""
        native = done.get("interrupt")
        if done.get("status") != "suspended" or not isinstance(native, dict):
            return []
        call_id = None
        run_id = done.get("runId")
        if isinstance(run_id, str):
            record = await self.runtime.run_record(key, run_id)
            for item in record.interrupts if record is not None else ():
                if item.id == native.get("id"):
                    call_id = item.call_id
        return [interrupt_of(native, call_id)]


def _record_interrupts(record: RunRecord) -> list[JSONObject]:
    """The AG-UI interrupt a suspended run's record waits for (the first, as natively)."""
    if not record.interrupts:
        return []
    item = record.interrupts[0]
    return [interrupt_of(interrupt_json(item), item.call_id)]


def _shown(exc: AgentkeelError) -> str:
    """What a client is told of an error: storage details stay in the server's log."""
    if isinstance(exc, StorageError):
        return "the server's storage failed; the details are in its log"
    return exc.message
