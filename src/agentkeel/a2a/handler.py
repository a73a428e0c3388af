"""The A2A request handler of one agent definition: tasks are runs.

It implements the SDK's `RequestHandler` (the SDK parses JSON-RPC, checks the ``A2A-Version``
header, encodes results, errors and SSE) on agentkeel's own model rather than the SDK's task store
and executor queue, because here a task *is* a run: ``taskId`` is the run id, its state is the
run's (live from its channel, else from its run record), and its A2A messages and artifacts are
kept in `A2ATaskStore`. So a task answers ``GetTask`` after a restart, a suspended run is a task in
``TASK_STATE_INPUT_REQUIRED`` that a message with its ``taskId`` resumes, and the same context can
be continued on either wire.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from functools import partial

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    InternalError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.input_mode_validator import validate_input_modes
from a2a.utils.proto_utils import validate_proto_required_fields
from a2a.utils.task import apply_history_length, validate_history_length

from agentkeel.a2a.call_state import PRINCIPAL_STATE, claim_of
from agentkeel.a2a.executor import A2AExecutor, translated
from agentkeel.a2a.listing import list_tasks
from agentkeel.a2a.mapping import (
    TERMINAL,
    Event,
    Mapped,
    StreamMapper,
    TextChunk,
    build_task,
    decision_of,
    interrupt_message,
    message_json,
    prompt_of,
    status_time,
    step_text,
)
from agentkeel.a2a.tasks import A2ATaskStore
from agentkeel.a2a.turn import A2ATurn, TaskRecord
from agentkeel.errors import InvalidRequestError
from agentkeel.ids import new_context_id
from agentkeel.messages import JSONObject
from agentkeel.runtime.runs import RunJob
from agentkeel.runtime.wire import SendRequest, interrupt_json, parse_send_request
from agentkeel.storage.base import SessionKey

__all__ = ["PRINCIPAL_STATE", "AgentRequestHandler"]

logger = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True)
class _Started:
    """A turn that started: its job, its task record, and whether the task is new."""

    job: RunJob
    record: TaskRecord
    turn: A2ATurn
    new: bool


def _principal(call: ServerCallContext) -> str | None:
    principal = call.state.get(PRINCIPAL_STATE)
    return principal if isinstance(principal, str) and principal else None


class AgentRequestHandler(RequestHandler):
    """Answers the A2A methods for one agent definition over the shared runtime.

    Args:
        executor: Starts and follows runs on the server's runtime.
        card: The agent card (input modes, capabilities).
    """

    def __init__(self, executor: A2AExecutor, card: AgentCard) -> None:
        self.executor = executor
        self.card = card
        self.tasks = A2ATaskStore(executor.runtime.framework.storage, executor.definition)
        executor.runtime.on_delete(self._forget_tasks)

    async def _forget_tasks(self, key: SessionKey) -> None:
        """A deleted context's tasks go with it (SPEC guarantee 13)."""
        if key.definition == self.executor.definition:
            await self.tasks.delete_context(key.principal, key.context_id)

    # -- reading tasks ------------------------------------------------------------------

    async def _record(self, principal: str | None, task_id: str) -> TaskRecord:
        with translated():
            record = await self.tasks.get(principal, task_id)
        if record is None or record.message_reply:
            raise TaskNotFoundError(message=f"no task {task_id!r}")
        return record

    async def _task(self, principal: str | None, record: TaskRecord) -> Task:
        key = self.executor.key(principal, record.context_id)
        channel = await self.executor.live(key, record.task_id)
        if channel is not None:
            return build_task(record, None, live_text=step_text(channel.frames))
        run = await self.executor.run_record(key, record.task_id)
        return build_task(record, run)

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        """``GetTask``: the task's state now, from its live run or its run record."""
        validate_proto_required_fields(params)
        validate_history_length(params)
        principal = _principal(context)
        task = await self._task(principal, await self._record(principal, params.id))
        return apply_history_length(task, params)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        """``ListTasks``: the caller's tasks, newest status first, filtered and paged."""
        validate_proto_required_fields(params)
        validate_history_length(params)
        principal = _principal(context)
        with translated():
            listed = await self.tasks.list(principal)
        records = [item for item in listed if not item.message_reply]
        records = [r for r in records if not params.context_id or r.context_id == params.context_id]
        tasks = [await self._task(principal, item) for item in records]
        return list_tasks(tasks, params)

    # -- sending ------------------------------------------------------------------------

    async def _start(self, params: SendMessageRequest, call: ServerCallContext) -> _Started:
        _check_message(params.message)
        validate_history_length(params.configuration)
        validate_input_modes(params.message, self.card)
        if params.message.role != Role.ROLE_USER:
            raise InvalidParamsError(message="a message to an agent has the role ROLE_USER")
        principal = _principal(call)
        if params.message.task_id:
            return await self._resume(principal, params.message)
        message = params.message
        key = self.executor.key(principal, message.context_id or new_context_id())
        request = _request({"message": prompt_of(message), "contextId": key.context_id})
        turn = A2ATurn(message=message)
        message_id, body = claim_of(message, call.state)
        job, is_new = await self.executor.submit(
            key,
            request,
            turn,
            message_id=message_id,
            body=body,
            sent_context_id=message.context_id or None,
        )
        if not is_new:  # the same message again: the first request's task
            await job.bound.wait()
            if not isinstance(job.binding, _Started):
                raise InternalError(message="the first request with this message id failed")
            return job.binding
        try:
            task_id = job.channel.run_id if job.channel is not None else ""
            stored = _with_ids(message, task_id, key.context_id)
            record = TaskRecord(task_id=task_id, context_id=key.context_id, history=[stored])
            turn.attach(record, partial(self.tasks.put, principal))
            job.binding = _Started(job=job, record=record, turn=turn, new=True)
        finally:
            job.bound.set()
        with translated():
            await turn.persist()
        return job.binding

    async def _resume(self, principal: str | None, message: Message) -> _Started:
        record = await self._record(principal, message.task_id)
        if message.context_id and message.context_id != record.context_id:
            raise InvalidParamsError(
                message=f"task {record.task_id} belongs to another context, not "
                f"{message.context_id!r}"
            )
        key = self.executor.key(principal, record.context_id)
        if await self.executor.live(key, record.task_id) is not None:
            raise UnsupportedOperationError(
                message=f"task {record.task_id} is working; send once it needs input"
            )
        run = await self.executor.run_record(key, record.task_id)
        if run is None or run.status != "suspended" or not run.interrupts:
            raise UnsupportedOperationError(
                message=f"task {record.task_id} is in a terminal state and takes no messages"
            )
        pending = run.interrupts[0]
        decision = decision_of(message, pending.kind)
        request = _request(
            {
                "contextId": key.context_id,
                "resume": {"interruptId": pending.id, "decision": decision},
            }
        )
        asked = interrupt_message(record.task_id, record.context_id, interrupt_json(pending))
        turn = A2ATurn(message=message)
        turn.attach(record, partial(self.tasks.put, principal))
        job, _ = await self.executor.submit(key, request, turn)
        record.history.append(message_json(asked))
        record.history.append(_with_ids(message, record.task_id, record.context_id))
        with translated():
            await turn.persist()
        return _Started(job=job, record=record, turn=turn, new=False)

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        """``SendMessage``: start or resume the task; answer once it ends or needs input.

        With ``returnImmediately`` the Task is answered as soon as its run started.
        """
        started = await self._start(params, context)
        principal = _principal(context)
        if not params.configuration.return_immediately:
            await started.job.finished.wait()
            result = started.job.result or {}
            if started.new and started.turn.message_reply and result.get("status") == "completed":
                started.record.message_reply = True
                with translated():
                    await started.turn.persist()
                return _reply(started.record, str(result.get("text", "")))
        task = await self._task(principal, started.record)
        return apply_history_length(task, params.configuration)

    async def stream_batches(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[list[Mapped], None]:
        """``SendStreamingMessage`` in batches: the Task, then what the run produced together.

        Events that arrive together leave together, as the native wire writes a burst of
        frames at once; so the Task goes with the run's first frames when they are there.
        """
        started = await self._start(params, context)
        record, job, turn = started.record, started.job, started.turn
        if started.new:  # the user's message is all there is to the task yet
            first = Task(
                id=record.task_id,
                context_id=record.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED, timestamp=status_time()),
                history=[turn.message],
            )
            first.history[0].task_id, first.history[0].context_id = first.id, first.context_id
        else:
            first = build_task(record, None, live_text="")
        head: list[Mapped] = [apply_history_length(first, params.configuration)]
        if job.channel is None or job.channel.last_id == job.start_after:
            yield head  # no frame yet: the Task goes now, alone
            if job.channel is None:
                return
            head = []
        mapper = StreamMapper(record.task_id, record.context_id)
        async for frames in self.executor.frames(job.channel, job.start_after):
            yield head + [mapper.artifact(a) for a in turn.take_unstreamed()] + mapper.batch(frames)
            head = []

    async def subscription_batches(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[list[Mapped], None]:
        """``SubscribeToTask`` in batches: the Task now, then its updates as they come."""
        validate_proto_required_fields(params)
        principal = _principal(context)
        record = await self._record(principal, params.id)
        key = self.executor.key(principal, record.context_id)
        channel = await self.executor.live(key, record.task_id)
        if channel is None:
            task = await self._task(principal, record)
            if task.status.state in TERMINAL:
                raise UnsupportedOperationError(
                    message=f"task {record.task_id} is in a terminal state"
                )
            yield [task]  # waiting for input: follow it once someone answers
            resumed = await self.executor.next_segment(key, record.task_id)
            if resumed is None:  # it ended unseen: say how
                ended = await self._task(principal, record)
                status = TaskStatusUpdateEvent(
                    task_id=ended.id, context_id=ended.context_id, status=ended.status
                )
                yield [status]
                return
            channel, after = resumed
            text = ""
        else:
            after, text = channel.last_id, step_text(channel.frames)
            yield [build_task(record, None, live_text=text)]
        mapper = StreamMapper(record.task_id, record.context_id, streamed_text=text)
        async for frames in self.executor.frames(channel, after):
            yield mapper.batch(frames)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        """``SendStreamingMessage``: the Task, then its updates up to its end or interrupt."""
        async with aclosing(self.stream_batches(params, context)) as batches:
            async for batch in batches:
                for event in batch:
                    yield event.to_event() if isinstance(event, TextChunk) else event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        """``SubscribeToTask``: the Task now, then its updates up to its end or interrupt."""
        async with aclosing(self.subscription_batches(params, context)) as batches:
            async for batch in batches:
                for event in batch:
                    yield event.to_event() if isinstance(event, TextChunk) else event

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        """``CancelTask``: stop a working run, or abandon one waiting for input."""
        validate_proto_required_fields(params)
        principal = _principal(context)
        record = await self._record(principal, params.id)
        key = self.executor.key(principal, record.context_id)
        channel = await self.executor.live(key, record.task_id)
        if channel is not None:
            await self.executor.cancel_running(key, channel)
            return await self._task(principal, record)
        run = await self.executor.run_record(key, record.task_id)
        if run is None or run.status != "suspended" or not run.interrupts:
            raise TaskNotCancelableError(message=f"task {record.task_id} already ended")
        resume = {"interruptId": run.interrupts[0].id, "cancel": True}
        request = _request({"contextId": key.context_id, "resume": resume})
        job, _ = await self.executor.submit(key, request, A2ATurn(message=Message()))
        await job.finished.wait()
        return await self._task(principal, record)

    # -- what this binding does not offer ------------------------------------------------

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """Push notifications are not offered (the card says so)."""
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """Push notifications are not offered (the card says so)."""
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        """Push notifications are not offered (the card says so)."""
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        """Push notifications are not offered (the card says so)."""
        raise PushNotificationNotSupportedError

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        """There is no extended card: the public one says everything."""
        raise UnsupportedOperationError(message="this agent has no extended agent card")


def _request(body: dict[str, object]) -> SendRequest:
    try:
        return parse_send_request(body)
    except InvalidRequestError as exc:
        raise InvalidParamsError(message=exc.message) from None


def _check_message(message: Message) -> None:
    """What the proto marks required of a message (the SDK's generic check costs more)."""
    if not message.message_id:
        raise InvalidParamsError(message="the message needs a messageId")
    if not message.parts or any(part.WhichOneof("content") is None for part in message.parts):
        raise InvalidParamsError(message="the message needs parts, each with content")


def _with_ids(message: Message, task_id: str, context_id: str) -> JSONObject:
    """The user's message as the task's history keeps it: with its task and context."""
    stored = Message()
    stored.CopyFrom(message)
    stored.task_id, stored.context_id = task_id, context_id
    return message_json(stored)


def _reply(record: TaskRecord, text: str) -> Message:
    """A run's answer as a plain Message (the run asked for it with `reply_as_message`)."""
    return Message(
        message_id=f"{record.task_id}-reply",
        context_id=record.context_id,
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
    )
