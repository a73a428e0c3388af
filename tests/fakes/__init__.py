"""Fake model provider servers that speak the real wire formats, served on loopback.

Import from here in any test suite::

    from fakes import FakeOpenAI, OpenAIStream

    fake = FakeOpenAI()
    fake.enqueue(OpenAIStream().text("Hi").finish("stop").usage(5, 1).reply())
    with fake.serve() as base_url:
        ...

`run_asgi_server(app)` serves any other ASGI app the same way.
"""

from fakes.anthropic_server import AnthropicStream, FakeAnthropic, anthropic_error
from fakes.openai_server import FakeOpenAI, OpenAIStream, echo_responder, openai_error
from fakes.server import RecordedRequest, Reply, json_reply, run_asgi_server, split_bytes

__all__ = [
    "AnthropicStream",
    "FakeAnthropic",
    "FakeOpenAI",
    "OpenAIStream",
    "RecordedRequest",
    "Reply",
    "anthropic_error",
    "echo_responder",
    "json_reply",
    "openai_error",
    "run_asgi_server",
    "split_bytes",
]
