"""Push delivery: a follower per running task that has webhooks, apart from the run.

The run never waits for a webhook: a follower is one more reader of the run's
channel, like a stream, in a task of its own; it maps the frames as a stream does
(`StreamMapper`) and hands the updates worth a POST to the SDK's sender, in order.
A follower starts when a segment of a task with webhooks starts (a new task sent with
a config, a config created for a running task, a task resumed on either wire, also
after a restart: `RetainedStreams.on_segment`), and ends with the segment.

What is POSTed (each a StreamResponse, as a stream would carry it):

- ``statusUpdate`` ``TASK_STATE_WORKING`` when a segment starts;
- at the end: for a completed task, the ``response`` artifact whole (one
  ``artifactUpdate``, ``lastChunk``), then the final ``statusUpdate``: ``COMPLETED``,
  ``INPUT_REQUIRED`` (its message carries the question), ``FAILED`` or ``CANCELED``.

Token chunks and tool progress are not POSTed: a webhook per token would cost the
receiver more than the stream it replaces. Artifacts a run publishes are in the task
(``GetTask``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeGuard

import anyio
from a2a.types import (
    Artifact,
    Part,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from anyio.abc import TaskGroup

from agentkeel.a2a.executor import A2AExecutor
from agentkeel.a2a.mapping import RESPONSE_ARTIFACT, StreamMapper, TextChunk, status_time
from agentkeel.a2a.push import RetryingPushSender, StoredPushConfigs
from agentkeel.errors import AgentkeelError
from agentkeel.runtime.coordination import RunStream

__all__ = ["PushDelivery"]

logger = logging.getLogger(__name__)


class PushDelivery:
    """Follows the running tasks of one definition that have webhooks, and POSTs updates.

    Args:
        executor: The definition's executor (its runtime, its frames).
        configs: The definition's push configs.
        allow_private: Deliver to loopback and private addresses too.
    """

    def __init__(
        self, executor: A2AExecutor, configs: StoredPushConfigs, *, allow_private: bool = False
    ) -> None:
        self.executor = executor
        self.configs = configs
        self.allow_private = allow_private
        self.sender: RetryingPushSender | None = None
        """Delivers one update to every webhook of a task (while running)."""
        self._group: TaskGroup | None = None
        self._following: set[tuple[str, int]] = set()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Load the configs, follow segments while open; on exit, stop the followers."""
        await self.configs.load()
        self.sender = RetryingPushSender(self.configs, allow_private=self.allow_private)
        stop_listening = self.executor.runtime.on_segment(self._segment_started)
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                try:
                    yield
                finally:
                    self._group = None
                    group.cancel_scope.cancel()
        finally:
            stop_listening()
            await self.sender.aclose()
            self.sender = None

    def _segment_started(self, channel: RunStream) -> None:
        if channel.key.definition != self.executor.definition:
            return
        if self.configs.has_configs(channel.run_id):
            self.follow(channel, channel.last_id)
        elif channel.last_id > 0 and self._group is not None:
            # a resumed task: another replica may have registered a webhook since this
            # one loaded the configs (a new run has none yet: nothing to read for it)
            self._group.start_soon(self._follow_if_configured, channel, channel.last_id)

    async def _follow_if_configured(self, channel: RunStream, after: int) -> None:
        try:
            configured = await self.configs.refresh(channel.run_id)
        except AgentkeelError as exc:
            logger.warning("task=<%s> | could not read push configs: %s", channel.run_id, exc)
            return
        if configured:
            self.follow(channel, after)  # the frames since `after` are still in the channel

    def follow(self, channel: RunStream, after: int) -> None:
        """Deliver the updates of `channel`'s segment after frame `after` (once per segment)."""
        mark = (channel.run_id, after)
        if self._group is None or mark in self._following:
            return
        self._following.add(mark)
        self._group.start_soon(self._deliver, channel, after, mark)

    async def _deliver(self, channel: RunStream, after: int, mark: tuple[str, int]) -> None:
        task_id, context_id = channel.run_id, channel.key.context_id
        mapper = StreamMapper(task_id, context_id)
        try:
            await self._send(
                TaskStatusUpdateEvent(
                    task_id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_WORKING, timestamp=status_time()),
                )
            )
            async for frames in self.executor.frames(channel, after):
                for event in mapper.batch(frames):
                    if isinstance(event, TextChunk):
                        continue  # the mapper keeps the text: sent whole at the end
                    if _worth_sending(event):
                        completed = event.status.state == TaskState.TASK_STATE_COMPLETED
                        if completed and mapper.streamed:
                            await self._send(_whole_response(task_id, context_id, mapper.streamed))
                        await self._send(event)
        except Exception:  # a follower never takes anything else down with it
            logger.exception("task=<%s> | push delivery stopped", task_id)
        finally:
            self._following.discard(mark)

    async def _send(self, event: TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> None:
        sender = self.sender
        if sender is not None and self.configs.has_configs(event.task_id):  # may be deleted
            await sender.send_notification(event.task_id, event)


def _worth_sending(event: object) -> TypeGuard[TaskStatusUpdateEvent]:
    """A change of state, not a progress note (tool calls, thinking: WORKING + metadata)."""
    return (
        isinstance(event, TaskStatusUpdateEvent)
        and event.status.state != TaskState.TASK_STATE_WORKING
    )


def _whole_response(task_id: str, context_id: str, text: str) -> TaskArtifactUpdateEvent:
    return TaskArtifactUpdateEvent(
        task_id=task_id,
        context_id=context_id,
        artifact=Artifact(
            artifact_id=RESPONSE_ARTIFACT, name=RESPONSE_ARTIFACT, parts=[Part(text=text)]
        ),
        last_chunk=True,
    )
