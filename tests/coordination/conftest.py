"""The PostgreSQL and Redis fixtures for the coordination backends' tests."""

from coordination.redis_fixtures import *  # noqa: F403
from postgres.fixtures import *  # noqa: F403
