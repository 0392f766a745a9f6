"""API load benchmark: N concurrent submits, then N concurrent kills, against a real API server.

The server is DLC's own (``ApiServer``: FastAPI on uvicorn) over a scheduler core on a
temporary SQLite job store, in a child process (so the load generator does not share its
GIL); there is no Mesos master, so the jobs stay queued and a kill ends them at once. The
load comes from one asyncio client, every request on its own fresh connection (the worst
case for the listen backlog), all N of a phase started together, as N users would send them:
one token per simulated user, ``--per-user`` requests each (default 1). The server lets one
user have 64 requests in flight and answers more with 429; those are counted apart from
errors (``throttled``), since they are its per-user guard working, not a failure under load.

    python bench/api_load.py                 # 500 users, table + bench/results/api_load.json
    python bench/api_load.py --concurrency 1000 --json out.json

Targets: 0 errors (a non-2xx answer other than 429, a reset or a timeout) and, with at most
64 requests per user in flight, 0 answers 429. A missed target is named on stderr and the
exit status is 1 (``--no-fail``: 0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _user_cap() -> int:
    """The server's per-user in-flight cap: more at once from one user get 429."""
    from dlc.api.guard import Limits

    return Limits().max_in_flight_per_user


def serve(db: str, users: int) -> None:
    """Child process: run the API and print ``URL TOKEN...`` (one per user) once it listens."""
    from dlc.api.logs import LogReader
    from dlc.api.server import ApiServer, ServerLimits
    from dlc.mesos.codec import MesosCodec
    from dlc.scheduler.core.facade import SchedulerCore
    from dlc.store.sqlite import JobStore

    store = JobStore(db)
    core = SchedulerCore(store, resolver=lambda spec: (spec.image, None), codec=MesosCodec())
    # every request comes from 127.0.0.1: the per-address connection cap would refuse most
    limits = ServerLimits(max_connections_per_ip=0)
    server = ApiServer(core, LogReader(lambda: None), lambda actions: None, limits=limits)
    url = server.start()
    tokens = [store.add_token(f"bench-{i}") for i in range(users)]
    print(url, *tokens, flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    server.stop()


async def request(host: str, port: int, method: str, path: str, token: str, body: bytes):
    """``(seconds, status)`` of one request on a fresh connection (status 0: I/O error)."""
    started = time.perf_counter()
    try:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(
            f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 60)
        writer.close()
        status = int(raw.split(b" ", 2)[1])
        payload = json.loads(raw.partition(b"\r\n\r\n")[2] or b"null")
    except (TimeoutError, OSError, ValueError, IndexError):
        return time.perf_counter() - started, 0, None
    return time.perf_counter() - started, status, payload


async def phase(host, port, calls: list[tuple[str, str, str, bytes]]) -> dict:
    """Run all ``calls`` (method, path, token, body) at once; latency percentiles, errors
    (with the statuses seen), throughput."""
    started = time.perf_counter()
    results = await asyncio.gather(*(request(host, port, m, p, t, b) for m, p, t, b in calls))
    wall = time.perf_counter() - started
    ms = sorted(r[0] * 1000 for r in results)
    throttled = sum(1 for r in results if r[1] == 429)
    errors = sum(1 for r in results if not 200 <= r[1] < 300 and r[1] != 429)
    return {
        "requests": len(calls),
        "errors": errors,
        "throttled": throttled,
        "p50_ms": round(statistics.median(ms), 1),
        "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 1),
        "max_ms": round(ms[-1], 1),
        "throughput_rps": round(len(calls) / wall, 1),
        "error_statuses": sorted({r[1] for r in results if not 200 <= r[1] < 300 and r[1] != 429}),
        "ids": [
            (r[2]["id"], token)
            for r, (_, _, token, _) in zip(results, calls, strict=True)
            if isinstance(r[2], dict) and "id" in r[2]
        ],
    }


async def run(url: str, tokens: list[str], n: int) -> dict:
    """The three phases; request ``i`` comes from user ``i % len(tokens)``."""
    host, port = url.split("//")[1].split(":")
    port = int(port)
    submit = json.dumps({"image": "bench", "command": ["true"]}).encode()
    user = [tokens[i % len(tokens)] for i in range(n)]
    submits = await phase(host, port, [("POST", "/v1/jobs", user[i], submit) for i in range(n)])
    # each job is killed by the user who submitted it
    kills = [("POST", f"/v1/jobs/{i}/kill", token, b"{}") for i, token in submits["ids"]]
    kill = await phase(host, port, kills)
    lists = await phase(host, port, [("GET", "/v1/jobs?limit=100", user[i], b"") for i in range(n)])
    return {"submit": submits, "kill": kill, "list (100 per page)": lists}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=500, help="requests per phase")
    parser.add_argument(
        "--per-user",
        type=int,
        default=1,
        help="requests one user sends at once (default 1: N users)",
    )
    parser.add_argument("--no-fail", action="store_true", help="exit 0 on a missed target")
    parser.add_argument("--json", default=str(RESULTS / "api_load.json"), help="results file")
    parser.add_argument("--serve", metavar="DB", help=argparse.SUPPRESS)
    parser.add_argument("--users", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.users)
        return 0
    users = max(1, -(-args.concurrency // max(1, args.per_user)))
    with tempfile.TemporaryDirectory() as tmp:
        child = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(Path(tmp) / "jobs.db"),
             "--users", str(users)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            url, *tokens = child.stdout.readline().split()
            phases = asyncio.run(run(url, tokens, args.concurrency))
        finally:
            child.stdin.close()
            child.wait(timeout=30)
    print(f"API load: {args.concurrency} concurrent requests per phase, one connection each, "
          f"{users} users")  # fmt: skip
    print(f"{'phase':<20} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'req/s':>8} {'errors':>7}"
          f" {'429':>5}")  # fmt: skip
    for name, p in phases.items():
        p.pop("ids")
        print(f"{name:<20} {p['p50_ms']:>8} {p['p99_ms']:>8} {p['max_ms']:>8} "
              f"{p['throughput_rps']:>8} {p['errors']:>7} {p['throttled']:>5}")  # fmt: skip
    missed = _missed(phases, args.per_user)
    report = {
        "benchmark": "api_load",
        "concurrency": args.concurrency,
        "users": users,
        "machine": {"python": platform.python_version(), "cpus": _cpus()},
        "per_user": args.per_user,
        "phases": phases,
        "missed": missed,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.json}")
    for line in missed:
        print(f"target missed: {line}", file=sys.stderr)
    return 1 if missed and not args.no_fail else 0


def _missed(phases: dict, per_user: int) -> list[str]:
    """The targets each phase missed: any error; any 429 while no user exceeds the cap."""
    missed, cap = [], _user_cap()
    for name, p in phases.items():
        if p["errors"]:
            missed.append(f"{name}: {p['errors']} errors (statuses {p['error_statuses']}), want 0")
        if p["throttled"] and per_user <= cap:
            missed.append(f"{name}: {p['throttled']} answers 429 with {per_user} request(s) per "
                          f"user in flight (cap {cap}), want 0")  # fmt: skip
    return missed


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    sys.exit(main())
