"""Tests for DLC's pure-Python ``http_parser`` shim (compat/http-parser) as pymesos drives it."""

from __future__ import annotations

import json

import pytest
from http_parser.http import HttpParser
from http_parser.pyparser import INVALID_CHUNK, INVALID_CHUNK_SIZE, INVALID_STATUS_LINE
from hypothesis import given, settings
from hypothesis import strategies as st


def recordio(*events: dict) -> bytes:
    """Frames events the way the Mesos master does: ``<length>\\n<json>``."""
    out = b""
    for event in events:
        data = json.dumps(event).encode()
        out += str(len(data)).encode() + b"\n" + data
    return out


def chunked(body: bytes, sizes: list[int]) -> bytes:
    """Splits ``body`` into HTTP chunks of the given sizes (the rest in one last chunk)."""
    out, pos = b"", 0
    for size in [*sizes, len(body)]:
        piece = body[pos : pos + size]
        pos += len(piece)
        if piece:
            out += b"%x\r\n" % len(piece) + piece + b"\r\n"
    return out + b"0\r\n\r\n"


EVENTS = (
    {"type": "SUBSCRIBED", "subscribed": {"framework_id": {"value": "fw-1"}}},
    {"type": "HEARTBEAT"},
    {"type": "OFFERS", "offers": {"offers": [{"id": {"value": "o-1"}, "resources": []}]}},
)
BODY = recordio(*EVENTS)
HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    b"Transfer-Encoding: chunked\r\nMesos-Stream-Id: 1234-abcd\r\n\r\n"
)
RESPONSE = HEAD + chunked(BODY, [7, 1, 30])


def feed(parser: HttpParser, data: bytes, cuts: list[int]) -> bytes:
    """Feeds ``data`` split at ``cuts`` as pymesos does and returns the body it collects."""
    body = b""
    bounds = sorted({0, len(data), *(c for c in cuts if 0 < c < len(data))})
    for start, end in zip(bounds, bounds[1:], strict=False):
        piece = data[start:end]
        assert parser.execute(piece, len(piece)) == len(piece), parser.errstr
        if parser.is_partial_body():
            body += parser.recv_body()
    return body


@pytest.mark.parametrize(
    "cuts",
    [
        pytest.param([], id="one-buffer"),
        pytest.param(list(range(1, len(RESPONSE))), id="byte-by-byte"),
        pytest.param([len(HEAD) - 1], id="split-inside-final-crlf-of-head"),
        pytest.param([len(HEAD) + 1], id="split-inside-first-chunk-size"),
        pytest.param([len(HEAD) + 3, len(HEAD) + 4], id="split-between-cr-and-lf"),
        pytest.param([len(RESPONSE) - 2], id="split-inside-last-chunk"),
    ],
)
def test_chunked_recordio_survives_any_split(cuts: list[int]) -> None:
    parser = HttpParser()
    body = feed(parser, RESPONSE, cuts)
    assert body == BODY
    assert parser.is_headers_complete()
    assert parser.is_chunked()
    assert parser.is_message_complete()
    assert parser.get_status_code() == 200
    assert parser.get_version() == (1, 1)


@settings(max_examples=200, deadline=None)
@given(
    chunk_sizes=st.lists(st.integers(min_value=1, max_value=40), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=len(HEAD) + 400), max_size=12),
)
def test_body_is_identical_for_random_chunking_and_splits(
    chunk_sizes: list[int], cuts: list[int]
) -> None:
    parser = HttpParser()
    assert feed(parser, HEAD + chunked(BODY, chunk_sizes), cuts) == BODY
    assert parser.is_message_complete()


def test_headers_are_case_insensitive_and_keep_their_spelling() -> None:
    parser = HttpParser()
    parser.execute(HEAD, len(HEAD))
    headers = parser.get_headers()
    assert headers["mesos-stream-id"] == "1234-abcd"
    assert headers["MESOS-STREAM-ID"] == "1234-abcd"
    assert "Mesos-Stream-Id" in list(headers)
    assert parser.is_headers_complete()
    assert not parser.is_message_complete()


def test_headers_incomplete_until_blank_line() -> None:
    parser = HttpParser()
    part = HEAD[:-2]
    assert parser.execute(part, len(part)) == len(part)
    assert not parser.is_headers_complete()
    assert parser.get_status_code() is None


def test_repeated_headers_are_joined() -> None:
    parser = HttpParser()
    data = b"HTTP/1.1 200 OK\r\nX-A: 1\r\nx-a: 2\r\nContent-Length: 0\r\n\r\n"
    parser.execute(data, len(data))
    assert parser.get_headers()["X-A"] == "1, 2"
    assert parser.is_message_complete()


@pytest.mark.parametrize(
    ("response", "code", "body", "complete"),
    [
        pytest.param(
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\n\r\nbad request",
            400,
            b"bad request",
            True,
            id="content-length-complete",
        ),
        pytest.param(
            b"HTTP/1.1 500 Oops\r\nContent-Length: 20\r\n\r\nhalf",
            500,
            b"half",
            False,
            id="content-length-partial",
        ),
        pytest.param(
            b"HTTP/1.1 307 Temporary Redirect\r\nLocation: //10.0.0.2:5050\r\n"
            b"Content-Length: 0\r\n\r\n",
            307,
            b"",
            True,
            id="redirect-empty-body",
        ),
        pytest.param(b"HTTP/1.0 204 No Content\r\n\r\n", 204, b"", True, id="no-content"),
        pytest.param(
            b"HTTP/1.0 200 OK\r\n\r\nuntil close", 200, b"until close", False, id="until-close"
        ),
    ],
)
def test_non_chunked_responses(response: bytes, code: int, body: bytes, complete: bool) -> None:
    parser = HttpParser()
    assert parser.execute(response, len(response)) == len(response)
    assert parser.get_status_code() == code
    assert not parser.is_chunked()
    assert parser.recv_body() == body
    assert parser.recv_body() == b""
    assert parser.is_message_complete() is complete


def test_end_of_stream_completes_until_close_body() -> None:
    parser = HttpParser()
    data = b"HTTP/1.1 200 OK\r\n\r\nabc"
    parser.execute(data, len(data))
    assert not parser.is_message_complete()
    parser.execute(b"", 0)
    assert parser.is_message_complete()


@pytest.mark.parametrize(
    ("response", "errno"),
    [
        pytest.param(b"HTPT/1.1 200 OK\r\n\r\n", INVALID_STATUS_LINE, id="bad-protocol"),
        pytest.param(b"HTTP/1.1 2x0 OK\r\n\r\n", INVALID_STATUS_LINE, id="bad-code"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            INVALID_CHUNK_SIZE,
            id="bad-chunk-size",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY",
            INVALID_CHUNK_SIZE,
            id="missing-crlf-after-chunk",
        ),
    ],
)
def test_malformed_input_is_an_error_pymesos_raises_on(response: bytes, errno: int) -> None:
    parser = HttpParser()
    # pymesos treats a short count with errno == INVALID_CHUNK as "need more data", so real
    # damage must report some other code.
    assert parser.execute(response, len(response)) != len(response)
    assert parser.errno == errno != INVALID_CHUNK
    assert parser.get_errno() == errno
    assert parser.errstr


def test_recv_body_into_keeps_the_rest() -> None:
    parser = HttpParser()
    data = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nabcdef"
    parser.execute(data, len(data))
    buffer = bytearray(4)
    assert parser.recv_body_into(buffer) == 4
    assert bytes(buffer) == b"abcd"
    assert parser.recv_body() == b"ef"
