"""Backends are chosen by URL; a missing one says what to install."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkeel.errors import ConfigurationError
from agentkeel.storage import InMemoryStorage, LocalFileStorage, open_storage
from agentkeel.storage.registry import Backend, register_backend


def test_memory_and_folders(tmp_path: Path) -> None:
    assert isinstance(open_storage("memory:"), InMemoryStorage)
    assert isinstance(open_storage("memory://"), InMemoryStorage)
    for url, expected in [
        ("./sessions", tmp_path / "sessions"),
        ("sessions", tmp_path / "sessions"),
        ("file:./sessions", tmp_path / "sessions"),
        (f"file://{tmp_path}/abs", tmp_path / "abs"),
        (str(tmp_path / "plain"), tmp_path / "plain"),
    ]:
        storage = open_storage(url, base=tmp_path)
        assert isinstance(storage, LocalFileStorage) and storage.directory == expected, url


@pytest.mark.parametrize(
    ("url", "extra"),
    [
        ("redis://r/0", "redis"),
    ],
)
def test_a_backend_not_built_yet_says_so_and_names_the_extra(url: str, extra: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        open_storage(url)
    assert "is not available" in caught.value.message
    assert f"pip install 'agentkeel[{extra}]'" in caught.value.message


def test_an_unknown_scheme_lists_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match="unknown storage scheme 'mongodb'.*'memory:'"):
        open_storage("mongodb://x")
    with pytest.raises(ConfigurationError, match="needs a folder"):
        open_storage("file:")


def test_a_third_party_backend_plugs_in() -> None:
    register_backend("mem2", Backend("agentkeel.storage.registry:_memory"))
    assert isinstance(open_storage("mem2:anything"), InMemoryStorage)
