"""Hosts as Linux network namespaces on a private bridge (198.51.100.0/24, a documentation range).

The bridge lives in a namespace of its own, so nothing of this network exists in the root
namespace: a host reaches another only at the address the test gave it, and each host has its
own 127.0.0.1 (a path that works only over loopback fails here as between real machines).
Names carry the test's pid so that parallel runs do not meet.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

NET = "198.51.100"


@dataclass
class Host:
    """One namespace: its name and its address on the bridge."""

    ns: str
    ip: str


@dataclass
class Network:
    """The bridge namespace and the hosts on it; :meth:`close` removes everything."""

    prefix: str = field(default_factory=lambda: f"dlc{os.getpid() % 100000}")
    hosts: dict[str, Host] = field(default_factory=dict)

    @property
    def bridge_ns(self) -> str:
        return f"{self.prefix}-br"

    def open(self) -> Network:
        _ip("netns", "add", self.bridge_ns)
        _ip("-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.bridge_ns, "link", "set", "br0", "up")
        return self

    def add(self, role: str, last_octet: int) -> Host:
        """A host namespace with ``eth0`` at ``198.51.100.<last_octet>/24`` and ``lo`` up."""
        host = Host(f"{self.prefix}-{role}", f"{NET}.{last_octet}")
        _ip("netns", "add", host.ns)
        self.hosts[role] = host
        peer = f"v{role}"
        _ip("-n", host.ns, "link", "add", "eth0", "type", "veth", "peer", "name", peer,
            "netns", self.bridge_ns)  # fmt: skip
        _ip("-n", self.bridge_ns, "link", "set", peer, "master", "br0", "up")
        _ip("-n", host.ns, "addr", "add", f"{host.ip}/24", "dev", "eth0")
        _ip("-n", host.ns, "link", "set", "eth0", "up")
        _ip("-n", host.ns, "link", "set", "lo", "up")
        return host

    def close(self) -> None:
        """Delete every namespace (their veths go with them)."""
        for name in [h.ns for h in self.hosts.values()] + [self.bridge_ns]:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


@contextlib.contextmanager
def bare_namespace(prefix: str) -> Iterator[str]:
    """One fresh network namespace of its own (only its loopback, an empty firewall), named
    ``prefix-<random>``; deleted when the block ends."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
