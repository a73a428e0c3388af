"""Every error code of `agentkeel.server.error_codes`, provoked over HTTP on a real server.

Each code has a provocation: requests a client (or an operator's configuration) can make
against servers on loopback (uvicorn, file storage, API keys and HS256 JWTs, a fake
OpenAI server for the provider's failures). Its answer must carry the code with its
status, and never a stack trace, a path or what a failing component said. Failures
inside a run are not HTTP errors (docs/server.md): `send` answers 200 with a failed
SendResult carrying the code. The few codes no client can provoke are in `UNREACHABLE`,
each with why and what tests it instead; a test checks the two lists cover the table.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from agentkeel.server import create_app
from agentkeel.server.error_codes import error_codes
from e2e import TOOL_LOG, serve_in_thread
from fakes import FakeOpenAI, RecordedRequest, Reply
from fakes.openai_server import OpenAIStream, openai_error
from fakes.server import run_asgi_server

KEY = "alice-codes-key-0f6b2a9c41"
SECRET = "hs256-codes-secret-" + "5e1d" * 10
ISSUER, AUDIENCE = "https://id.codes.test/", "agentkeel-codes"
TELL = "Remember for next time that my favourite colour is blue"
RUN = "run failed"
"""The status column of a code that a failed run carries (200, ``status: failed``)."""
LEAKS = ("Traceback", 'File "/', "/srv/secret", "/etc/app", "site-packages", "provider said")


def provider_reply(recorded: RecordedRequest) -> Reply:
    """The fake OpenAI server: the last user message says how to fail."""
    messages = recorded.json["messages"] if isinstance(recorded.json, dict) else []
    last = messages[-1] if isinstance(messages, list) and messages else {}
    said = str(last.get("content")) if isinstance(last, dict) else ""
    if said == "overflow":
        message = "This model's maximum context length is 8192 tokens; provider said so"
        return openai_error(400, message, code="context_length_exceeded")
    if said == "garbage":
        return OpenAIStream().error("provider said: odd", type="weird_kind").reply()
    if said.isdigit():
        return openai_error(int(said), "provider said no", type="server_error")
    return OpenAIStream().text("fine").finish().usage(3, 1).reply()


@dataclass(frozen=True, slots=True)
class Servers:
    """The servers the provocations reach, each configured for some of the codes."""

    main: str
    budget: str
    jwks: str
    unstarted: str
    """A server whose lifespan never ran (as while it drains): it takes no turn."""
    mismatch: Callable[[], str]
    """Starts the lexical-embeddings twin of `main` (its vectors are MiniLM's)."""
    sessions: Path


def _main(root: Path, provider: str) -> dict[str, object]:
    factory = {
        name: {"factory": f"e2e.codes:{name}", "description": f"fails: {name}"}
        for name in _FACTORIES
    }
    return {
        "agents": {
            "scripted": {"factory": "e2e:scripted_agent"},
            "demo": {
                "model": {"provider": "demo"},
                "tools": ["agentkeel.tools:remember", "agentkeel.tools:recall"],
            },
            "provider": {
                "model": {"provider": "openai", "model": "gpt-test", "baseUrl": provider},
            },
            **factory,
        },
        "sessionDir": str(root / "sessions"),
        "memory": {"store": "file", "embeddings": "offline"},
        "server": {
            "auth": {
                "apiKeys": {"alice": {"env": "CODES_KEY"}},
                "jwt": {"issuer": ISSUER, "audience": AUDIENCE, "secretEnv": "CODES_JWT"},
            },
            "concurrency": "reject",
            "maxBodyBytes": 65536,
            "shutdownTimeoutSeconds": 5,
            "limits": {
                "maxMessageBytes": 4096,
                "turnsPerMinutePerContext": 2,
                "bodyTimeoutSeconds": 1,
            },
        },
    }


_FACTORIES = ("refusing", "shared", "broken", "misconfigured", "looping", "untyped")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    root = tmp_path_factory.mktemp("codes")
    saved = {name: os.environ.get(name) for name in ("CODES_KEY", "CODES_JWT", TOOL_LOG)}
    os.environ.update(CODES_KEY=KEY, CODES_JWT=SECRET, **{TOOL_LOG: str(root / "tools.log")})
    fake = FakeOpenAI(responder=provider_reply)
    scripted = {"scripted": {"factory": "e2e:scripted_agent"}}
    dead = "http://127.0.0.1:9"
    budget = {
        "agents": scripted,
        "budgets": {"tokensPerPrincipalPerDay": 1},
        "memory": {
            "store": "memory",
            "embeddings": {"provider": "openai", "model": "emb-test", "baseUrl": dead + "/v1"},
        },
    }
    jwks = {
        "agents": scripted,
        "server": {
            "auth": {
                "apiKeys": {"alice": {"env": "CODES_KEY"}},
                "jwt": {"issuer": ISSUER, "audience": AUDIENCE, "jwksUrl": dead + "/jwks"},
            }
        },
    }
    try:
        with ExitStack() as stack:
            provider = stack.enter_context(fake.serve())
            main = _main(root, provider)
            twin = {**main, "memory": {"store": "file", "embeddings": "lexical"}}
            yield Servers(
                main=stack.enter_context(serve_in_thread(create_app(main))),
                budget=stack.enter_context(serve_in_thread(create_app(budget))),
                jwks=stack.enter_context(serve_in_thread(create_app(jwks))),
                unstarted=stack.enter_context(run_asgi_server(create_app({"agents": scripted}))),
                mismatch=lambda: stack.enter_context(serve_in_thread(create_app(twin))),
                sessions=root / "sessions",
            )
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


ALICE = {"X-API-Key": KEY}


def _send(url: str, body: object, agent: str = "scripted", **options: object) -> httpx.Response:
    headers = {**ALICE, **options.pop("headers", {})}  # type: ignore[dict-item]
    return httpx.post(f"{url}/agents/{agent}/send", json=body, headers=headers, timeout=30)


def _raw(url: str, method: str, path: str, **options: object) -> httpx.Response:
    headers = {**ALICE, **options.pop("headers", {})}  # type: ignore[dict-item]
    return httpx.request(method, url + path, headers=headers, timeout=30, **options)  # type: ignore[arg-type]


def _token(**claims: object) -> dict[str, str]:
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "carol", "exp": int(time.time()) + 300}
    token = jwt.encode({**body, **claims}, SECRET, "HS256")
    return {"Authorization": f"Bearer {token}"}


def _rs256() -> dict[str, str]:
    """A well-formed RS256 token, which only the issuer's (unreachable) JWKS could check."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "carol", "exp": int(time.time()) + 300}
    token = jwt.encode(body, key, "RS256", headers={"kid": "key-1"})
    return {"Authorization": f"Bearer {token}"}


def _twice(
    first: Callable[[], httpx.Response], then: Callable[[], httpx.Response]
) -> httpx.Response:
    assert first().status_code == 200
    return then()


def _busy(s: Servers) -> httpx.Response:
    slow = threading.Thread(
        target=_send, args=(s.main, {"message": "pause 2", "contextId": "busy"})
    )
    slow.start()
    try:
        time.sleep(0.5)
        return _send(s.main, {"message": "hi", "contextId": "busy"})
    finally:
        slow.join()


def _suspended(s: Servers, context: str) -> None:
    answered = _send(s.main, {"message": "delete z", "contextId": context})
    assert answered.json()["status"] == "suspended", answered.text


def _pending(s: Servers) -> httpx.Response:
    _suspended(s, "pending")
    return _send(s.main, {"message": "hello", "contextId": "pending"})


def _unknown_interrupt(s: Servers) -> httpx.Response:
    _suspended(s, "unknown-int")
    resume = {"interruptId": "int-nope", "decision": {"approved": True}}
    return _send(s.main, {"contextId": "unknown-int", "resume": resume})


def _idle(s: Servers, context: str) -> str:
    """Run one turn on `context`, so that it exists and is idle; returns the context."""
    assert _send(s.main, {"message": "hi", "contextId": context}).status_code == 200
    return context


def _fork(s: Servers, source: str, body: dict[str, object]) -> httpx.Response:
    return _raw(s.main, "POST", f"/agents/scripted/contexts/{source}/fork", json=body)


def _no_run(s: Servers) -> httpx.Response:
    _idle(s, "forked-from")
    forked = _fork(s, "forked-from", {"contextId": "forked-to"})
    assert forked.status_code in (200, 201), forked.text
    return _raw(s.main, "GET", "/agents/scripted/contexts/forked-to/stream")


def _trickle(s: Servers) -> tuple[int, dict[str, object], str]:
    """A body that never arrives whole: the raw bytes a socket client gets back."""
    host, port = s.main.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        head = (
            f"POST /agents/scripted/send HTTP/1.1\r\nHost: {host}\r\nX-API-Key: {KEY}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        )
        sock.sendall(head.encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.decode().partition("\r\n")
    body = rest.partition("\r\n\r\n")[2]
    return int(status_line.split()[1]), json.loads(body), answer.decode()


def _corrupt(s: Servers) -> httpx.Response:
    _idle(s, "corrupt")
    (log,) = s.sessions.glob("alice/scripted:corrupt/messages.jsonl")
    log.write_text("{not json}\n" + log.read_text(encoding="utf-8"), encoding="utf-8")
    return _raw(s.main, "GET", "/agents/scripted/contexts/corrupt/messages")


def _blocked(s: Servers) -> httpx.Response:
    """A context's folder is a file (a disk an operator broke): storage cannot write."""
    folder = s.sessions / "alice" / "scripted:blocked"
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.write_text("not a folder", encoding="utf-8")
    return _send(s.main, {"message": "hi", "contextId": "blocked"})


def _mismatch(s: Servers) -> httpx.Response:
    assert _send(s.main, {"message": TELL}, agent="demo").json()["toolCalls"] == ["remember"]
    return _raw(s.mismatch(), "GET", "/agents/demo/memory", params={"q": "colour"})


Provoke = Callable[[Servers], httpx.Response]
PROVOKED: dict[str, tuple[int | str, Provoke]] = {
    "invalid_json": (400, lambda s: _raw(s.main, "POST", "/agents/scripted/send", content=b"{")),
    "invalid_request": (400, lambda s: _send(s.main, [1])),
    "invalid_context_id": (400, lambda s: _send(s.main, {"message": "x", "contextId": "../up"})),
    "invalid_memory_key": (400, lambda s: _raw(s.main, "GET", "/agents/demo/memory?limit=0")),
    "unauthorized": (401, lambda s: httpx.get(s.main + "/agents")),
    "invalid_token": (401, lambda s: _raw(s.main, "GET", "/agents", headers=_token(aud="x"))),
    "token_expired": (401, lambda s: _raw(s.main, "GET", "/agents", headers=_token(exp=1))),
    "context_forbidden": (403, lambda s: _send(s.main, {"message": "x"}, agent="refusing")),
    "agent_not_found": (404, lambda s: _send(s.main, {"message": "x"}, agent="nobody")),
    "context_not_found": (404, lambda s: _raw(s.main, "DELETE", "/agents/scripted/contexts/no")),
    "message_not_found": (
        404,
        lambda s: _fork(s, _idle(s, "cut"), {"messageId": "msg-" + "0" * 24}),
    ),
    "run_not_found": (404, _no_run),
    "interrupt_not_found": (404, _unknown_interrupt),
    "memory_not_found": (404, lambda s: _raw(s.main, "DELETE", "/agents/demo/memory/nothing")),
    "memory_not_configured": (404, lambda s: _raw(s.jwks, "GET", "/agents/scripted/memory")),
    "not_found": (404, lambda s: _raw(s.main, "GET", "/nowhere")),
    "method_not_allowed": (405, lambda s: _raw(s.main, "PUT", "/agents")),
    "context_busy": (409, _busy),
    "context_exists": (
        409,
        lambda s: _fork(s, _idle(s, "taken"), {"contextId": "taken"}),
    ),
    "interrupt_pending": (409, _pending),
    "no_active_run": (
        409,
        lambda s: _raw(s.main, "POST", f"/agents/scripted/contexts/{_idle(s, 'idle')}/cancel"),
    ),
    "embedding_mismatch": (409, _mismatch),
    "payload_too_large": (
        413,
        lambda s: _raw(s.main, "POST", "/agents/scripted/send", content=b"{" + b" " * 70000),
    ),
    "message_too_large": (413, lambda s: _send(s.main, {"message": "x" * 5000})),
    "idempotency_key_reused": (
        422,
        lambda s: _twice(
            lambda: _send(s.main, {"message": "a"}, headers={"Idempotency-Key": "k-1"}),
            lambda: _send(s.main, {"message": "b"}, headers={"Idempotency-Key": "k-1"}),
        ),
    ),
    "rate_limited": (
        429,
        lambda s: [_send(s.main, {"message": "x", "contextId": "rate"}) for _ in range(3)][-1],
    ),
    "budget_exceeded": (
        429,
        lambda s: _twice(
            lambda: _send(s.budget, {"message": "spend"}),
            lambda: _send(s.budget, {"message": "more"}),
        ),
    ),
    "agent_shared": (
        500,
        lambda s: _twice(
            lambda: _send(s.main, {"message": "x", "contextId": "one"}, agent="shared"),
            lambda: _send(s.main, {"message": "x", "contextId": "two"}, agent="shared"),
        ),
    ),
    "internal_error": (500, lambda s: _send(s.main, {"message": "x"}, agent="broken")),
    "invalid_config": (500, lambda s: _send(s.main, {"message": "x"}, agent="misconfigured")),
    "corrupt_session": (500, _corrupt),
    "storage_error": (500, _blocked),
    "embedding_failed": (502, lambda s: _raw(s.budget, "GET", "/agents/scripted/memory?q=x")),
    "shutting_down": (
        503,
        lambda s: httpx.post(s.unstarted + "/agents/scripted/send", json={"message": "x"}),
    ),
    "auth_unavailable": (503, lambda s: httpx.get(s.jwks + "/agents", headers=_rs256())),
    "model_auth_failed": (RUN, lambda s: _send(s.main, {"message": "401"}, agent="provider")),
    "model_bad_request": (RUN, lambda s: _send(s.main, {"message": "400"}, agent="provider")),
    "model_rate_limited": (RUN, lambda s: _send(s.main, {"message": "429"}, agent="provider")),
    "model_unavailable": (RUN, lambda s: _send(s.main, {"message": "503"}, agent="provider")),
    "context_overflow": (RUN, lambda s: _send(s.main, {"message": "overflow"}, agent="provider")),
    "model_error": (RUN, lambda s: _send(s.main, {"message": "garbage"}, agent="provider")),
    "max_steps_exceeded": (RUN, lambda s: _send(s.main, {"message": "x"}, agent="looping")),
    "output_invalid": (RUN, lambda s: _send(s.main, {"message": "x"}, agent="untyped")),
}
"""Each code: the status it must come with (`RUN`: a failed run's), and how to get it."""

UNREACHABLE: dict[str, str] = {
    "request_timeout": "provoked below over a raw socket (a body that trickles in)",
    # A client of one server cannot make another writer commit to its context: the server
    # runs a context's turns one at a time. tests/e2e/test_concurrent_write.py provokes it
    # over HTTP with a tool that writes through a second Agent, on every binding.
    "concurrent_write": "needs a second writer of the same session during the turn",
    # Only with a shared coordination (the in-process lease never expires): a holder
    # paused past its lease while another replica takes the context over. Its client is
    # gone by then; tests/many_replicas/test_replicas.py pauses one with SIGSTOP and
    # checks that its late turn is not committed.
    "lease_lost": "needs a replica paused past its lease",
    # The server refuses to start on a database whose schema is newer than it knows: an
    # error at start (tests/postgres/test_schema.py), never an answer to a request.
    "storage_schema_too_new": "stops the server at start, before any request",
    # Raised by library code that asks for the session before restoring it; the server
    # restores every context before it runs, so no request can meet it.
    "restore_required": "library misuse the server's own path never makes",
    # The base class of the interrupt errors: the server raises only its subclasses
    # (interrupt_not_found, interrupt_pending), checked by the test below.
    "interrupt_error": "a base class never raised as itself",
    # AgentState refuses a value that is not JSON inside a tool call, where the loop turns
    # it into that tool's error result for the model; the run goes on.
    "invalid_state_value": "becomes a tool's error result, never an answer",
    # A database that cannot be reached: tests/postgres/test_served.py cuts a live
    # connection through a proxy and checks the 503 over HTTP and its recovery.
    "storage_unavailable": "needs a database connection cut under a running server",
}
"""Codes not provoked by `PROVOKED`, and why; each is tested where its cause can be made."""


def _no_leak(response_text: str) -> None:
    for leak in LEAKS:
        assert leak not in response_text, f"{leak!r} reached the client: {response_text}"


@pytest.mark.parametrize("code", sorted(PROVOKED))
def test_a_real_server_answers_the_code(servers: Servers, code: str) -> None:
    expected, provoke = PROVOKED[code]
    response = provoke(servers)
    _no_leak(response.text)
    if expected == RUN:
        assert response.status_code == 200, response.text
        result = response.json()
        assert result["status"] == "failed", result
        assert result["error"]["code"] == code, result
        return
    assert response.status_code == expected, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert list(body) == ["error"] and body["error"]["code"] == code, body
    assert error_codes()[code][0] == expected, "the document says another status"


def test_a_body_that_trickles_in_gets_408(servers: Servers) -> None:
    status, body, raw = _trickle(servers)
    _no_leak(raw)
    assert status == 408 and body["error"]["code"] == "request_timeout"  # type: ignore[index]
    assert error_codes()["request_timeout"][0] == 408


def test_every_code_is_provoked_or_said_why_not() -> None:
    table = set(error_codes())
    assert set(PROVOKED) | set(UNREACHABLE) == table
    assert not set(PROVOKED) & set(UNREACHABLE)


def test_interrupt_error_is_never_raised_as_itself() -> None:
    import agentkeel

    src = Path(agentkeel.__file__).parent
    raising = [
        str(path.relative_to(src))
        for path in src.rglob("*.py")
        if "raise InterruptError(" in path.read_text(encoding="utf-8")
    ]
    assert raising == []
