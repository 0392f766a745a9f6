"""Run inside a network namespace (as root): who reaches which loopback listener.

Stands in for an agent's host network: root's listeners on port 5555 of 127.0.0.1, 127.0.1.1
and ::1 play DCGM's ``nv-hostengine`` (they send a banner), one on 127.0.0.53:53/udp the stub
resolver; a job's own listener (uid 65534) sits on a port of the Mesos range and one outside
it. Each try runs in a child that drops to the uid given, as a job's process in a host-network
container would be. Prints one JSON object: try name -> "ok" or the errno's name.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket

BANNER = b"nv-hostengine stand-in\n"


def _listen(family: int, address: tuple, uid: int = 0) -> socket.socket:
    if uid:
        os.seteuid(uid)  # the socket is the uid's, as a job's listener would be
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(8)
        return sock
    finally:
        if uid:
            os.seteuid(0)


def _serve(listeners: list[socket.socket], dns: socket.socket) -> int:
    """A child that answers every listener with the banner and echoes DNS datagrams."""
    pid = os.fork()
    if pid:
        return pid
    import selectors

    sel = selectors.DefaultSelector()
    for sock in (*listeners, dns):
        sel.register(sock, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            sock = key.fileobj
            if sock is dns:
                data, peer = dns.recvfrom(512)
                dns.sendto(data, peer)
                continue
            conn, _ = sock.accept()
            conn.sendall(BANNER)
            conn.close()


def _try(uid: int, family: int, address: tuple, udp: bool = False) -> str:
    """Connect (or send a datagram and read the answer) as ``uid``: "ok" or the errno name."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        result = "ok"
        try:
            os.setgid(uid)
            os.setuid(uid)
            sock = socket.socket(family, socket.SOCK_DGRAM if udp else socket.SOCK_STREAM)
            sock.settimeout(5)
            if udp:
                sock.sendto(b"query", address)
                sock.recvfrom(512)
            else:
                sock.connect(address)
                if sock.recv(64) != BANNER:
                    result = "no banner"
        except TimeoutError:
            result = "timeout"
        except OSError as exc:
            result = errno.errorcode.get(exc.errno or 0, str(exc))
        os.write(write, result.encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as done:
        return done.read().decode()


def main() -> None:
    os.system("ip link set lo up")
    v4, v6 = socket.AF_INET, socket.AF_INET6
    listeners = [
        _listen(v4, ("127.0.0.1", 5555)),
        _listen(v6, ("::1", 5555)),
        _listen(v4, ("127.0.1.1", 5555)),  # loopback's other addresses (Debian's hostname)
        _listen(v4, ("127.0.0.1", 31005), uid=65534),  # a job's own, on its DLC_PORTS port
        _listen(v4, ("127.0.0.1", 6000), uid=65534),  # a job's own, outside the range
    ]
    dns = socket.socket(v4, socket.SOCK_DGRAM)
    dns.bind(("127.0.0.53", 53))
    server = _serve(listeners, dns)
    results = {
        "root 127.0.0.1:5555": _try(0, v4, ("127.0.0.1", 5555)),
        "system uid 999 127.0.0.1:5555": _try(999, v4, ("127.0.0.1", 5555)),
        "job 65534 127.0.0.1:5555": _try(65534, v4, ("127.0.0.1", 5555)),
        "job 1000 127.0.0.1:5555": _try(1000, v4, ("127.0.0.1", 5555)),
        "job 65534 127.0.1.1:5555": _try(65534, v4, ("127.0.1.1", 5555)),
        "job 65534 [::1]:5555": _try(65534, v6, ("::1", 5555)),
        "job 65534 ::ffff:127.0.0.1:5555": _try(65534, v6, ("::ffff:127.0.0.1", 5555)),
        "job 65534 udp 127.0.0.1:5555": _try(65534, v4, ("127.0.0.1", 5555), udp=True),
        "job 65534 dns 127.0.0.53:53": _try(65534, v4, ("127.0.0.53", 53), udp=True),
        "job 65534 own 127.0.0.1:31005": _try(65534, v4, ("127.0.0.1", 31005)),
        "job 65534 own 127.0.0.1:6000": _try(65534, v4, ("127.0.0.1", 6000)),
        "root to job's 127.0.0.1:6000": _try(0, v4, ("127.0.0.1", 6000)),
    }
    os.kill(server, signal.SIGKILL)
    os.waitpid(server, 0)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
