from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from agentkeel.sse import SSEDecoder, SSEFrame, aiter_sse, encode_comment, encode_frame


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def decode_all(*chunks: bytes) -> list[SSEFrame]:
    decoder = SSEDecoder()
    frames: list[SSEFrame] = []
    for chunk in chunks:
        frames.extend(decoder.feed(chunk))
    return frames


# --- encoding ---------------------------------------------------------------------------


def test_encode_frame_with_id_and_event() -> None:
    assert encode_frame('{"a":1}', id=7, event="update") == (
        b'event: update\nid: 7\ndata: {"a":1}\n\n'
    )


def test_encode_frame_data_only() -> None:
    assert encode_frame("hello") == b"data: hello\n\n"


def test_encode_frame_splits_multiline_data_on_every_line_ending() -> None:
    assert encode_frame("a\nb\r\nc\rd") == b"data: a\ndata: b\ndata: c\ndata: d\n\n"


def test_encode_frame_retry() -> None:
    assert encode_frame("x", retry=1500) == b"retry: 1500\ndata: x\n\n"


@pytest.mark.parametrize(
    ("encode", "message"),
    [
        (lambda: encode_frame("x", id="1\n2"), "line break"),
        (lambda: encode_frame("x", event="a\rb"), "line break"),
        (lambda: encode_frame("x", id="a\0b"), "NUL"),
        (lambda: encode_frame("x", retry=-1), "non-negative"),
    ],
)
def test_encode_frame_refuses_field_injection(encode: Callable[[], bytes], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        encode()


def test_encode_comment() -> None:
    assert encode_comment("ping") == b": ping\n\n"
    assert encode_comment("a\nb") == b": a\n: b\n\n"
    assert decode_all(encode_comment("ping"), encode_frame("x")) == [SSEFrame(data="x")]


@pytest.mark.parametrize(
    "data",
    ["", "plain", "two\nlines", "trailing newline\n", "\n\nleading", "ünïcødé ✓ 🎉", " spaced "],
)
def test_round_trip(data: str) -> None:
    frames = decode_all(encode_frame(data, id="run-1:3", event="message"))
    assert frames == [SSEFrame(data=data, id="run-1:3", event="message")]


# --- decoding ---------------------------------------------------------------------------


def test_several_frames_in_one_chunk() -> None:
    stream = b"data: one\n\ndata: two\n\nevent: e\ndata: three\n\n"
    assert decode_all(stream) == [
        SSEFrame(data="one"),
        SSEFrame(data="two"),
        SSEFrame(data="three", event="e"),
    ]


STREAM = (
    "\ufeffid: 1\r\nevent: greet\r\ndata: héllo 🎉\r\ndata: world\r\n\r\n"
    ": a comment\n"
    "data: second\rdata: line\r\r"
    "id: 2\ndata: third ✓\n\n"
).encode()
EXPECTED = [
    SSEFrame(data="héllo 🎉\nworld", id="1", event="greet"),
    SSEFrame(data="second\nline", id="1"),
    SSEFrame(data="third ✓", id="2"),
]


def test_mixed_line_endings_bom_comments_and_multibyte() -> None:
    assert decode_all(STREAM) == EXPECTED


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_split_at_every_byte(cut: int) -> None:
    assert decode_all(STREAM[:cut], STREAM[cut:]) == EXPECTED


def test_one_byte_at_a_time() -> None:
    assert decode_all(*(STREAM[i : i + 1] for i in range(len(STREAM)))) == EXPECTED


def test_crlf_split_between_chunks_is_one_line_ending() -> None:
    # An LF opening the next chunk completes the CRLF; it must not end an empty line
    # (which would dispatch "a" early) nor be taken as part of the next line.
    assert decode_all(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [SSEFrame(data="a\nb")]


def test_bom_split_across_chunks_is_dropped() -> None:
    bom = "\ufeff".encode()
    assert decode_all(bom[:1], bom[1:2], bom[2:] + b"data: x\n\n") == [SSEFrame(data="x")]


def test_only_a_leading_bom_is_dropped() -> None:
    frames = decode_all("data: \ufeffx\n\n".encode())
    assert frames == [SSEFrame(data="\ufeffx")]


def test_id_persists_until_changed_and_empty_id_resets() -> None:
    decoder = SSEDecoder()
    frames = decoder.feed(b"id: 5\ndata: a\n\ndata: b\n\nid\ndata: c\n\n")
    assert [frame.id for frame in frames] == ["5", "5", None]
    assert decoder.last_event_id is None


def test_id_set_by_a_block_without_data_still_persists() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"id: 9\n\n") == []
    assert decoder.last_event_id == "9"
    assert decoder.feed(b"data: x\n\n") == [SSEFrame(data="x", id="9")]


def test_id_containing_nul_is_ignored() -> None:
    assert decode_all(b"id: 1\n\nid: a\0b\ndata: x\n\n") == [SSEFrame(data="x", id="1")]


def test_field_parsing_rules() -> None:
    stream = (
        b"data\n"  # no colon: the whole line is the field name, value empty
        b"data:no space\n"
        b"data:  two spaces\n"  # only one space is stripped
        b"unknown: ignored\n"
        b"Data: case matters\n"
        b"\n"
    )
    assert decode_all(stream) == [SSEFrame(data="\nno space\n two spaces")]


def test_empty_data_line_dispatches_an_empty_frame() -> None:
    assert decode_all(b"data:\n\n") == [SSEFrame(data="")]


def test_block_without_data_is_not_dispatched_and_drops_its_event_type() -> None:
    assert decode_all(b"event: lost\n\ndata: x\n\n") == [SSEFrame(data="x")]


def test_retry_is_reported_once_and_remembered() -> None:
    decoder = SSEDecoder()
    frames = decoder.feed(b"retry: 3000\n\ndata: a\n\nretry: x1\ndata: b\n\n")
    assert frames == [SSEFrame(data="a", retry=3000), SSEFrame(data="b")]
    assert decoder.retry == 3000


def test_incomplete_trailing_event_is_not_dispatched() -> None:
    assert decode_all(b"data: done\n\ndata: partial\n") == [SSEFrame(data="done")]


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    assert decode_all(b"data: a\xffb\n\n") == [SSEFrame(data="a\ufffdb")]


async def _chunks(*chunks: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


@pytest.mark.anyio
async def test_aiter_sse_yields_frames_as_they_complete() -> None:
    pieces = [STREAM[i : i + 3] for i in range(0, len(STREAM), 3)]
    frames = [frame async for frame in aiter_sse(_chunks(*pieces, b"data: cut"))]
    assert frames == EXPECTED
