"""The PostgreSQL fixtures (`postgres.fixtures`), for the crash test on PostgreSQL."""

from postgres.fixtures import *  # noqa: F403
