"""Event streams of the Mesos emulator: queues drained by HTTP handlers as chunked RecordIO.

A Mesos v1 subscription is one long HTTP response: ``Transfer-Encoding: chunked`` whose body is
a sequence of RecordIO records (``<decimal length>\\n<JSON>``). The master side puts events on an
:class:`EventStream` from any thread; the handler that owns the connection writes them out.
"""

from __future__ import annotations

import json
import queue
import threading
import uuid
from typing import Any


def recordio(event: dict[str, Any]) -> bytes:
    """Frames one event as a RecordIO record."""
    data = json.dumps(event, separators=(",", ":")).encode()
    return str(len(data)).encode() + b"\n" + data


def http_chunk(data: bytes) -> bytes:
    """Wraps ``data`` as one HTTP/1.1 chunk (an empty ``data`` is the terminating chunk)."""
    return b"%x\r\n" % len(data) + data + b"\r\n"


class EventStream:
    """A one-way stream of events to a subscribed scheduler or executor.

    Attributes:
        stream_id: the ``Mesos-Stream-Id`` of this subscription.
    """

    def __init__(self) -> None:
        self.stream_id = str(uuid.uuid4())
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._closed = threading.Event()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called or the peer went away."""
        return self._closed.is_set()

    def send(self, event: dict[str, Any]) -> None:
        """Queues an event; silently dropped once the stream is closed."""
        if not self._closed.is_set():
            self._queue.put(event)

    def close(self) -> None:
        """Ends the stream after the events already queued."""
        if not self._closed.is_set():
            self._closed.set()
            self._queue.put(None)

    def next_event(self, timeout: float) -> dict[str, Any] | None:
        """Returns the next event, ``{}`` when ``timeout`` passed, None at the end."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return {}
