"""``ListTasks``: filter, order (newest status first) and page a principal's tasks.

The page token is the SDK's opaque cursor (the last task's status time and id), so a
page stays valid when tasks change meanwhile; ``nextPageToken`` is empty on the last
page, and artifacts are left out unless ``includeArtifacts`` asks for them.
"""

from __future__ import annotations

from collections.abc import Sequence

from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import (
    ListTasksCursor,
    apply_history_length,
    decode_list_tasks_cursor,
    encode_list_tasks_cursor,
    validate_page_size,
)

__all__ = ["list_tasks"]


def _cursor(task: Task) -> ListTasksCursor:
    stamp = task.status.timestamp.ToNanoseconds() if task.status.HasField("timestamp") else None
    return ListTasksCursor(timestamp_ns=stamp, task_id=task.id)


def list_tasks(tasks: Sequence[Task], params: ListTasksRequest) -> ListTasksResponse:
    """One page of `tasks` (already limited to the caller and context) as `params` asks."""
    size = DEFAULT_LIST_TASKS_PAGE_SIZE
    if params.HasField("page_size"):
        validate_page_size(params.page_size)
        size = params.page_size
    chosen = list(tasks)
    if params.status != TaskState.TASK_STATE_UNSPECIFIED:
        chosen = [task for task in chosen if task.status.state == params.status]
    if params.HasField("status_timestamp_after"):
        after = params.status_timestamp_after.ToNanoseconds()
        chosen = [task for task in chosen if (_cursor(task).timestamp_ns or 0) > after]
    chosen.sort(key=lambda task: _cursor(task).sort_key(), reverse=True)
    total = len(chosen)
    if params.page_token:
        cursor = decode_list_tasks_cursor(params.page_token)
        if cursor is None:
            raise InvalidParamsError(message="pageToken is not a token this server gave")
        chosen = [task for task in chosen if _cursor(task).sort_key() < cursor.sort_key()]
    page = chosen[:size]
    more = len(chosen) > size
    listed: list[Task] = []
    for task in page:
        shown = apply_history_length(task, params)
        if not params.include_artifacts:
            shown = _without_artifacts(shown)
        listed.append(shown)
    return ListTasksResponse(
        tasks=listed,
        next_page_token=encode_list_tasks_cursor(_cursor(page[-1])) if more and page else "",
        page_size=size,
        total_size=total,
    )


def _without_artifacts(task: Task) -> Task:
    if not task.artifacts:
        return task
    copy = Task()
    copy.CopyFrom(task)
    copy.ClearField("artifacts")
    return copy
