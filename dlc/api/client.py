"""A small client of the scheduler API (what ``dlc submit``/``jobs``/``logs`` use).

Every failure becomes one :class:`~dlc.errors.ApiError` line: the API's own
``error`` text, or, when nothing answers, how to start a scheduler.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from dlc.errors import ApiError, FieldError

DEFAULT_API = "http://127.0.0.1:8642"


class ApiClient:
    """Talks to ``dlc scheduler``/``dlc local``.

    Args:
        url: API base URL (default ``$DLC_API`` or ``http://127.0.0.1:8642``).
        token: bearer token (default ``$DLC_TOKEN``).
        timeout_s: per-request timeout.
    """

    def __init__(self, url: str | None = None, token: str | None = None, timeout_s: float = 10):
        self.url = checked_api_url(url or os.environ.get("DLC_API") or DEFAULT_API).rstrip("/")
        self.token = token if token is not None else os.environ.get("DLC_TOKEN")
        self.timeout_s = timeout_s

    def submit(self, spec: dict[str, Any]) -> dict:
        """Submit a job spec; returns the job (with ``framework_url``)."""
        return self._call("POST", "/v1/jobs", spec)

    def jobs(self, limit: int | None = None, page_size: int = 100) -> list[dict]:
        """The caller's jobs (all jobs for an admin token), newest first.

        Args:
            limit: at most this many (``None``: all, following the ``next`` links).
            page_size: jobs asked for per request.
        """
        found: list[dict] = []
        page = self.jobs_page(min(page_size, limit or page_size))
        while True:
            found += page["jobs"]
            if not page.get("next") or (limit is not None and len(found) >= limit):
                return found[:limit]
            page = self._call("GET", page["next"])

    def jobs_page(self, limit: int = 100, cursor: str | None = None) -> dict:
        """One page: ``{"jobs": [...newest first], "next": URL path or None}``."""
        query = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        return self._call("GET", f"/v1/jobs?{urllib.parse.urlencode(query)}")

    def show(self, job_id: str) -> dict:
        """One job with its history."""
        return self._call("GET", f"/v1/jobs/{quote_job_id(job_id)}")

    def usage(self, by: str = "user") -> dict:
        """GPUs allocated and used per ``user``, ``group`` or ``job``: ``{"by", "rows"}``."""
        return self._call("GET", f"/v1/usage?{urllib.parse.urlencode({'by': by})}")

    def kill(self, job_id: str) -> dict:
        """Kill a job."""
        return self._call("POST", f"/v1/jobs/{quote_job_id(job_id)}/kill", {})

    def kill_all(
        self, user: str | None = None, all_users: bool = False, states: list[str] | None = None
    ) -> dict:
        """Kill every live job of the caller (admins: of ``user`` or of all users);
        returns ``{"count", "ids"}``."""
        body = {"user": user, "all_users": all_users, "states": states or None}
        return self._call("POST", "/v1/jobs/kill", body)

    def logs(
        self,
        job_id: str,
        stream: str = "stdout",
        offset: int = 0,
        length: int = 65536,
        attempt: int | None = None,
        rank: int = 0,
    ):
        """A chunk of a job's container output: ``{"data", "offset", "done", ...}``, of node
        ``rank`` of ``attempt`` (``None``: the latest)."""
        params: dict[str, Any] = {"stream": stream, "offset": offset, "length": length}
        if rank:
            params["rank"] = rank
        if attempt is not None:
            params["attempt"] = attempt
        query = urllib.parse.urlencode(params)
        return self._call("GET", f"/v1/jobs/{quote_job_id(job_id)}/logs?{query}")

    def whoami(self) -> dict:
        """``{"user", "admin"}`` of this client's token (``user`` is null for none)."""
        return self._call("GET", "/v1/session")

    def create_token(
        self,
        user: str,
        admin: bool = False,
        max_priority: int = 0,
        expires_in_s: float | None = None,
    ) -> dict:
        """A new token for ``user`` (needs an admin token): ``{"token", "user", ...}``."""
        body = {"user": user, "admin": admin, "max_priority": max_priority}
        if expires_in_s is not None:
            body["expires_in_s"] = expires_in_s
        return self._call("POST", "/v1/tokens", body)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raise ApiError(_error_text(exc)) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ApiError(
                f"cannot reach the DLC scheduler at {self.url} ({_reason(exc)}): start it with "
                "`dlc scheduler` or `dlc local`, or point --api/DLC_API at it"
            ) from None
        except ValueError:
            raise ApiError(f"{self.url} did not answer with JSON; is it a DLC scheduler?") from None


def checked_api_url(url: str) -> str:
    """``url`` if it is an ``http(s)://HOST[:PORT]`` URL.

    Raises:
        ApiError: anything else, naming ``--api``/``DLC_API`` and a URL that works.
    """
    parts = urllib.parse.urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError:
        parts = parts._replace(netloc="")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ApiError(f"--api/DLC_API: {url!r} is not an http(s) URL; use e.g. {DEFAULT_API}")
    return url


#: what a job id may hold (the API's own pattern); anything else cannot name a job
_JOB_ID = re.compile(r"^[A-Za-z0-9_.-]+$")


def quote_job_id(job_id: str) -> str:
    """``job_id`` for a URL path; refused (one line) when it cannot be a job id (``j/../x``
    reached no route: "no endpoint GET /v1/jobs/j/../x")."""
    if not _JOB_ID.match(job_id) or job_id in (".", ".."):
        raise FieldError(
            "JOB", f"{job_id!r} is not a job id; give one as `dlc jobs` lists it (e.g. j8eb007af)"
        )
    return urllib.parse.quote(job_id, safe="")


def _reason(exc: Exception) -> str:
    return str(getattr(exc, "reason", exc))


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        return json.loads(exc.read())["error"]
    except (ValueError, KeyError, TypeError, OSError):
        return f"the scheduler answered HTTP {exc.code} {exc.reason}"
