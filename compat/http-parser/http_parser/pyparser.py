"""Incremental HTTP/1.x response parser (pure Python), written for DLC.

The parser buffers whatever it is fed, so ``execute`` always reports the whole input as consumed
unless the stream is malformed. That matters to pymesos: it treats ``errno == INVALID_CHUNK`` as
"need more data" and keeps reading, so this module never reports INVALID_CHUNK for real damage;
malformed input gets a distinct error code that makes pymesos raise instead of looping.
"""

from collections.abc import Iterator, MutableMapping

# Error codes (``HttpParser.errno``). Zero means no error.
OK = 0
INVALID_CHUNK = 1  # kept for pymesos's import; never set (see module docstring)
INVALID_STATUS_LINE = 2
INVALID_HEADER = 3
INVALID_CHUNK_SIZE = 4
INVALID_CONTENT_LENGTH = 5
DATA_AFTER_MESSAGE = 6

_ERROR_TEXT = {
    OK: "",
    INVALID_CHUNK: "incomplete chunk",
    INVALID_STATUS_LINE: "invalid HTTP status line",
    INVALID_HEADER: "invalid HTTP header line",
    INVALID_CHUNK_SIZE: "invalid chunk size line",
    INVALID_CONTENT_LENGTH: "invalid Content-Length header",
    DATA_AFTER_MESSAGE: "data after the end of the message",
}

# Parser states.
_HEAD = "head"
_BODY_LENGTH = "body-length"
_BODY_UNTIL_CLOSE = "body-until-close"
_CHUNK_SIZE = "chunk-size"
_CHUNK_DATA = "chunk-data"
_CHUNK_END = "chunk-end"
_TRAILERS = "trailers"
_DONE = "done"

# Header blocks larger than this are rejected rather than buffered without bound.
_MAX_HEAD_BYTES = 64 * 1024


class HeaderDict(MutableMapping):
    """A dict of HTTP headers whose keys compare case-insensitively.

    Keys keep the spelling of their first occurrence; repeated headers are joined with ", "
    as RFC 9110 allows for list-valued fields.
    """

    def __init__(self) -> None:
        self._items: dict[str, tuple[str, str]] = {}

    def __getitem__(self, key: str) -> str:
        return self._items[key.lower()][1]

    def __setitem__(self, key: str, value: str) -> None:
        self._items[key.lower()] = (key, value)

    def __delitem__(self, key: str) -> None:
        del self._items[key.lower()]

    def __iter__(self) -> Iterator[str]:
        return (original for original, _ in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def add(self, key: str, value: str) -> None:
        """Adds a header, joining it to an existing one of the same name."""
        if key in self:
            self[key] = f"{self[key]}, {value}"
        else:
            self[key] = value

    def __repr__(self) -> str:
        return f"HeaderDict({dict(self.items())!r})"


class HttpParser:
    """Streaming parser for one HTTP/1.x response.

    Args:
        kind: accepted for signature compatibility with the original package; only responses
            (kind 1 or 2) are parsed.
        decompress: accepted for compatibility; bodies are returned as received.
    """

    def __init__(self, kind: int = 2, decompress: bool = False) -> None:
        del kind, decompress
        self._buf = bytearray()
        self._state = _HEAD
        self._errno = OK
        self._version: tuple[int, int] | None = None
        self._status_code: int | None = None
        self._reason = ""
        self._headers = HeaderDict()
        self._chunked = False
        self._remaining = 0
        self._body: list[bytes] = []

    # -- feeding -------------------------------------------------------------------------------

    def execute(self, data: bytes, length: int) -> int:
        """Feeds ``data[:length]``; a ``length`` of 0 signals end of stream.

        Returns:
            ``length`` when everything was accepted, 0 when the stream is malformed (then
            ``errno``/``errstr`` say why).
        """
        if self._errno:
            return 0
        if length == 0:
            if self._state == _BODY_UNTIL_CLOSE:
                self._state = _DONE
            return 0
        if self._state == _DONE:
            return self._fail(DATA_AFTER_MESSAGE)
        self._buf += data[:length]
        while self._errno == OK and self._step():
            pass
        return 0 if self._errno else length

    def _fail(self, code: int) -> int:
        self._errno = code
        return 0

    def _step(self) -> bool:
        """Advances the state machine once; returns False when it needs more input."""
        handler = {
            _HEAD: self._parse_head,
            _BODY_LENGTH: self._parse_body_length,
            _BODY_UNTIL_CLOSE: self._parse_body_until_close,
            _CHUNK_SIZE: self._parse_chunk_size,
            _CHUNK_DATA: self._parse_chunk_data,
            _CHUNK_END: self._parse_chunk_end,
            _TRAILERS: self._parse_trailers,
        }.get(self._state)
        if handler is None:
            if self._buf:
                self._fail(DATA_AFTER_MESSAGE)
            return False
        return handler()

    def _take_line(self) -> bytes | None:
        """Removes and returns one line (without CRLF or LF) from the buffer, if complete."""
        end = self._buf.find(b"\n")
        if end < 0:
            return None
        line = bytes(self._buf[:end])
        del self._buf[: end + 1]
        return line[:-1] if line.endswith(b"\r") else line

    # -- head ----------------------------------------------------------------------------------

    def _parse_head(self) -> bool:
        end = self._buf.find(b"\r\n\r\n")
        sep = 4
        if end < 0:
            end, sep = self._buf.find(b"\n\n"), 2
        if end < 0:
            if len(self._buf) > _MAX_HEAD_BYTES:
                self._fail(INVALID_HEADER)
            return False
        head = bytes(self._buf[:end]).decode("latin-1")
        del self._buf[: end + sep]
        lines = head.replace("\r\n", "\n").split("\n")
        if not self._parse_status_line(lines[0]):
            return False
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                self._fail(INVALID_HEADER)
                return False
            self._headers.add(name, value.strip())
        self._start_body()
        return self._errno == OK

    def _parse_status_line(self, line: str) -> bool:
        parts = line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            self._fail(INVALID_STATUS_LINE)
            return False
        major, dot, minor = parts[0][5:].partition(".")
        code = parts[1]
        if not (dot and major.isdigit() and minor.isdigit() and code.isdigit() and len(code) == 3):
            self._fail(INVALID_STATUS_LINE)
            return False
        self._version = (int(major), int(minor))
        self._status_code = int(code)
        self._reason = parts[2] if len(parts) > 2 else ""
        return True

    def _start_body(self) -> None:
        code = self._status_code or 0
        encoding = self._headers.get("Transfer-Encoding", "")
        if code < 200 or code in (204, 304):
            self._state = _DONE
        elif encoding.lower().split(",")[-1].strip() == "chunked":
            self._chunked = True
            self._state = _CHUNK_SIZE
        elif "Content-Length" in self._headers:
            value = self._headers["Content-Length"].strip()
            if not value.isdigit():
                self._fail(INVALID_CONTENT_LENGTH)
                return
            self._remaining = int(value)
            self._state = _BODY_LENGTH if self._remaining else _DONE
        else:
            self._state = _BODY_UNTIL_CLOSE

    # -- bodies --------------------------------------------------------------------------------

    def _move_to_body(self, limit: int) -> int:
        piece = bytes(self._buf[:limit])
        del self._buf[:limit]
        if piece:
            self._body.append(piece)
        return len(piece)

    def _parse_body_length(self) -> bool:
        if not self._buf:
            return False
        self._remaining -= self._move_to_body(self._remaining)
        if self._remaining == 0:
            self._state = _DONE
        return True

    def _parse_body_until_close(self) -> bool:
        self._move_to_body(len(self._buf))
        return False

    def _parse_chunk_size(self) -> bool:
        line = self._take_line()
        if line is None:
            if len(self._buf) > _MAX_HEAD_BYTES:
                self._fail(INVALID_CHUNK_SIZE)
            return False
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            size = -1
        if size < 0 or not size_text:
            self._fail(INVALID_CHUNK_SIZE)
            return False
        self._remaining = size
        self._state = _CHUNK_DATA if size else _TRAILERS
        return True

    def _parse_chunk_data(self) -> bool:
        if not self._buf:
            return False
        self._remaining -= self._move_to_body(self._remaining)
        if self._remaining == 0:
            self._state = _CHUNK_END
        return True

    def _parse_chunk_end(self) -> bool:
        if len(self._buf) < 2 and self._buf in (b"", b"\r"):
            return False
        line = self._take_line()
        if line != b"":
            self._fail(INVALID_CHUNK_SIZE)
            return False
        self._state = _CHUNK_SIZE
        return True

    def _parse_trailers(self) -> bool:
        line = self._take_line()
        if line is None:
            return False
        if line == b"":
            self._state = _DONE
        return True

    # -- queries (the original package's API) --------------------------------------------------

    @property
    def errno(self) -> int:
        """The error code, 0 when the stream parsed cleanly so far."""
        return self._errno

    @property
    def errstr(self) -> str:
        """A short text for ``errno``."""
        return _ERROR_TEXT[self._errno]

    def get_errno(self) -> int:
        """Returns ``errno`` (C-extension spelling)."""
        return self._errno

    def get_version(self) -> tuple[int, int] | None:
        """Returns the HTTP version as ``(major, minor)`` once the status line is parsed."""
        return self._version

    def get_status_code(self) -> int | None:
        """Returns the response status code once the status line is parsed."""
        return self._status_code

    def get_reason(self) -> str:
        """Returns the status line's reason phrase."""
        return self._reason

    def get_headers(self) -> HeaderDict:
        """Returns the headers, a case-insensitive mapping."""
        return self._headers

    def is_headers_complete(self) -> bool:
        """True once the status line and all headers are parsed."""
        return self._state != _HEAD and self._errno == OK

    def is_chunked(self) -> bool:
        """True when the body uses chunked transfer coding."""
        return self._chunked

    def is_partial_body(self) -> bool:
        """True when body bytes are waiting to be taken with ``recv_body``."""
        return bool(self._body)

    def is_message_complete(self) -> bool:
        """True once the whole response (including any chunked trailer) is parsed."""
        return self._state == _DONE

    def should_keep_alive(self) -> bool:
        """True when the connection may carry another message after this one."""
        connection = self._headers.get("Connection", "").lower()
        if self._version == (1, 0):
            return connection == "keep-alive"
        return connection != "close"

    def recv_body(self) -> bytes:
        """Returns the body bytes received since the last call, and forgets them."""
        body = b"".join(self._body)
        self._body = []
        return body

    def recv_body_into(self, buffer: bytearray | memoryview) -> int:
        """Copies pending body bytes into ``buffer``; returns how many were copied."""
        body = self.recv_body()
        count = min(len(buffer), len(body))
        buffer[:count] = body[:count]
        if count < len(body):
            self._body.insert(0, body[count:])
        return count
