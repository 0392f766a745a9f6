"""``dlc logs``: a job's container output; a clear word when there is none yet."""

from __future__ import annotations

import datetime
import re
import sys
import time
import urllib.parse

import click

from dlc.api.client import ApiClient, quote_job_id
from dlc.cli.client_opts import api_options, complete_job_ids
from dlc.errors import ApiError


class NoLogsYet(ApiError):
    """The job has not started, so it has no output to show (exit code 3)."""

    exit_code = 3


@click.command("logs")
@click.argument("job_id", metavar="JOB", shell_complete=complete_job_ids)
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the job ends.")
@click.option("--stderr", "use_stderr", is_flag=True, help="Show stderr instead of stdout.")
@click.option("--interval", type=float, default=1.0, show_default=True, hidden=True)
@click.option("--tail", "tail_lines", type=click.IntRange(0),
              help="Start with only the last N lines of what is there now.")  # fmt: skip
@click.option("--since", "since", metavar="T",
              help="Only output from T on: an age (30s, 10m, 2h, 1d) or a time "
                   "(2026-11-22T10:00, local unless it names a zone).")  # fmt: skip
@click.option("--attempt", type=click.IntRange(0), metavar="N",
              help="Output of attempt N (0: the first run) [default: the latest]; earlier "
                   "attempts (retried, preempted) stay readable.")  # fmt: skip
@click.option("--rank", "rank_given", type=click.IntRange(0), metavar="R",
              help="Node R of a multi-node job [default: 0].")  # fmt: skip
@api_options
def command(job_id, follow, use_stderr, interval, tail_lines, since, attempt, rank_given, api,
            token):  # fmt: skip
    """Print a job's container output (stdout, or --stderr).

    A queued job has no output yet: without -f that is an error (exit code 3); with -f
    the command says so and waits. A job that ran and printed nothing says so on stderr.
    """
    rank = rank_given or 0
    client = _Reader(ApiClient(api, token), attempt, rank)
    stream = "stderr" if use_stderr else "stdout"
    offset, printed, waiting_said = 0, False, False
    if since is not None and (attempt is not None or rank):
        raise click.BadParameter("reads the latest attempt's node 0 only", param_hint="--since")
    if since is not None:
        query = urllib.parse.urlencode({"t": parse_since(since), "stream": stream})
        path = f"/v1/jobs/{quote_job_id(job_id)}/logs/since?{query}"
        offset = int(client._call("GET", path)["offset"])
    if tail_lines is not None:
        start = offset
        offset = _print_tail(client, job_id, stream, tail_lines, start)
        printed = offset > start
    while True:
        chunk = client.logs(job_id, stream, offset)
        if chunk["data"]:
            sys.stdout.write(chunk["data"])
            sys.stdout.flush()
            printed = True
        offset = chunk["offset"]
        if chunk["data"]:
            continue  # more may be waiting beyond this chunk
        state = chunk.get("state", "")
        if not printed and state in ("queued", "staging") and chunk.get("done") is not True:
            if not follow:
                raise NoLogsYet(
                    f"job {job_id} is {state}: no logs yet (dlc logs -f {job_id} waits for them)"
                    + _earlier(chunk, job_id)
                )
            if not waiting_said:
                click.echo(f"job {job_id} is {state}: no logs yet, waiting", err=True)
                waiting_said = True
        if not follow or chunk["done"]:
            break
        time.sleep(interval)
    nodes = chunk.get("nodes") or 1
    if rank_given is None and nodes > 1:
        # node 0 alone was all `dlc logs` showed of a gang, whichever node failed
        others = "1" if nodes == 2 else f"1 to {nodes - 1}"
        click.echo(f"(node 0 of {nodes}; the others: dlc logs --rank {others} {job_id})", err=True)
    if not printed:
        verb = "has printed" if not chunk["done"] else f"ended ({state}) with"
        said = f"job {job_id} {verb} no {stream} output"
        if chunk.get("attempt") is not None and chunk["attempt"] + 1 < chunk.get("attempts", 0):
            said = f"attempt {chunk['attempt']} of job {job_id} printed no {stream} output"
        click.echo(said, err=True)


class _Reader:
    """The client's ``logs`` bound to one attempt and node."""

    def __init__(self, client: ApiClient, attempt: int | None, rank: int):
        self._client, self._attempt, self._rank = client, attempt, rank

    def logs(self, job_id: str, stream: str, offset: int) -> dict:
        return self._client.logs(job_id, stream, offset, attempt=self._attempt, rank=self._rank)

    def _call(self, method: str, path: str):
        return self._client._call(method, path)


def _earlier(chunk: dict, job_id: str) -> str:
    """A pointer to the previous attempt's output when the latest has none yet."""
    attempt = chunk.get("attempt") or 0
    if attempt < 1:
        return ""
    return f"; attempt {attempt - 1} printed: dlc logs --attempt {attempt - 1} {job_id}"


def parse_since(text: str, now: float | None = None) -> float:
    """``--since``: an age (``90s``, ``10m``, ``2h``, ``1d``) or an ISO time, as Unix seconds.

    Raises:
        click.BadParameter: neither (one line naming the forms).
    """
    now = time.time() if now is None else now
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", text)
    if match:
        return now - float(match.group(1)) * _UNITS[match.group(2)]
    try:
        return datetime.datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither an age (30s, 10m, 2h, 1d) nor a time (2026-11-22T10:00)",
            param_hint="--since",
        ) from None


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _print_tail(client, job_id: str, stream: str, lines: int, start: int = 0) -> int:
    """Print the last ``lines`` lines of what the stream holds now from ``start``; returns
    where it ended."""
    import collections

    last: collections.deque[str] = collections.deque(maxlen=lines or 1)
    offset, partial = start, ""
    while True:
        chunk = client.logs(job_id, stream, offset)
        if not chunk["data"]:
            break
        offset = chunk["offset"]
        parts = (partial + chunk["data"]).split("\n")
        partial = parts.pop()
        last.extend(part + "\n" for part in parts)
    if partial:
        last.append(partial)
    if lines:
        sys.stdout.write("".join(last))
        sys.stdout.flush()
    return offset
