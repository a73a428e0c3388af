"""`postgresql://` in framework.json and the URL registry; no database needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkeel.checkpoint.postgres import PostgresCheckpointer
from agentkeel.errors import ConfigurationError, StorageUnavailableError
from agentkeel.framework import load_framework
from agentkeel.keys import SessionKey
from agentkeel.storage import open_storage
from agentkeel.storage.postgres import PostgresStorage, from_url, redact

DEMO = {"model": {"provider": "demo"}}


def test_the_url_registry_opens_postgres_without_connecting() -> None:
    for url in ("postgresql://db/agentkeel", "postgres://db/x"):
        storage = open_storage(url)
        assert isinstance(storage, PostgresStorage)
        assert storage.schema == "agentkeel" and storage.prepare_threshold == 5


def test_agentkeel_parameters_are_taken_out_of_the_url() -> None:
    storage = from_url(
        "postgresql://u:pw@db:6432/app?schema=tenant_a&prepare_threshold=none"
        "&pool_size=3&sslmode=require",
        None,
    )
    assert storage.schema == "tenant_a"
    assert storage.prepare_threshold is None  # PgBouncer in transaction mode
    assert storage.pool_size == 3
    assert storage.dsn == "postgresql://u:pw@db:6432/app?sslmode=require"


def test_a_bad_schema_name_is_a_configuration_error_without_the_password() -> None:
    with pytest.raises(ConfigurationError) as caught:
        from_url("postgresql://u:pw@db/app?schema=Robert';drop", None)
    assert "schema name" in caught.value.message and "pw" not in caught.value.message


def test_redact_hides_only_the_password() -> None:
    assert redact("postgresql://u:secret@db:5432/app") == "postgresql://u:***@db:5432/app"
    assert redact("postgresql://db/app") == "postgresql://db/app"


def test_framework_storage_from_the_environment_keeps_checkpoints_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://db/app?schema=prod")
    framework = load_framework({"agents": {"a": DEMO}, "storage": {"env": "DATABASE_URL"}})
    assert isinstance(framework.storage, PostgresStorage) and framework.storage.schema == "prod"
    assert isinstance(framework.checkpointer, PostgresCheckpointer)


@pytest.mark.anyio
async def test_a_storage_that_was_never_opened_says_so() -> None:
    storage = PostgresStorage("postgresql://db/app")
    with pytest.raises(StorageUnavailableError, match="not open"):
        await storage.load(SessionKey(definition="a", context_id="ctx-1"))
    assert not (await storage.health()).ok
