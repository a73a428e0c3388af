"""The PostgreSQL fixtures (`postgres.fixtures`) for the coordination backends' tests."""

from postgres.fixtures import *  # noqa: F403
