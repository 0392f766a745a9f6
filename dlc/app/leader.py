"""Leader election through ZooKeeper (``dlc scheduler --zk zk://h1:2181,h2:2181/dlc``).

Every instance runs as a standby until it holds the lock ``<path>/leader`` (kazoo's Lock
recipe: the lowest sequential node under it wins, the next one watches it). The node's
data is the instance's identity (``{"api_url": ..., "id": ...}``), so any instance can
tell who leads (:meth:`LeaderElection.leader`) and redirect writes there.

Fencing (docs/ha.md): the moment the ZooKeeper session is SUSPENDED or LOST, the leader
calls ``on_lost`` from the connection listener: the service fences its store (every later
write is refused) and stops its Mesos driver. The new leader bumps the store's leader
epoch before it registers, and every write checks that epoch in its own transaction,
so a slow old leader that has not noticed yet cannot write either.

kazoo is an adapter: only ``dlc.app`` imports this module (``.importlinter`` forbids
kazoo in ``dlc.scheduler``).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dlc.errors import DlcError

log = logging.getLogger(__name__)

#: ZooKeeper session timeout: how long a silent leader keeps its lock (seconds)
SESSION_TIMEOUT_S = 6.0


@dataclass(frozen=True)
class ZkUrl:
    """A parsed ``zk://host:port[,host:port...]/path``."""

    hosts: str
    path: str

    @classmethod
    def parse(cls, url: str, flag: str = "--zk") -> ZkUrl:
        """Parse ``url``.

        Raises:
            DlcError: it is not ``zk://HOST:PORT[,HOST:PORT...]/PATH`` (one line, names the flag).
        """
        example = "e.g. zk://zk1:2181,zk2:2181/dlc"
        if not url.startswith("zk://"):
            raise DlcError(f"{flag} {url}: must start with zk://; {example}")
        hosts, _, path = url[len("zk://") :].partition("/")
        if not hosts or not path.strip("/"):
            raise DlcError(f"{flag} {url}: give hosts and a path; {example}")
        for host in hosts.split(","):
            name, _, port = host.rpartition(":")
            if not name or not port.isdigit() or not 0 < int(port) < 65536:
                raise DlcError(f"{flag} {url}: {host!r} is not HOST:PORT; {example}")
        return cls(hosts, "/" + path.strip("/"))


class LeaderElection:
    """This instance's candidacy: standby until elected, then leader until the session goes.

    Args:
        url: the ``--zk`` URL.
        api_url: where this instance's API answers (published while it leads).
        on_elected: called (in the election thread) once this instance leads.
        on_lost: called at once (from kazoo's connection listener: must not block) when
            the session is suspended or lost while leading.
        client_factory: makes the kazoo client (tests pass one with a short timeout).
    """

    def __init__(
        self,
        url: str,
        api_url: str,
        on_elected: Callable[[], None],
        on_lost: Callable[[str], None],
        client_factory=None,
        session_timeout_s: float = SESSION_TIMEOUT_S,
    ):
        self.zk = ZkUrl.parse(url)
        self.identity = {
            "id": f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}",
            "api_url": api_url,
        }
        self._on_elected = on_elected
        self._on_lost = on_lost
        self._timeout = session_timeout_s
        self._factory = client_factory or self._kazoo_client
        self.client: Any = None  # a kazoo KazooClient (kazoo has no types)
        self.leading = threading.Event()
        self.lost = threading.Event()
        self._lock: Any = None  # the client's kazoo Lock
        self._thread: threading.Thread | None = None

    def _kazoo_client(self):
        from kazoo.client import KazooClient

        return KazooClient(hosts=self.zk.hosts, timeout=self._timeout)

    @property
    def instance_id(self) -> str:
        """This instance's id (host name and a random suffix)."""
        return self.identity["id"]

    def start(self) -> None:
        """Connect and enter the election in a background thread (returns at once).

        Raises:
            DlcError: ZooKeeper cannot be reached within the session timeout.
        """
        from kazoo.handlers.threading import KazooTimeoutError

        self.client = self._factory()
        self.client.add_listener(self._state_changed)
        try:
            self.client.start(timeout=max(self._timeout, 5.0))
        except KazooTimeoutError:
            raise DlcError(
                f"--zk zk://{self.zk.hosts}{self.zk.path}: ZooKeeper cannot be reached; "
                "check that it runs there"
            ) from None
        self.client.ensure_path(self.zk.path)
        data = json.dumps(self.identity)
        self._lock = self.client.Lock(f"{self.zk.path}/leader", identifier=data)
        self._thread = threading.Thread(target=self._campaign, name="dlc-election", daemon=True)
        self._thread.start()

    def _campaign(self) -> None:
        try:
            self._lock.acquire()  # blocks while another instance leads
        except Exception as exc:  # noqa: BLE001 - a lost session while waiting: stand by
            if not self.lost.is_set():
                log.warning("leaving the election: %s", exc)
            return
        if self.lost.is_set():
            return
        log.info("elected leader (%s)", self.instance_id)
        self.leading.set()
        self._on_elected()

    def _state_changed(self, state) -> None:
        # Runs in kazoo's thread: only flags and a short callback, never ZooKeeper calls.
        from kazoo.protocol.states import KazooState

        if state in (KazooState.SUSPENDED, KazooState.LOST) and self.leading.is_set():
            self.leading.clear()
            self.lost.set()
            why = "suspended" if state == KazooState.SUSPENDED else "lost"
            log.error("ZooKeeper session %s: no longer the leader, stopping at once", why)
            self._on_lost(why)

    def leader(self) -> dict | None:
        """The identity of the instance that leads now (``None``: nobody, or no answer)."""
        if self._lock is None or self.client is None or not self.client.connected:
            return None
        try:
            contenders = self._lock.contenders()
        except Exception:  # noqa: BLE001 - ZooKeeper unreachable: say nobody is known
            return None
        if not contenders:
            return None
        try:
            return json.loads(contenders[0])
        except ValueError:
            return None

    def stop(self) -> None:
        """Leave the election and close the session (the lock node goes at once)."""
        self.leading.clear()
        self.lost.set()
        if self.client is None:
            return
        try:
            if self._lock is not None:
                self._lock.cancel()
                self._lock.release()
        except Exception:  # noqa: BLE001 - the session may already be gone
            pass
        try:
            self.client.stop()
            self.client.close()
        except Exception:  # noqa: BLE001
            pass
