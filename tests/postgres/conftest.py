"""The PostgreSQL fixtures (`postgres.fixtures`), for the tests of this folder."""

from postgres.fixtures import *  # noqa: F403
