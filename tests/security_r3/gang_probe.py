"""A gang's traffic, as uid 65534 inside a network namespace that plays an agent host.

``serve ADDR``: node 0 listens on ADDR:31000 (the rendezvous port DLC took from the Mesos
range, ``MASTER_PORT``) and on ADDR:0, a port the kernel picks, as gloo's and NCCL's listeners
do (they bind the interface's address and hand their ``getsockname()`` to the peers); prints
that port, then answers every connection with ``ok`` until killed.

``connect ADDR PORT...``: a peer (on another host, or a local rank of node 0) connects to each
port; prints a JSON list of "ok" or errno names.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys

JOB_UID = 65534


def _drop() -> None:
    os.setgid(JOB_UID)
    os.setuid(JOB_UID)


def serve(address: str) -> None:
    _drop()
    listeners = []
    for port in (31000, 0):
        sock = socket.socket()
        sock.bind((address, port))
        sock.listen(8)
        listeners.append(sock)
    print(listeners[1].getsockname()[1], flush=True)
    import selectors

    sel = selectors.DefaultSelector()
    for sock in listeners:
        sel.register(sock, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            conn, _ = key.fileobj.accept()  # type: ignore[union-attr]
            conn.sendall(b"ok")
            conn.close()


def connect(address: str, ports: list[int]) -> None:
    _drop()
    results = []
    for port in ports:
        sock = socket.socket()
        sock.settimeout(5)
        try:
            sock.connect((address, port))
            results.append(sock.recv(2).decode())
        except TimeoutError:
            results.append("timeout")
        except OSError as exc:
            results.append(errno.errorcode.get(exc.errno or 0, str(exc)))
        finally:
            sock.close()
    print(json.dumps(results))


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        connect(sys.argv[2], [int(p) for p in sys.argv[3:]])
