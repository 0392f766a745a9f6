"""Code in, results out: snapshot uploads, the executor's snapshot fetch, ``dlc cp`` reads.

* ``POST /v1/workdirs`` (user token): a chunk of a ``--workdir`` snapshot, base64 in JSON
  (the guard caps every request body at 1 MiB, so the CLI sends several); the first chunk
  makes a blob owned by the caller, the others name it.
* ``GET /agent/v1/jobs/{id}/workdir`` (no user token: the job's secret in
  ``X-DLC-Job-Secret``, which only the job's launch spec carries): the snapshot bytes, served
  only when the blob belongs to the job's own user.
* ``GET /v1/jobs/{id}/outputs?path=P`` (user token; only the job's user or an admin): a chunk of
  ``<sandbox>/outputs/P``, read like ``dlc logs`` reads ``stdout`` (the sandbox on this host,
  else the agent's ``/files/read``).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import os
import posixpath
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from fastapi import FastAPI, Query, Request, WebSocket
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, StrictStr
from starlette.exceptions import HTTPException
from starlette.websockets import WebSocketDisconnect

from dlc.api.guard import request_token
from dlc.api.shell_relay import SessionGate, first_message, relay
from dlc.errors import DlcError
from dlc.executor import fd_paths
from dlc.scheduler.tasks.launch import env_secret, job_secret
from dlc.store.blobs import BlobStore

SECRET_HEADER = "x-dlc-job-secret"
MAX_CHUNK = 512 << 10
#: the longest ``dlc exec`` waits for its command (less where ``--session-max-time`` is)
EXEC_TIMEOUT_S = 300.0


@dataclass
class EnvContext:
    """What these routes need beyond the API's core: the blob files, the job key, and the
    gate that caps shell/exec sessions."""

    blobs: BlobStore
    job_key: str
    sessions: SessionGate = field(default_factory=SessionGate)


class WorkdirChunk(BaseModel):
    """One chunk of a snapshot upload."""

    model_config = ConfigDict(extra="forbid")
    data: StrictStr
    blob: StrictStr | None = None


def _context(api: Any) -> EnvContext:
    context = getattr(api, "env", None)
    if context is None:
        raise HTTPException(503, "this scheduler keeps no snapshots (no blob directory)")
    return context


def _auth(request: Request) -> tuple[str, bool]:
    user, admin, _ = request.scope["dlc.auth"]
    return user, admin


def add_env_routes(app: FastAPI, api: Any) -> None:
    """Register the routes above on ``app``."""
    core = api.core
    add_open_route(app, api)
    add_exec_route(app, api)
    add_shell_route(app, api)
    add_since_route(app, api)

    @app.post("/v1/workdirs")
    def upload(chunk: WorkdirChunk, request: Request) -> dict:
        """Append a base64 chunk to the caller's snapshot (a new one without ``blob``)."""
        user, _ = _auth(request)
        blobs = _context(api).blobs
        try:
            data = base64.b64decode(chunk.data, validate=True)
        except (binascii.Error, ValueError):
            raise HTTPException(400, "data: not base64; send the snapshot base64-encoded") from None
        blob = chunk.blob
        if blob is None:  # a new snapshot: reclaim the user's unused old ones first
            live = [*core.queued_jobs(), *core.active_jobs()]
            in_use = {j.spec.workdir for j in live if j.user == user and j.spec.workdir}
            blob = blobs.create_within(user, in_use, time.time())  # counted and made at once
        size = blobs.append(blob, user, data)
        return {"blob": blob, "size": size}

    @app.get("/agent/v1/jobs/{job_id}/workdir")
    def fetch(job_id: str, request: Request) -> Response:
        """The job's snapshot, for its executor (authenticated by the job's secret)."""
        context = _context(api)
        given = request.headers.get(SECRET_HEADER, "")
        try:
            job = core.get_job(job_id)
        except DlcError:
            job = None
        want = job_secret(context.job_key, job_id) if context.job_key else ""
        if job is None or not want or not hmac.compare_digest(given, want):
            raise HTTPException(403, "wrong or missing job secret")
        blob = job.spec.workdir
        if not blob or context.blobs.owner(blob) != job.user:
            raise HTTPException(403, f"job {job_id} has no snapshot of its own user")
        return Response(context.blobs.read(blob), media_type="application/gzip")

    @app.get("/v1/jobs/{job_id}/outputs")
    def outputs(
        job_id: str,
        request: Request,
        path: str = Query(..., min_length=1, max_length=1024),
        offset: int = Query(0, ge=0, le=2**62),  # a huge one was a 500 (pread overflow)
        length: int = Query(MAX_CHUNK, ge=1, le=MAX_CHUNK),
        rank: int = Query(0, ge=0),
    ) -> dict:
        """A base64 chunk of ``/outputs/<path>`` of the job's task ``rank``."""
        job = core.visible_job(job_id, *_auth(request))
        rel = safe_output_path(path)
        task = next((t for t in job.tasks if t.rank == rank), None)
        if task is None:
            raise HTTPException(409, f"job {job_id} has not started; its outputs are not there yet")
        sandbox = _local_sandbox(api.logs, task)
        if sandbox is not None:
            data, size = read_local_output(sandbox, rel, offset, length)
        else:
            chunk = api.logs._read_remote(task, f"outputs/{rel}", offset, length)
            data, size = chunk["raw"], None  # the exact bytes, not text
        return {
            "data": base64.b64encode(data).decode(),
            "offset": offset + len(data),
            # an agent answers at most 64 KiB a read: only an empty read is its end
            "eof": not data if size is None else offset + len(data) >= size,
            "state": job.state.value,
        }


def add_open_route(app: FastAPI, api: Any) -> None:
    """``GET /v1/jobs/{id}/env``: the URL of an interactive job's server (owner or admin)."""
    core = api.core

    @app.get("/v1/jobs/{job_id}/env")
    def open_env(job_id: str, request: Request) -> dict:
        """``{"url", "state"}``; ``url`` is empty until the server's port is known."""
        job = core.visible_job(job_id, *_auth(request))
        if not job.spec.interactive:
            raise HTTPException(409, f"job {job_id} is not interactive (dlc submit --interactive)")
        task = next((t for t in job.tasks if t.rank == 0), None)
        url = ""
        if task is not None and job.state.value == "running":
            sandbox = _local_sandbox(api.logs, task)
            if sandbox is not None and (sandbox / "dlc-env.json").is_file():
                port = int(json.loads((sandbox / "dlc-env.json").read_text())["port"])
            else:
                body = api.logs._read_remote(task, "dlc-env.json", 0, 4096)["data"]
                port = int(json.loads(body)["port"]) if body else 0
            if port:
                token = env_secret(_context(api).job_key, job_id)
                url = f"http://{task.hostname}:{port}/lab?token={token}"
        return {"url": url, "state": job.state.value}


class ExecIn(BaseModel):
    """``dlc exec``: the command to run in the job's container."""

    model_config = ConfigDict(extra="forbid")
    argv: list[StrictStr]


def _sandbox_json(api: Any, task: Any, name: str) -> dict:
    """A small JSON file the executor wrote in the task's sandbox (``{}``: not there)."""
    sandbox = _local_sandbox(api.logs, task)
    if sandbox is not None:
        path = sandbox / name
        return json.loads(path.read_text()) if path.is_file() else {}
    try:
        body = api.logs._read_remote(task, name, 0, 4096)["data"]
    except DlcError:
        return {}
    return json.loads(body) if body else {}


def add_exec_route(app: FastAPI, api: Any) -> None:
    """``POST /v1/jobs/{id}/exec``: run a command in the job's running container."""
    core = api.core

    @app.post("/v1/jobs/{job_id}/exec")
    def exec_in_job(job_id: str, body: ExecIn, request: Request) -> dict:
        """``{"exit_code", "output"}`` (output base64) of ``argv`` run in the container."""
        job = core.visible_job(job_id, *_auth(request))
        if not body.argv:
            raise HTTPException(400, "argv: give a command, e.g. dlc exec JOB -- ls")
        task = next((t for t in job.tasks if t.rank == 0), None)
        port = _sandbox_json(api, task, "dlc-exec.json").get("port") if task else None
        if task is None or job.state.value != "running" or not port:
            raise HTTPException(409, f"job {job_id} is {job.state.value}, not running a container")
        context = _context(api)
        secret = job_secret(context.job_key, job_id)
        url = f"http://{task.hostname}:{int(port)}/exec"
        with context.sessions.session(_auth(request)[0]):  # the caller, admins included
            timeout = min(EXEC_TIMEOUT_S, context.sessions.limits.max_s)
            return _post_json(url, {"argv": body.argv}, secret, timeout)


def add_shell_route(app: FastAPI, api: Any) -> None:
    """``WS /v1/jobs/{id}/shell``: an interactive terminal in the job's running container.

    The guard lets websockets through unauthenticated, so this route authenticates itself:
    a bearer token in the handshake's headers (not the dashboard's cookie: a page of another
    site could open a websocket with it), and only the job's user or an admin. Client to
    server: binary messages are keystrokes, text ``{"rows", "cols"}`` a resize. Server to
    client: binary terminal output, then text ``{"exit_code"}`` or ``{"error"}`` and close.
    """

    @app.websocket("/v1/jobs/{job_id}/shell")
    async def shell(websocket: WebSocket, job_id: str) -> None:
        await websocket.accept()
        try:
            token, cookie = request_token(websocket.scope["headers"])
            found = None
            if token and not cookie:  # a bearer token only (see above)
                found = await anyio.to_thread.run_sync(api.core.user_for_token, token)
            if found is None:
                raise HTTPException(401, "missing or unknown API token: pass --token or DLC_TOKEN")
            job = await anyio.to_thread.run_sync(lambda: core_job(api, job_id, found))
            task = next((t for t in job.tasks if t.rank == 0), None)
            port = await anyio.to_thread.run_sync(lambda: _exec_port(api, task))
            if task is None or job.state.value != "running" or not port:
                state = job.state.value
                raise HTTPException(409, f"job {job_id} is {state}, not running a container")
            context = _context(api)
            secret = job_secret(context.job_key, job_id)
            with context.sessions.session(found[0]):
                first = await first_message(websocket)
                limits = context.sessions.limits
                await relay(websocket, task.hostname, int(port), secret, first, limits)
        except WebSocketDisconnect:
            return
        except (HTTPException, DlcError) as exc:
            message = exc.detail if isinstance(exc, HTTPException) else str(exc)
            await websocket.send_json({"error": message})
            await websocket.close(code=4000 + getattr(exc, "status_code", 404) % 1000)


def add_since_route(app: FastAPI, api: Any) -> None:
    """``GET /v1/jobs/{id}/logs/since?t=UNIX``: where ``dlc logs --since`` starts reading."""
    core = api.core

    @app.get("/v1/jobs/{job_id}/logs/since")
    def logs_since(
        job_id: str,
        request: Request,
        t: float = Query(..., ge=0, le=1e11),
        stream: str = "stdout",
        rank: int = Query(0, ge=0),
    ) -> dict:
        """``{"offset"}``: the first byte of ``stream`` that arrived at or after ``t``."""
        job = core.visible_job(job_id, *_auth(request))
        return {"offset": api.logs.offset_since(job, stream, t, rank)}


def core_job(api: Any, job_id: str, found: tuple) -> Any:
    """The job if the token's user may see it (``no job`` otherwise, like every route)."""
    return api.core.visible_job(job_id, found[0], bool(found[1]))


def _exec_port(api: Any, task: Any) -> int | None:
    return _sandbox_json(api, task, "dlc-exec.json").get("port") if task else None


def _post_json(url: str, body: dict, secret: str, timeout: float) -> dict:
    import urllib.error
    import urllib.request

    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"X-DLC-Job-Secret": secret,
                                          "Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", str(exc))
        except ValueError:
            message = str(exc)
        raise HTTPException(409, f"the job's executor refused: {message}") from None
    except OSError as exc:
        raise HTTPException(502, f"cannot reach the job's executor at {url}: {exc}") from None


def safe_output_path(path: str) -> str:
    """``path`` inside ``/outputs`` (a leading ``/outputs/`` is dropped); refuses ``..``."""
    path = path.removeprefix("/outputs/").lstrip("/")
    norm = posixpath.normpath(path)
    if norm in (".", "..") or norm.startswith("../") or "\0" in path:
        raise HTTPException(400, f"path: {path[:80]!r} is not a file inside /outputs")
    return norm


def _local_sandbox(logs: Any, task: Any) -> Path | None:
    stdout = logs._local_file(task, "stdout")
    return stdout.parent if stdout is not None else None


def read_local_output(sandbox: Path, rel: str, offset: int, length: int) -> tuple[bytes, int]:
    """Read from ``sandbox/outputs/rel`` without following any link, from the descriptors.

    The container owns that folder and may change it at any moment: a link it plants there
    (``ln -s /etc/shadow x``) must not make the scheduler read the host's files, nor a
    directory it swaps for ``ln -s /`` between a check of the path and its opening (red-team
    2026-11-23: resolving the path first, then opening it by name, read the host's file). So
    each component is opened relative to its parent's descriptor with ``O_NOFOLLOW``
    (:mod:`dlc.executor.fd_paths`, which unpacks snapshots too), the file with ``O_NONBLOCK``
    (a FIFO would otherwise hold the API's worker thread until some writer came).
    """
    names = [p for p in rel.split("/") if p]
    try:
        root = os.open(sandbox / "outputs", fd_paths.DIR_FLAGS)
    except OSError:
        raise HTTPException(409, f"no file /outputs/{rel} in the job's sandbox") from None
    try:
        fd = fd_paths.open_beneath(root, names, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise HTTPException(409, f"no file /outputs/{rel} in the job's sandbox") from None
    except OSError as exc:
        if exc.errno in fd_paths.THROUGH_LINK:
            raise HTTPException(
                400, f"path: /outputs/{rel} goes through a link; copy the real file"
            ) from None
        raise HTTPException(400, f"path: /outputs/{rel} cannot be read ({exc.strerror})") from None
    finally:
        os.close(root)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise HTTPException(400, f"path: /outputs/{rel} is not a file")
        return os.pread(fd, length, offset), info.st_size
    finally:
        os.close(fd)
