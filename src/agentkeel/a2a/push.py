"""Push notifications: the configs, kept in the session storage, and the SDK's sender.

A client that cannot hold a stream open for hours (a task may wait that long for a
person) registers a webhook per task (``CreateTaskPushNotificationConfig``, or
``configuration.taskPushNotificationConfig`` on ``SendMessage``); the server then POSTs
the task's updates there as StreamResponse JSON. Two SDK parts do the protocol work:
`StoredPushConfigs` is its `PushNotificationConfigStore`, and `RetryingPushSender` its
`BasePushNotificationSender` (headers ``Authorization: <scheme> <credentials>`` from the
config's ``authentication`` and ``X-A2A-Notification-Token`` from its ``token``), with
retries and backoff added.

The configs of one definition live in one index session of the configured
`SessionStorage` (``a2a-push-index:<definition>``, one run record per task holding its
owner and configs), so they survive restarts and every replica reads the same ones.

Webhook URLs come from clients, so the server would otherwise fetch whatever address
they name (SSRF): `check_webhook_url` refuses loopback, private, link-local and other
non-public addresses when a config is created, and the sender checks again, after DNS
resolution, before each delivery (the SDK's `validate_push_notification_url`);
``server.a2a.allowPrivateWebhooks`` lifts that for tests and internal deployments.
"""

from __future__ import annotations

import ipaddress
import logging
import time
import urllib.parse
from collections.abc import Awaitable, Callable

import anyio
import httpx
from a2a.server.context import ServerCallContext
from a2a.server.tasks.base_push_notification_sender import BasePushNotificationSender
from a2a.server.tasks.push_notification_config_store import (
    PushNotificationConfigStore,
    normalize_push_notification_config,
)
from a2a.server.tasks.push_notification_sender import PushNotificationEvent
from a2a.types import TaskPushNotificationConfig
from a2a.utils.errors import InvalidParamsError
from a2a.utils.push_url_validator import validate_push_notification_url
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError

from agentkeel.a2a.call_state import PRINCIPAL_STATE
from agentkeel.messages import JSONObject
from agentkeel.result import Usage
from agentkeel.storage.base import RunRecord, SessionKey, SessionStorage

__all__ = [
    "PUSH_INDEX_DEFINITION",
    "RetryingPushSender",
    "StoredPushConfigs",
    "check_webhook_url",
]

logger = logging.getLogger(__name__)

PUSH_INDEX_DEFINITION = "a2a-push-index"
"""The definition part of the push-config index sessions' keys (a reserved agent name)."""
MAX_CONFIGS_PER_TASK = 10
"""Webhooks one task may have (each update is POSTed to each)."""
DELIVERY_ATTEMPTS = 5
"""Tries per notification and webhook before it is given up (logged)."""
_FIRST_BACKOFF_SECONDS = 0.5
_MAX_BACKOFF_SECONDS = 8.0
_DELIVERY_TIMEOUT_SECONDS = 10.0


def _principal(context: ServerCallContext) -> str | None:
    principal = context.state.get(PRINCIPAL_STATE)
    return principal if isinstance(principal, str) and principal else None


def check_webhook_url(url: str, *, allow_private: bool) -> None:
    """Refuse a webhook URL the server should not POST to (raises InvalidParamsError).

    A literal address must be public unless `allow_private`; host names are resolved
    (and checked again) at each delivery, since DNS answers change.
    """
    try:
        parsed = urllib.parse.urlsplit(url)
        parsed.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        raise InvalidParamsError(message="the webhook url is not a valid URL") from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise InvalidParamsError(message="the webhook url must be an http(s) URL with a host")
    if allow_private:
        return
    host = parsed.hostname
    if host == "localhost" or host.endswith((".localhost", ".local", ".internal")):
        raise InvalidParamsError(message=f"webhooks to {host!r} are not allowed on this server")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return  # a name: judged after resolution, at delivery
    if not address.is_global or address.is_multicast:
        raise InvalidParamsError(
            message=f"webhooks to the non-public address {host} are not allowed on this server"
        )


async def _syntax_only(url: str) -> bool:
    parsed = urllib.parse.urlsplit(url)
    return parsed.scheme in ("http", "https") and bool(parsed.hostname)


class StoredPushConfigs(PushNotificationConfigStore):
    """The push configs of one definition's tasks, in the session storage.

    The request handler checks that the caller owns the task before any of these
    calls; the owner is stored too, so a read by another principal finds nothing.
    Configs are cached in memory per task; writes go straight to storage.

    Args:
        storage: The framework's session storage.
        definition: The agent definition whose tasks these are.
    """

    def __init__(self, storage: SessionStorage, definition: str) -> None:
        self.storage = storage
        self.index = SessionKey(definition=PUSH_INDEX_DEFINITION, context_id=definition)
        self._cache: dict[str, tuple[str | None, list[TaskPushNotificationConfig]]] = {}
        self.changed: Callable[[str], None] | None = None
        """Told the task id after each write (the delivery announces it to the replicas)."""

    async def load(self) -> set[str]:
        """Read every stored config (at start); the ids of the tasks that have some."""
        for stored in await self.storage.list_runs(self.index):
            decoded = _decode(stored)
            if decoded is not None and decoded[1]:
                self._cache[stored.run_id] = decoded
        return set(self._cache)

    async def _entry(self, task_id: str) -> tuple[str | None, list[TaskPushNotificationConfig]]:
        cached = self._cache.get(task_id)
        if cached is None:
            decoded = _decode(await self.storage.get_run(self.index, task_id))
            cached = self._cache[task_id] = decoded or (None, [])
        return cached

    async def _write(
        self, task_id: str, owner: str | None, configs: list[TaskPushNotificationConfig]
    ) -> None:
        body: JSONObject = {
            "owner": owner,
            "configs": [MessageToDict(config) for config in configs],
        }
        now = time.time()
        record = RunRecord(
            run_id=task_id, status="completed", input=body, started_at=now, usage=Usage()
        )
        await self.storage.put_run(self.index, record)
        self._cache[task_id] = (owner, configs)
        if self.changed is not None:
            self.changed(task_id)

    async def refresh(self, task_id: str) -> bool:
        """Whether the task has configs, read from storage again.

        Another replica may have written some since this one cached the task's.
        """
        decoded = _decode(await self.storage.get_run(self.index, task_id))
        self._cache[task_id] = decoded or (None, [])
        return bool(self._cache[task_id][1])

    def cached(self, task_id: str) -> bool:
        """Whether this process keeps a copy of the task's configs (no I/O)."""
        return task_id in self._cache

    def has_configs(self, task_id: str) -> bool:
        """Whether `task_id` has a webhook, as far as this process knows (no I/O)."""
        cached = self._cache.get(task_id)
        return cached is not None and bool(cached[1])

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig:
        """Create or replace (same id) a config of the task; returns it as stored."""
        normalized = normalize_push_notification_config(task_id, notification_config)
        owner, configs = await self._entry(task_id)
        principal = _principal(context)
        if configs and owner != principal:
            raise InvalidParamsError(message=f"task {task_id} is not yours")
        kept = [config for config in configs if config.id != normalized.id]
        if len(kept) >= MAX_CONFIGS_PER_TASK:
            raise InvalidParamsError(
                message=f"a task has at most {MAX_CONFIGS_PER_TASK} push notification configs"
            )
        await self._write(task_id, principal, [*kept, normalized])
        return normalized

    async def get_info(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        """The caller's configs of the task."""
        owner, configs = await self._entry(task_id)
        return list(configs) if owner == _principal(context) else []

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        """Every config of the task, whoever registered it (the sender's read)."""
        return list((await self._entry(task_id))[1])

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        """Delete one config (or all of the task's); deleting what is gone is no error."""
        owner, configs = await self._entry(task_id)
        if owner != _principal(context) or not configs:
            return
        kept = [] if config_id is None else [c for c in configs if c.id != config_id]
        if len(kept) != len(configs):
            await self._write(task_id, owner, kept)


def _decode(
    stored: RunRecord | None,
) -> tuple[str | None, list[TaskPushNotificationConfig]] | None:
    if stored is None or not isinstance(stored.input, dict):
        return None
    owner, items = stored.input.get("owner"), stored.input.get("configs")
    if not (owner is None or isinstance(owner, str)) or not isinstance(items, list):
        logger.warning("task=<%s> | skipping malformed push notification configs", stored.run_id)
        return None
    configs = []
    for item in items:
        if not isinstance(item, dict):
            continue
        try:
            configs.append(ParseDict(item, TaskPushNotificationConfig()))
        except ParseError:
            logger.warning("task=<%s> | skipping a malformed push config", stored.run_id)
    return owner, configs


class RetryingPushSender(BasePushNotificationSender):
    """The SDK's sender, trying each delivery again with exponential backoff.

    A webhook that is down delays only the notifications of its task: each task's
    updates are delivered by their own follower (`agentkeel.a2a.delivery`), in order.

    Args:
        config_store: Where the webhooks of a task are read.
        allow_private: Deliver to loopback and private addresses too.
        attempts: Tries per notification and webhook.
        transport: An httpx transport (tests).
    """

    def __init__(
        self,
        config_store: PushNotificationConfigStore,
        *,
        allow_private: bool = False,
        attempts: int = DELIVERY_ATTEMPTS,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        validator: Callable[[str], Awaitable[bool]] = (
            _syntax_only if allow_private else validate_push_notification_url
        )
        self.http = httpx.AsyncClient(
            timeout=_DELIVERY_TIMEOUT_SECONDS, follow_redirects=False, transport=transport
        )
        super().__init__(self.http, config_store, push_url_validator=validator)
        self.attempts = attempts

    async def _dispatch_notification(
        self,
        event: PushNotificationEvent,
        push_info: TaskPushNotificationConfig,
        task_id: str,
    ) -> bool:
        delay = _FIRST_BACKOFF_SECONDS
        for attempt in range(1, self.attempts + 1):
            if await super()._dispatch_notification(event, push_info, task_id):
                return True
            if attempt < self.attempts:
                await anyio.sleep(delay)
                delay = min(delay * 2, _MAX_BACKOFF_SECONDS)
        logger.warning(
            "task=<%s>, config=<%s> | gave up on a push notification after %d attempts",
            task_id,
            push_info.id,
            self.attempts,
        )
        return False

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.http.aclose()
