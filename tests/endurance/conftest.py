"""The PostgreSQL fixtures (`postgres.fixtures`), for the kill rounds on PostgreSQL."""

from postgres.fixtures import *  # noqa: F403
