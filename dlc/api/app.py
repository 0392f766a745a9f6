"""The API's routes: a FastAPI app whose OpenAPI document comes from :mod:`api_models`.

:class:`~dlc.api.server.ApiServer` wraps this app in
:class:`~dlc.api.guard.ApiGuard` (auth before body, limits) and serves
it with uvicorn. Routes read the caller from ``scope["dlc.auth"]`` (set by the guard).
Handlers are plain ``def`` functions: FastAPI runs them in worker threads, so the
SQLite store never blocks the event loop.
"""

from __future__ import annotations

import html
import json
import logging
import time
from dataclasses import replace
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt
from starlette.exceptions import HTTPException

from dlc import __version__
from dlc.api import tenancy_routes
from dlc.api.env_routes import add_env_routes
from dlc.api.guard import SESSION_COOKIE, request_token
from dlc.api.models import (
    ERRORS,
    ErrorOut,
    Health,
    JobOut,
    JobPage,
    JobSpecIn,
    KillAllIn,
    KillAllOut,
    LogChunk,
    SessionIn,
    SessionOut,
)
from dlc.errors import DlcError, ImageNotFound, JobNotFound, JobSpecError, LimitReached
from dlc.scheduler.core.facade import LIVE_STATES, Actions
from dlc.scheduler.jobs.job import Job, JobSpec, JobState, TaskPlacement

log = logging.getLogger(__name__)

#: jobs per page of ``GET /v1/jobs`` when ``limit`` is not given, and the most allowed
DEFAULT_PAGE, MAX_PAGE = 100, 1000
_JOB_ID = r"^[A-Za-z0-9_.-]+$"


def job_to_dict(job: Job, history: list | None = None) -> dict[str, Any]:
    """The API's JSON view of a job (:class:`~dlc.api.models.JobOut`)."""
    spec = job.spec
    body: dict[str, Any] = {
        "id": job.job_id,
        "user": job.user,
        "state": job.state.value,
        "name": spec.name or spec.label,
        "framework": spec.framework,
        "image": spec.image,
        "gpus": spec.gpus,
        "gpu_fraction": spec.gpu_fraction,
        "gpu_memory": spec.gpu_memory,
        "interactive": spec.interactive,
        "nodes": spec.nodes,
        # an elastic gang (--nodes MIN:MAX): its MAX and how many members run now
        "nodes_max": spec.nodes_max,
        "members": len(job.tasks) if spec.nodes_max is not None else None,
        "gang_topology": spec.gang_topology,
        "gpu_model": spec.gpu_model,
        "cpus": spec.cpus,
        "mem_mib": spec.mem_mib,
        "priority": spec.priority,
        "priority_class": spec.priority_class,
        "pool": spec.pool,
        "retries": spec.retries,
        "command": list(spec.command),
        "attempt": job.attempt,
        "failures": job.failures,
        "submitted_at": job.submitted_at,
        "message": job.message,
        "kill_requested": job.kill_requested,
        "tasks": [t.to_dict() for t in job.tasks],
    }
    if history is not None:
        body["history"] = [{"at": at, "state": st, "message": msg} for at, st, msg in history]
    return body


def _with_usage(core: Any, body: dict[str, Any]) -> dict[str, Any]:
    """Add ``usage``: what the job's GPUs did lately (``None``: not running or no reading)."""
    usage = core.job_usage(body["id"])
    body["usage"] = None if usage is None else usage.to_dict()
    return body


def build_app(api: Any) -> FastAPI:
    """The FastAPI app of one :class:`~dlc.api.server.ApiServer` (``api`` holds the
    core, log reader, dispatcher, dashboard and framework facts)."""
    app = FastAPI(
        title="DLC scheduler API",
        version=__version__,
        description=(
            "Submit, list, show, kill deep-learning jobs and read their logs. Every /v1 call "
            "needs a bearer token (or the dashboard's session cookie); users see only their "
            "own jobs, admin tokens see all. Errors are {error, field} with one-line messages."
        ),
        docs_url=None,
        redoc_url=None,
        responses={400: {"model": ErrorOut}},
    )
    _add_error_handlers(app)
    _add_job_routes(app, api)
    _add_session_routes(app, api)
    _add_token_routes(app, api)
    app.include_router(tenancy_routes.router(api))
    _add_pages(app, api)
    add_env_routes(app, api)
    return app


def _auth(request: Request) -> tuple[str, bool]:
    user, admin, _ = request.scope["dlc.auth"]
    return user, admin


def _max_priority(request: Request) -> int | None:
    """The caller's priority ceiling granted with their token (``None``: unlimited)."""
    return request.scope["dlc.auth"][2]


def _add_job_routes(app: FastAPI, api: Any) -> None:
    core = api.core

    @app.post("/v1/jobs", status_code=201, response_model=JobOut, responses=ERRORS)
    def submit(spec: JobSpecIn, request: Request) -> Response:
        """Submit a job; it is queued (the reply links the framework in the Mesos UI)."""
        user, admin = _auth(request)
        job = core.submit(
            user,
            JobSpec.from_dict(spec.model_dump(exclude_unset=True)),
            max_priority=_max_priority(request),
            admin=admin,
        )
        api.dispatch(Actions(revive=True))
        out = job_to_dict(job)
        out["framework_url"] = api.framework_url()
        out["master_kind"] = api.master_kind()
        return JSONResponse(out, 201)

    @app.get("/v1/jobs", response_model=JobPage, responses=ERRORS)
    def list_jobs(
        request: Request,
        limit: int = Query(DEFAULT_PAGE, ge=1, le=MAX_PAGE, description="jobs per page"),
        cursor: str | None = Query(None, pattern=_JOB_ID, description="from `next`"),
    ) -> Response:
        """The caller's jobs (all for an admin), newest first, a page at a time."""
        user, admin = _auth(request)
        try:
            jobs = core.jobs_page(user, admin, limit + 1, cursor)
        except JobNotFound:
            msg = f"no job {cursor}; pass the `next` URL as given"
            raise DlcRequestError(400, msg, "cursor") from None
        more = len(jobs) > limit
        jobs = jobs[:limit]
        nxt = f"/v1/jobs?limit={limit}&cursor={jobs[-1].job_id}" if more else None
        # A Response skips re-validating the output against JobPage (the model documents it).
        body = [_with_usage(core, job_to_dict(j)) for j in jobs]
        return JSONResponse({"jobs": body, "next": nxt})

    @app.get("/v1/jobs/{job_id}", response_model=JobOut, responses=ERRORS)
    def show(job_id: str, request: Request) -> dict:
        """One job with its state history."""
        job = core.visible_job(job_id, *_auth(request))
        out = _with_usage(core, job_to_dict(job, core.job_history(job_id)))
        # A queued job's position changes every round: computed on demand, never stored.
        out["message"] = core.queue_reason(job_id) or out["message"]
        return out

    @app.get("/v1/usage", responses=ERRORS)
    def usage(
        request: Request,
        by: str = Query("user", pattern="^(user|group|job)$", description="user, group or job"),
    ) -> dict:
        """GPUs allocated and used (utilisation, memory, allocated-but-idle) per user, group
        or running job; a non-admin sees only their own row, group or jobs."""
        user, admin = _auth(request)
        rows = core.usage_rollups(by, None if admin else user)
        return {"by": by, "rows": [r.to_dict() for r in rows]}

    @app.post("/v1/jobs/kill", response_model=KillAllOut, responses=ERRORS)
    def kill_all(body: KillAllIn, request: Request) -> dict:
        """Kill every live job of the caller (an admin: of ``user``, or of ``all_users``),
        optionally only those in ``states``."""
        user, admin = _auth(request)
        if not admin and (body.all_users or body.user not in (None, user)):
            msg = "you can kill only your own jobs; drop --user/--all-users"
            raise DlcRequestError(403, msg, "all_users" if body.all_users else "user")
        known = {s.value: s for s in LIVE_STATES}
        wanted = body.states or sorted(known)
        bad = [s for s in wanted if s not in known]
        if bad:
            msg = f"{bad[0][:40]!r} is not a live state; pass --state with one of "
            raise DlcRequestError(400, msg + ", ".join(sorted(known)), "states")
        owner = None if body.all_users else (body.user or "")
        jobs, actions = core.kill_all(user, admin, owner, frozenset(known[s] for s in wanted))
        api.dispatch(actions)
        return {"count": len(jobs), "ids": [j.job_id for j in jobs]}

    @app.post("/v1/jobs/{job_id}/kill", response_model=JobOut, responses=ERRORS)
    def kill(job_id: str, request: Request) -> dict:
        """Kill a job (queued: at once; running: its tasks are killed)."""
        job, actions = core.kill(job_id, *_auth(request))
        api.dispatch(actions)
        return job_to_dict(job)

    @app.get("/v1/jobs/{job_id}/logs", response_model=LogChunk, responses=ERRORS)
    def logs(
        job_id: str,
        request: Request,
        stream: str = "stdout",
        offset: int = Query(0, ge=0, le=2**62),
        length: int = Query(65536, ge=1, le=1 << 20),
        rank: int = Query(0, ge=0, description="the node of a multi-node job (0: the first)"),
        attempt: int | None = Query(
            None, ge=0, description="0 for the first run; default: the latest"
        ),
    ) -> dict:
        """A chunk of a job's container output from ``offset``: of node ``rank`` of
        ``attempt`` (every attempt's sandbox is kept, so an earlier run, e.g. one that was
        preempted, stays readable)."""
        job = core.visible_job(job_id, *_auth(request))
        chosen = attempt_view(job, job.attempt if attempt is None else attempt, rank)
        out = api.logs.read(chosen, stream, offset, length, rank)
        current = chosen.attempt == job.attempt
        out["state"] = job.state.value
        # an earlier attempt has ended: its output grows no more
        out["done"] = job.state.terminal or not current
        out["attempt"], out["rank"], out["attempts"] = chosen.attempt, rank, job.attempt + 1
        out["nodes"] = job.spec.nodes  # so `dlc logs` can say the other nodes' are there
        return out


class TokenIn(BaseModel):
    """``POST /v1/tokens``: a new API token for ``user`` (admin only)."""

    model_config = ConfigDict(extra="forbid")
    user: str = Field(pattern=r"^[A-Za-z0-9_.@-]{1,64}$")
    admin: StrictBool = False
    max_priority: StrictInt = Field(0, ge=-1000, le=1000)
    expires_in_s: float | None = Field(None, gt=0, le=10 * 365 * 86400)


def _add_token_routes(app: FastAPI, api: Any) -> None:
    core = api.core

    @app.post("/v1/tokens", status_code=201, responses=ERRORS)
    def create_token(body: TokenIn, request: Request) -> JSONResponse:
        """Make an API token for ``user`` (admin only); the reply holds it, shown once (the
        store keeps only its hash). ``dlc tokens create USER --api URL`` calls this."""
        actor, admin = _auth(request)
        if not admin:
            raise DlcRequestError(403, "only admins can make tokens; ask an admin", "admin")
        expires = None if body.expires_in_s is None else time.time() + body.expires_in_s
        token = core.add_token(
            body.user, admin=body.admin, max_priority=body.max_priority, expires_at=expires
        )
        # who made whose token goes to the scheduler log (never the token itself)
        log.info("%s made a%s token for %s", actor, "n admin" if body.admin else "", body.user)
        return JSONResponse(
            {"token": token, "user": body.user, "admin": body.admin, "expires_at": expires}, 201
        )


def attempt_view(job: Job, attempt: int, rank: int) -> Job:
    """``job`` as it was in ``attempt`` for reading node ``rank``'s output.

    The store keeps the tasks of the latest attempt only; an earlier attempt's task is
    rebuilt from its id (``<job>.<attempt>.<rank>``: the sandbox directory is named after
    it), with the agent of the same node now as the best guess for reading it remotely.

    Raises:
        DlcRequestError: no such attempt or node (400, naming the range).
    """
    if attempt > job.attempt:
        raise DlcRequestError(
            400,
            f"job {job.job_id} has attempts 0 to {job.attempt}; pass --attempt in that range",
            "attempt",
        )
    nodes = job.spec.nodes_max or job.spec.nodes  # an elastic gang's ranks go up to MAX
    if rank >= nodes:
        raise DlcRequestError(
            400, f"job {job.job_id} has {nodes} node(s): pass --rank 0 to {nodes - 1}", "rank"
        )
    if attempt == job.attempt:
        return job
    now = next((t for t in job.tasks if t.rank == rank), None)
    task = TaskPlacement(
        task_id=f"{job.job_id}.{attempt}.{rank}",
        agent_id=now.agent_id if now else "",
        hostname=now.hostname if now else "",
        gpu_ids=(),
        rank=rank,
    )
    return replace(job, attempt=attempt, tasks=(task,))


def _add_session_routes(app: FastAPI, api: Any) -> None:
    @app.post("/v1/session", response_model=SessionOut, responses=ERRORS)
    def sign_in(body: SessionIn, request: Request, response: Response) -> dict:
        """Dashboard sign-in: exchange an API token for an HttpOnly, SameSite=Strict cookie
        (so the token never appears in a URL or in the page's script)."""
        # A cross-site form can POST text/plain without a preflight and sign the victim's
        # browser in as the attacker; it cannot set a custom header or a JSON content type.
        ctype = request.scope.get("dlc.content_type", "").split(";")[0].strip().lower()
        if ctype != "application/json" or "x-requested-with" not in request.headers:
            raise DlcRequestError(
                403,
                "sign in from the dashboard (a JSON body with an X-Requested-With header)",
                "X-Requested-With",
            )
        found = api.core.user_for_token(body.token)
        if found is None:
            raise DlcRequestError(
                401,
                "unknown API token; paste the one `dlc local` printed "
                "or have an admin make one with `dlc tokens create USER`",
                "token",
            )
        response.set_cookie(
            SESSION_COOKIE,
            body.token,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return {"user": found[0], "admin": found[1]}

    @app.get("/v1/session", response_model=SessionOut)
    def whoami(request: Request) -> dict:
        """Who the session cookie (or bearer token) belongs to; ``user`` is null when
        signed out (answered with 200, so the page can ask without an error)."""
        token, _ = request_token(request.scope["headers"])
        found = api.core.user_for_token(token) if token else None
        return {"user": found[0], "admin": found[1]} if found else {"user": None, "admin": False}

    @app.delete("/v1/session", status_code=204)
    def sign_out() -> Response:
        """Forget the dashboard's session cookie."""
        response = Response(status_code=204)
        response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
        return response


def _add_pages(app: FastAPI, api: Any) -> None:
    web = api.web

    @app.get("/healthz", response_model=Health)
    def healthz() -> dict:
        """Liveness."""
        return {"ok": True, "version": __version__}

    @app.get("/", include_in_schema=False)
    @app.get("/index.html", include_in_schema=False)
    def index(request: Request) -> Response:
        if web is not None:
            return _page(web.page(request.url.path))
        return HTMLResponse(_status_page(api.core))

    if web is None:
        return

    @app.get("/metrics", include_in_schema=False)
    @app.get("/static/{name:path}", include_in_schema=False)
    def web_page(request: Request) -> Response:
        return _page(web.page(request.url.path))

    @app.api_route(
        "/v1/dashboard{rest:path}", methods=["GET", "POST", "PUT", "DELETE"], responses=ERRORS
    )
    def dashboard(request: Request, rest: str) -> JSONResponse:
        """The dashboard's live snapshot (``/v1/dashboard``) and agent topology drawings
        (``/v1/dashboard/agents/{agent_id}/topology``)."""
        user, admin = _auth(request)
        status, body = web.route(request.method, request.url.path, user, admin)
        return JSONResponse(body, status_code=status)


def _page(page: tuple[int, bytes, str] | None) -> Response:
    if page is None:
        return Response(b"no such page\n", 404, media_type="text/plain; charset=utf-8")
    status, body, ctype = page
    return Response(body, status, headers={"content-type": ctype})


def _status_page(core: Any) -> str:
    counts: dict[str, int] = {s.value: 0 for s in JobState}
    for job in core.all_jobs():
        counts[job.state.value] += 1
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{v}</td></tr>" for k, v in counts.items())
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>DLC scheduler</title></head>"
        f"<body><h1>DLC scheduler {__version__}</h1><table>{rows}</table>"
        "<p>Use <code>dlc jobs</code>; API description: <a href='/openapi.json'>"
        "/openapi.json</a></p></body></html>"
    )


class DlcRequestError(Exception):
    """A refusal from a route: status, one-line message, field."""

    def __init__(self, status: int, message: str, field: str | None = None):
        super().__init__(message)
        self.status, self.field = status, field


def _error(status: int, message: str, field: str | None = None, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message, "field": field}, status, headers=headers or None)


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(DlcRequestError)
    def request_error(request: Request, exc: DlcRequestError) -> JSONResponse:
        return _error(exc.status, str(exc), exc.field)

    @app.exception_handler(JobSpecError)
    @app.exception_handler(ImageNotFound)
    def bad_spec(request: Request, exc: DlcError) -> JSONResponse:
        return _error(400, str(exc), getattr(exc, "field", None))

    @app.exception_handler(LimitReached)
    def limit_reached(request: Request, exc: LimitReached) -> JSONResponse:
        return _error(429, str(exc))

    @app.exception_handler(JobNotFound)
    def not_found(request: Request, exc: JobNotFound) -> JSONResponse:
        return _error(404, str(exc))

    @app.exception_handler(DlcError)
    def conflict(request: Request, exc: DlcError) -> JSONResponse:
        return _error(409, str(exc))

    @app.exception_handler(HTTPException)
    def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        method, path = request.method, request.url.path
        if exc.status_code == 400 and exc.detail == _BODY_PARSE_FAILED:
            return _error(400, *unparsable_body(request))
        if exc.status_code == 404:
            return _error(404, f"no endpoint {method} {path}; see /openapi.json")
        if exc.status_code == 405:
            return _error(405, f"{method} is not allowed on {path}")
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    def bug(request: Request, exc: Exception) -> JSONResponse:
        # Starlette re-raises after answering: the guard logs it once, with the traceback.
        return _error(500, "internal error; see the scheduler log")

    @app.exception_handler(RequestValidationError)
    def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(400, *validation_message(request, exc))


#: FastAPI's detail when json.loads raised something else than a JSONDecodeError (Python's
#: 4,300-digit limit on int(): a 5,000-digit "gpus" got this generic line, red-team #14)
_BODY_PARSE_FAILED = "There was an error parsing the body"


def unparsable_body(request: Request) -> tuple[str, str | None]:
    """One line naming the field for a body ``json.loads`` refused though it is JSON.

    The body (kept by the guard) is parsed again with over-long integers kept as text; a
    job spec then goes through :meth:`JobSpec.from_dict`, whose message names the field and
    its range.
    """
    body = request.scope.get("dlc.body", b"")
    try:
        data = json.loads(body, parse_int=lambda text: int(text) if len(text) < 4000 else text)
    except ValueError:
        return "request body is not JSON; send one JSON object", "body"
    if request.method == "POST" and request.url.path == "/v1/jobs":
        try:
            JobSpec.from_dict(data)
        except JobSpecError as err:
            return str(err), err.field
    return "request body: a number has more than 4,000 digits; send a smaller one", "body"


def validation_message(request: Request, exc: RequestValidationError) -> tuple[str, str | None]:
    """One line for a request that does not fit the models.

    A submitted spec is re-checked by :meth:`JobSpec.from_dict` first, so the domain's
    message (with its fix) wins over pydantic's wording whenever the domain has one.
    """
    first = exc.errors()[0]
    if first.get("type") == "json_invalid":
        return f"request body is not JSON: {first.get('msg', 'invalid')}", "body"
    if request.method == "POST" and request.url.path == "/v1/jobs":
        try:
            JobSpec.from_dict(exc.body if exc.body is not None else {})
        except JobSpecError as err:
            return str(err), err.field
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
    field = next((p for p in loc if not p.isdigit()), None) if loc else None
    name = ".".join(loc) or "body"
    msg = str(first.get("msg", "invalid")).replace("\n", " ")
    return f"{name}: {msg[:1].lower()}{msg[1:]}", field or (None if name == "body" else name)
