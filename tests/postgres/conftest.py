"""The PostgreSQL fixtures (`postgres.fixtures`) and the end-to-end suite's tool log."""

from e2e.conftest import tool_log
from postgres.fixtures import *  # noqa: F403

__all__ = ["tool_log"]
