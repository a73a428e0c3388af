"""Schemathesis drives every operation of the OpenAPI document against a real server.

The server (uvicorn on loopback, the demo and scripted agents, file storage, memory,
API-key auth) serves the document it is fuzzed with. Each response must: not be a 5xx,
conform to the document (status, content type, headers, body schema), carry no secret
and no stack trace; each stream frame must be a valid EventFrame or DoneFrame; and the
run must write nothing outside the configured data folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, seed, settings
from pydantic import ValidationError
from schemathesis import checks as st_checks

from agentkeel.server.openapi import build_document
from agentkeel.server.openapi_models import DoneFrame, EventFrame
from fuzz import budget
from openapi import API_KEY, leaks, served, written_outside

_STATE: dict[str, Any] = {}


@pytest.fixture(scope="module")
def fuzz_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("fuzz")
    with served(root) as url:
        _STATE["url"] = url
        served_document = httpx.get(url + "/openapi.json", headers={"x-api-key": API_KEY})
        assert served_document.json() == json.loads(json.dumps(DOCUMENT))
        yield root
    assert written_outside(root) == []


def _frames(text: str) -> Iterator[dict[str, Any]]:
    for line in text.splitlines():
        if line.startswith("data:"):
            yield json.loads(line[5:].strip())


def no_leaks_and_valid_frames(ctx: Any, response: Any, case: Any) -> bool | None:
    """No secret or stack trace in any body; every SSE frame is a documented frame."""
    del ctx
    text = response.text or ""
    assert leaks(text) == [], f"the body leaks {leaks(text)}"
    native = case.operation.path.endswith("/stream")  # AG-UI and OpenAI streams are theirs
    if native and "text/event-stream" in response.headers.get("content-type", [""])[0]:
        frames = list(_frames(text))
        assert frames, "a stream with no frame"
        for frame in frames[:-1]:
            EventFrame.model_validate(frame)
        if not getattr(response, "stream_cut_short", False):
            try:
                DoneFrame.model_validate(frames[-1])
            except ValidationError as exc:
                raise AssertionError(f"the last frame is not a done frame: {exc}") from None
    return None


DOCUMENT = build_document(["demo", "scripted"], ui=True)
"""What the fuzz server serves at /openapi.json (the fixture checks they are equal)."""
schema = schemathesis.openapi.from_dict(DOCUMENT)
schema.config.max_stream_events = 2000  # read a whole run, up to its done frame

_CHECKS = [
    st_checks.not_a_server_error,
    st_checks.status_code_conformance,
    st_checks.content_type_conformance,
    st_checks.response_schema_conformance,
    st_checks.response_headers_conformance,
    no_leaks_and_valid_frames,
]


@schema.parametrize()
@seed(budget.SEED)
@settings(
    max_examples=budget.EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_survives_generated_requests(
    fuzz_root: Path, case: schemathesis.Case[Any]
) -> None:
    del fuzz_root
    budget.TRIED[case.operation.label] += 1
    headers = {"x-api-key": API_KEY} if not case.headers or "x-api-key" not in case.headers else {}
    case.call_and_validate(base_url=_STATE["url"], headers=headers, checks=_CHECKS, timeout=30)
