"""The full A2A service of one definition: tasks, push notifications, the extended card.

`AgentRequestHandler` answers the task methods (tasks are runs); this adds what
rides on them, the same over JSON-RPC, HTTP+JSON and gRPC, since the three SDK
transports call the one handler:

- the push notification config methods, on `StoredPushConfigs`, checked like the
  SDK's own handler does (the task must be the caller's; an unknown config is
  ``TaskNotFound``), and a config sent along with ``SendMessage``;
- a follower (`PushDelivery`) for a running task as soon as it has a webhook;
- ``GetExtendedAgentCard``: the card with every skill, for an authenticated caller.
"""

from __future__ import annotations

from collections.abc import Callable

from a2a.server.context import ServerCallContext
from a2a.types import (
    AgentCard,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    SendMessageRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from a2a.utils.proto_utils import validate_proto_required_fields

from agentkeel.a2a.delivery import PushDelivery
from agentkeel.a2a.executor import A2AExecutor, translated
from agentkeel.a2a.handler import AgentRequestHandler, _principal, _Started
from agentkeel.a2a.push import StoredPushConfigs, check_webhook_url

__all__ = ["A2AService"]


class A2AService(AgentRequestHandler):
    """The request handler of one definition, push notifications and extended card included.

    Args:
        executor: Starts and follows runs on the server's runtime.
        card: The agent card (input modes, capabilities).
        configs: The definition's push configs.
        delivery: Follows running tasks that have webhooks.
        extended_card: Builds the extended card (every skill).
        allow_private_webhooks: Accept webhooks on loopback and private addresses.
    """

    def __init__(
        self,
        executor: A2AExecutor,
        card: AgentCard,
        *,
        configs: StoredPushConfigs,
        delivery: PushDelivery,
        extended_card: Callable[[ServerCallContext], AgentCard],
        allow_private_webhooks: bool = False,
    ) -> None:
        super().__init__(executor, card)
        self.configs = configs
        self.delivery = delivery
        self.extended_card = extended_card
        self.allow_private_webhooks = allow_private_webhooks

    def _check_url(self, config: TaskPushNotificationConfig) -> None:
        if not config.url:
            raise InvalidParamsError(message="a push notification config needs a url")
        check_webhook_url(config.url, allow_private=self.allow_private_webhooks)

    async def _start(self, params: SendMessageRequest, call: ServerCallContext) -> _Started:
        """Start or resume the task; register the webhook sent with it before it runs far."""
        configuration = params.configuration
        push = None
        if configuration.HasField("task_push_notification_config"):
            push = configuration.task_push_notification_config
            self._check_url(push)  # refused before a run starts for nothing
        started = await super()._start(params, call)
        if push is not None:
            with translated():
                await self.configs.set_info(started.record.task_id, push, call)
            if started.job.channel is not None:
                self.delivery.follow(started.job.channel, started.job.start_after)
        return started

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """Register a webhook for a task of the caller (the same id replaces it)."""
        if not params.task_id:
            raise InvalidParamsError(message="the config needs the taskId of the task")
        self._check_url(params)
        principal = _principal(context)
        record = await self._record(principal, params.task_id)
        with translated():
            stored = await self.configs.set_info(record.task_id, params, context)
        key = self.executor.key(principal, record.context_id)
        channel = await self.executor.live(key, record.task_id)
        if channel is not None:  # running now: its updates from here on
            self.delivery.follow_live(channel)
        return stored

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """One webhook of a task of the caller."""
        validate_proto_required_fields(params)
        record = await self._record(_principal(context), params.task_id)
        with translated():
            configs = await self.configs.get_info(record.task_id, context)
        for config in configs:
            if config.id == params.id:
                return config
        raise TaskNotFoundError(message=f"task {record.task_id} has no push config {params.id!r}")

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        """The webhooks of a task of the caller (a handful: one page)."""
        validate_proto_required_fields(params)
        record = await self._record(_principal(context), params.task_id)
        with translated():
            configs = await self.configs.get_info(record.task_id, context)
        return ListTaskPushNotificationConfigsResponse(configs=configs)

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        """Remove a webhook of a task of the caller; removing one already gone is no error."""
        validate_proto_required_fields(params)
        record = await self._record(_principal(context), params.task_id)
        with translated():
            await self.configs.delete_info(record.task_id, context, params.id)

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        """The card with every skill, for the caller.

        Only authenticated requests get this far when ``server.auth`` is on (without
        it, every caller is the one anonymous principal).
        """
        return self.extended_card(context)
