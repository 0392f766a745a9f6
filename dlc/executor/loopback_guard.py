"""Keep host-network jobs off the agent's loopback-only services (nftables, owner match).

A multi-node gang (CPU-only ones included) runs with the host's network: its peers connect to
its rendezvous port and to the ports NCCL/gloo open themselves, on the agent's address, which
no published port or Docker bridge can carry (red-team finding 59, docs/security.md). Sharing
the host's network also shares its loopback, where agents serve things that trust every local
caller: DCGM's ``nv-hostengine`` (127.0.0.1:5555, no authentication), NVIDIA Fabric Manager's
command port, ``dlc local``'s emulator.

Containers run as uid 65534 or the submitting user's uid, never root unless the operator
allows it, so the guard tells a job's packets apart by their socket's uid: in the output hook,
a NEW connection or datagram from a uid in ``uids`` to 127.0.0.0/8 or ::1 is refused (TCP gets
a reset, so ``connect()`` fails at once with ``ECONNREFUSED``; other datagrams are dropped, so
``sendto()`` fails with ``EPERM``), except to ``open_ports``:

* 53, the host's stub resolver (a host-network container uses the host's ``resolv.conf``,
  which names 127.0.0.53 under systemd-resolved);
* the agent's Mesos port range, where DLC hands a task its ports (``DLC_PORTS``): a job's own
  processes that talk over loopback do so on those.

Replies on connections others opened to a job (the executor, the agent) pass
(``ct state established,related``), and packets with no socket (the kernel's resets) are
never matched. The rules live in one table of their own, replaced atomically in one
``nft -f`` transaction, so reinstalling is idempotent and leaves every other table alone.
"""

from __future__ import annotations

import enum
import logging
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dlc.errors import DlcError

log = logging.getLogger(__name__)

#: the nftables table the guard owns (family inet: IPv4 and IPv6 in one)
TABLE = "dlc_loopback_guard"
#: the uids DLC's containers run as by default: users' uids and 65534 (never root or system
#: accounts, whose daemons such as an exporter of nv-hostengine's metrics keep loopback)
DEFAULT_UIDS = "1000-4294967294"
#: Mesos's default agent port range (``ports:[31000-32000]``)
DEFAULT_OPEN_PORTS = ("53", "31000-32000")

_RANGE = re.compile(r"(\d{1,10})(?:-(\d{1,10}))?")

Runner = Callable[[Sequence[str], str], tuple[int, str]]


class GuardMode(enum.Enum):
    """What the executor does before it starts a host-network container.

    ``enforce``: install the guard (idempotent) and refuse the task when that fails;
    ``warn``: check that the guard is there and log a warning when it is not;
    ``off``: nothing (``dlc local``: one user, whose own jobs share the emulator's loopback).
    """

    ENFORCE = "enforce"
    WARN = "warn"
    OFF = "off"


@dataclass(frozen=True)
class GuardSettings:
    """Which uids the guard holds and which loopback ports stay open to them.

    Attributes:
        uids: an nftables uid or range (``65534``, ``1000-4294967294``).
        open_ports: ports or ranges (``53``, ``31000-32000``) that stay reachable on loopback.
    """

    uids: str = DEFAULT_UIDS
    open_ports: tuple[str, ...] = DEFAULT_OPEN_PORTS

    def __post_init__(self) -> None:
        # they go into an nft script: numbers only
        for item in (self.uids, *self.open_ports):
            match = _RANGE.fullmatch(item)
            if match is None or (match[2] and int(match[2]) < int(match[1])):
                raise DlcError(f"loopback guard: {item!r} is not a number or LOW-HIGH range")

    def holds(self, uid: int) -> bool:
        """Whether the rules select ``uid``."""
        low, _, high = self.uids.partition("-")
        return int(low) <= uid <= int(high or low)


def port_list(text: str) -> tuple[str, ...]:
    """A comma-separated ports option (``53,31000-32000``) as :attr:`GuardSettings.open_ports`
    (blank items dropped; the settings check each)."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def ruleset(settings: GuardSettings = GuardSettings()) -> str:
    """The ``nft -f`` script that (re)installs the guard's table."""
    uid = f"meta skuid {settings.uids}"
    ports = f"th dport {{ {', '.join(settings.open_ports)} }}"
    lines = [
        f"table inet {TABLE}",  # so that the delete below succeeds on a first install
        f"delete table inet {TABLE}",
        f"table inet {TABLE} {{",
        "    chain output {",
        "        type filter hook output priority filter; policy accept;",
        "        ct state established,related accept",
    ]
    # open ports first, then a reset for TCP (connect() fails at once), then a drop for the rest
    verdicts = (f"meta l4proto {{ tcp, udp }} {ports} accept",
                "meta l4proto tcp counter reject with tcp reset", "counter drop")  # fmt: skip
    for verdict in verdicts:
        for daddr in ("ip daddr 127.0.0.0/8", "ip6 daddr ::1"):
            lines.append(f"        {uid} {daddr} {verdict}")
    lines += ["    }", "}", ""]
    return "\n".join(lines)


def _run(argv: Sequence[str], stdin: str) -> tuple[int, str]:
    if shutil.which(argv[0]) is None:
        return 127, f"{argv[0]}: command not found"
    done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, timeout=20,
                          check=False)  # fmt: skip
    return done.returncode, (done.stdout + done.stderr).strip()


def installed(text: str) -> bool:
    """Whether ``nft list`` output holds the guard's drop of loopback traffic by uid."""
    return (
        f"table inet {TABLE}" in text
        and "skuid" in text
        and "127.0.0.0/8" in text
        and "drop" in text
    )


class LoopbackGuard:
    """Installs or checks the guard for one executor (thread-safe; tasks start on threads).

    Args:
        mode: what :meth:`before_host_network` does.
        settings: the uids and open ports.
        run: runs ``nft`` (argv, stdin) -> (exit status, output); tests put ``nsenter`` or a
            fake in front.
        nft: the command line prefix that runs nft.
    """

    def __init__(self, mode: GuardMode = GuardMode.WARN, settings: GuardSettings = GuardSettings(),
                 run: Runner = _run, nft: Sequence[str] = ("nft",)):  # fmt: skip
        self.mode = mode
        self.settings = settings
        self._run = run
        self._nft = tuple(nft)
        self._lock = threading.Lock()
        self._warned: set[object] = set()

    def install(self) -> None:
        """(Re)install the table now.

        Raises:
            DlcError: nft is missing or refused the rules (not root, no nf_tables).
        """
        code, out = self._run([*self._nft, "-f", "-"], ruleset(self.settings))
        if code != 0:
            raise DlcError(
                f"cannot install the loopback guard (nft table inet {TABLE}): {out or code}; "
                "run the executor as root on a host with nftables (docs/install.md, "
                "'Keep host-network jobs off loopback')"
            )

    def present(self) -> bool | None:
        """Whether the table is installed (None: nft could not be asked)."""
        code, out = self._run([*self._nft, "list", "table", "inet", TABLE], "")
        if code == 0:
            return installed(out)
        return False if "No such file" in out else None

    def before_host_network(self, task_id: str, uid: int | None = None) -> None:
        """Called before a host-network container of ``task_id`` (running as ``uid``) is
        created.

        Raises:
            DlcError: in ``enforce`` mode, when the guard cannot be installed (the task fails
                rather than run next to unguarded loopback services).
        """
        if self.mode is GuardMode.OFF:
            return
        with self._lock:
            if uid is not None and not self.settings.holds(uid):
                # root (--allow-root) or a uid below the range: the host's own daemons look
                # the same to a uid rule, so the operator's choice stands, said once
                self._warn_once(("uid", uid), "task %s runs on the host network as uid %d, which "
                                "the loopback guard (uids %s) does not hold", task_id, uid,
                                self.settings.uids)  # fmt: skip
            if self.mode is GuardMode.ENFORCE:
                # every time: a firewall reload (`nft flush ruleset`) may have removed it
                self.install()
                return
            state = self.present()
            if not state:
                why = "is not installed" if state is False else "cannot be checked (not root?)"
                self._warn_once("missing", "task %s runs on the host network and the loopback "
                                "guard (nft table inet %s) %s: its processes reach every service "
                                "on 127.0.0.1 and ::1 (DLC_LOOPBACK_GUARD=enforce installs it; "
                                "docs/install.md)", task_id, TABLE, why)  # fmt: skip

    def _warn_once(self, key: object, message: str, *args: object) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)
