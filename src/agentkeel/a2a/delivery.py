"""Push delivery: a follower per running task that has webhooks, apart from the run.

The run never waits for a webhook: a follower is one more reader of the run's
channel, like a stream, in a task of its own; it maps the frames as a stream does
(`StreamMapper`) and hands the updates worth a POST to the SDK's sender, in order.
A follower starts when a segment of a task with webhooks starts (a new task sent with
a config, a config created for a running task, a task resumed on either wire, also
after a restart: `RetainedStreams.on_segment`), and ends with the segment.

With many replicas the replica running the task delivers, whichever received the
config: configs live in the shared storage, and a write of a task's configs is
announced through the fan-out (topic ``a2a-push``), so the replica running it reads
them again and follows the segment, and every replica that cached them reads them
again (a deleted webhook gets nothing more). A replica that received a config for a
task running elsewhere only follows it itself when the fan-out cannot announce.

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
from agentkeel.runtime.remote_channel import RemoteRunChannel

__all__ = ["PUSH_TOPIC", "PushDelivery"]

PUSH_TOPIC = "a2a-push"
"""The fan-out announcement of a change to a task's push configs."""

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
        self._running_here: dict[str, RunStream] = {}
        """The segments running in this process, by task id (while active)."""

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Load the configs, follow segments while open; on exit, stop the followers."""
        await self.configs.load()
        self.sender = RetryingPushSender(self.configs, allow_private=self.allow_private)
        stop_listening = self.executor.runtime.on_segment(self._segment_started)
        words = self.executor.runtime.announcements
        stop_hearing = None
        if words is not None:
            stop_hearing = words.on_announcement(PUSH_TOPIC, self._configs_changed)
            self.configs.changed = lambda task: words.announce(PUSH_TOPIC, self.configs.index, task)
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
            if stop_hearing is not None:
                stop_hearing()
            self.configs.changed = None
            await self.sender.aclose()
            self.sender = None

    def _segment_started(self, channel: RunStream) -> None:
        if channel.key.definition != self.executor.definition:
            return
        for task_id in [t for t, seen in self._running_here.items() if not seen.active]:
            del self._running_here[task_id]
        self._running_here[channel.run_id] = channel
        if channel.last_id > 0 and self._group is not None:
            # a resumed task: another replica may have changed its webhooks since this
            # one read them (a new run has none yet: nothing to read for it)
            self._group.start_soon(self._follow_if_configured, channel, channel.last_id)
        elif self.configs.has_configs(channel.run_id):
            self.follow(channel, channel.last_id)

    def _configs_changed(self, context: str, task_id: str) -> None:
        """A replica wrote the task's configs: read them again if they matter here."""
        del context
        here = self._running_here.get(task_id)
        if here is not None and not here.active:
            del self._running_here[task_id]
            here = None
        if self._group is not None and (here is not None or self.configs.cached(task_id)):
            self._group.start_soon(self._reread, task_id, here)

    async def _reread(self, task_id: str, here: RunStream | None) -> None:
        try:
            configured = await self.configs.refresh(task_id)
        except AgentkeelError as exc:
            logger.warning("task=<%s> | could not read push configs: %s", task_id, exc)
            return
        if configured and here is not None and here.active:
            self.follow(here, here.last_id)

    def follow_live(self, channel: RunStream) -> None:
        """Deliver the running segment's updates from here on, from the replica running it.

        A segment running on another replica is left to it (the config's write was
        announced to it), unless the fan-out cannot announce.
        """
        if isinstance(channel, RemoteRunChannel) and self.configs.changed is not None:
            return
        self.follow(channel, channel.last_id)

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
        if self._group is None or any(task == channel.run_id for task, _ in self._following):
            return  # one follower per task: it runs to the end of the segment
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
