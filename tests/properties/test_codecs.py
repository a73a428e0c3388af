"""Properties of the SSE decoder, the message codec and the context-id encoding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentkeel.errors import InvalidContextIdError
from agentkeel.ids import (
    CONTEXT_ID_PATTERN,
    decode_path_segment,
    encode_path_segment,
    validate_context_id,
)
from agentkeel.messages import (
    Message,
    MessageDecodeError,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    dumps_message,
    loads_message,
    messages_from_json,
    messages_to_json,
)
from agentkeel.sse import SSEDecoder, SSEFrame, encode_comment, encode_frame

# -- SSE --------------------------------------------------------------------------------------

_one_line = st.text(st.characters(exclude_characters="\r\n\0", codec="utf-8"), max_size=20)
_frames = st.lists(
    st.tuples(
        st.text(st.characters(codec="utf-8"), max_size=60),  # any data, line breaks included
        st.one_of(st.none(), st.integers(0, 10**9).map(str), _one_line.filter(bool)),
        st.one_of(st.none(), _one_line.filter(bool)),
    ),
    max_size=8,
)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@given(_frames, st.lists(st.integers(0, 10**6), max_size=12), st.booleans())
def test_sse_frames_round_trip_however_the_bytes_are_chunked(
    frames: list[tuple[str, str | None, str | None]], cuts: list[int], comments: bool
) -> None:
    stream = b""
    expected: list[SSEFrame] = []
    last_id: str | None = None
    for data, frame_id, event in frames:
        if comments:
            stream += encode_comment("heartbeat")
        stream += encode_frame(data, id=frame_id, event=event)
        last_id = frame_id if frame_id is not None else last_id
        normalized = data.replace("\r\n", "\n").replace("\r", "\n")
        expected.append(SSEFrame(data=normalized, id=last_id, event=event))
    decoder = SSEDecoder()
    got = [frame for chunk in _split(stream, cuts) for frame in decoder.feed(chunk)]
    assert got == expected
    assert decoder.last_event_id == last_id


@given(st.lists(st.binary(max_size=64), max_size=10))
def test_the_sse_decoder_takes_any_bytes_without_raising(chunks: list[bytes]) -> None:
    decoder = SSEDecoder()
    for chunk in chunks:
        for frame in decoder.feed(chunk):
            assert isinstance(frame.data, str)
            assert frame.id is None or "\0" not in frame.id


# -- the message codec --------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_text = st.text(max_size=30)
_parts = st.one_of(
    st.builds(TextPart, text=_text),
    st.builds(ThinkingPart, text=_text, signature=st.none() | _text),
    st.builds(
        ToolCallPart,
        id=_text.filter(bool),
        name=_text.filter(bool),
        input=st.dictionaries(st.text(max_size=5), _json, max_size=3),
    ),
    st.builds(
        ToolResultPart,
        call_id=_text.filter(bool),
        name=_text.filter(bool),
        content=_json,
        status=st.sampled_from(["success", "error"]),
    ),
)
_messages = st.builds(
    Message,
    role=st.sampled_from(["user", "assistant"]),
    parts=st.lists(_parts, max_size=4).map(tuple),
)


@given(st.lists(_messages, max_size=5))
def test_a_history_round_trips_through_json(history: list[Message]) -> None:
    assert messages_from_json(json.loads(json.dumps(messages_to_json(history)))) == history


@given(_messages)
def test_a_message_round_trips_through_one_jsonl_line(message: Message) -> None:
    line = dumps_message(message)
    assert "\n" not in line
    assert loads_message(line) == message
    assert loads_message(line.encode("utf-8")) == message


@given(st.one_of(st.text(max_size=80), _json.map(json.dumps)))
def test_a_bad_line_is_a_decode_error_and_nothing_else(line: str) -> None:
    try:
        loads_message(line)
    except MessageDecodeError:
        pass


# -- context ids ----------------------------------------------------------------------------


@given(st.text(max_size=140))
def test_a_context_id_is_valid_exactly_when_the_spec_pattern_allows_it(value: str) -> None:
    allowed = bool(CONTEXT_ID_PATTERN.fullmatch(value)) and ".." not in value
    try:
        assert validate_context_id(value) == value
        assert allowed
    except InvalidContextIdError:
        assert not allowed


@given(st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}\Z").filter(lambda v: ".." not in v))
def test_every_id_the_pattern_allows_is_accepted(value: str) -> None:
    assert validate_context_id(value) == value


@given(st.text(min_size=1, max_size=60))
def test_any_id_encodes_to_one_file_name_inside_its_folder(value: str) -> None:
    root = Path("/srv/sessions")
    name = encode_path_segment(value)
    assert "/" not in name and "\\" not in name and "\0" not in name
    assert name not in (".", "..") and not name.startswith(".")
    assert (root / name).parent == root
    assert decode_path_segment(name) == value


@given(st.text(min_size=1, max_size=30), st.text(min_size=1, max_size=30))
def test_two_ids_never_share_a_file_name(first: str, second: str) -> None:
    if first != second:
        assert encode_path_segment(first) != encode_path_segment(second)


@pytest.mark.parametrize("value", ["..", ".", "../x", "a/../../etc", "/etc/passwd", "a\\b", "a\0b"])
def test_known_escapes_are_refused_at_the_edge(value: str) -> None:
    with pytest.raises(InvalidContextIdError):
        validate_context_id(value)
