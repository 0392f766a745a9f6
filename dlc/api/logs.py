"""Where ``dlc logs`` gets a job's container output from.

The executor writes the container's output to its sandbox ``stdout``/``stderr``
files (the files the Mesos UI's Sandbox link shows). The scheduler reads them
back, trying in order:

1. the sandbox directory the executor reported in a status label
   (``dlc.sandbox``), when that path is readable here (the emulator and
   ``dlc local``, where agent and scheduler share a host);
2. local agent work directories given to the scheduler (``--sandbox-root``),
   using the Mesos layout ``.../frameworks/<fid>/executors/<eid>/runs/latest``;
3. the agent's own ``/files/read`` endpoint with the executor's virtual path
   ``/frameworks/<fid>/executors/<eid>/runs/latest/<file>``, the agent's
   address taken from the master's ``/master/slaves`` (its ``pid``) - the way
   that works on a real cluster.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from dlc.errors import DlcError
from dlc.mesos.master import fetch_slaves
from dlc.scheduler.jobs import Job, TaskPlacement

STREAMS = ("stdout", "stderr")
#: the executor's time index beside each stream (dlc.executor.runtime.TIME_INDEX_SUFFIX)
TIME_SUFFIX = ".ts"
MAX_CHUNK = 1 << 20


class LogReader:
    """Reads a task's sandbox files.

    Args:
        framework_id: current framework id (callable: it changes at registration).
        master_url: current leading master ``http://host:port`` (callable), or ``None``.
        sandbox_roots: local agent work directories to search.
        timeout_s: HTTP timeout towards the master and agents.
    """

    def __init__(
        self,
        framework_id: Callable[[], str | None],
        master_url: Callable[[], str | None] = lambda: None,
        sandbox_roots: Sequence[str | Path] = (),
        timeout_s: float = 5.0,
    ):
        self._framework_id = framework_id
        self._master_url = master_url
        self._roots = [Path(r) for r in sandbox_roots]
        self._timeout = timeout_s

    def read(
        self,
        job: Job,
        stream: str = "stdout",
        offset: int = 0,
        length: int = 65536,
        rank: int = 0,
    ) -> dict:
        """Read ``length`` bytes of a task's ``stream`` from ``offset``.

        Returns:
            ``{"data": str, "offset": next_offset, "source": where}``; empty data
            while the job has not started.

        Raises:
            DlcError: bad stream/offset, or no way to reach the sandbox.
        """
        if stream not in STREAMS:
            raise DlcError(f"stream must be stdout or stderr, not {stream!r}")
        if offset < 0 or length < 0:
            raise DlcError("offset and length must be >= 0")
        length = min(length, MAX_CHUNK)
        task = next((t for t in job.tasks if t.rank == rank), None)
        if task is None:
            return {"data": "", "offset": offset, "source": "none"}
        path = self._local_file(task, stream)
        if path is not None:
            with open(path, "rb") as fh:
                fh.seek(offset)
                data = fh.read(length)
            return {
                "data": data.decode(errors="replace"),
                "offset": offset + len(data),
                "source": str(path),
            }
        chunk = self._read_remote(task, stream, offset, length)
        chunk.pop("raw")  # the API answers in JSON: text only
        return chunk

    def offset_since(self, job: Job, stream: str, since: float, rank: int = 0) -> int:
        """Where the output that arrived at or after ``since`` (Unix seconds) begins.

        Reads the executor's time index ``<stream>.ts`` (``SECONDS OFFSET`` lines, one per
        second that saw output); past its end, or with no index, the stream's end (nothing
        is that new). Output of an older executor without an index starts at 0.
        """
        if stream not in STREAMS:
            raise DlcError(f"stream must be stdout or stderr, not {stream!r}")
        task = next((t for t in job.tasks if t.rank == rank), None)
        if task is None:
            return 0
        local = self._local_file(task, stream)
        if local is not None:
            index = local.with_name(stream + TIME_SUFFIX)
            text = index.read_text() if index.is_file() else ""
            return offset_in_index(text, since, local.stat().st_size)
        text, offset = "", 0
        try:
            while True:  # the index is small: a line per second that saw output
                chunk = self._read_remote(task, stream + TIME_SUFFIX, offset, MAX_CHUNK)
                if not chunk["data"]:
                    break
                text, offset = text + chunk["data"], chunk["offset"]
            size = self._remote_size(task, stream)
        except DlcError:
            return 0  # no index there (an older executor): from the start
        return offset_in_index(text, since, size)

    def _remote_size(self, task: TaskPlacement, stream: str) -> int:
        fid, master = self._framework_id(), self._master_url()
        virtual = f"/frameworks/{fid}/executors/{task.executor_id}/runs/latest/{stream}"
        agent = self._agent_address(str(master), task.agent_id)
        query = urllib.parse.urlencode({"path": virtual, "offset": -1})
        return int(self._get_json(f"http://{agent}/files/read?{query}").get("offset", 0))

    def _local_file(self, task: TaskPlacement, stream: str) -> Path | None:
        if task.sandbox and (Path(task.sandbox) / stream).is_file():
            return Path(task.sandbox) / stream
        fid = self._framework_id()
        if not fid:
            return None
        runs = Path("frameworks", fid, "executors", task.executor_id, "runs")
        for root in self._roots:
            for base in (root, *root.glob("*"), *root.glob("*/*")):
                found = _newest_run(base / runs, stream)
                if found is not None:
                    return found
        return None

    def _read_remote(self, task: TaskPlacement, stream: str, offset: int, length: int) -> dict:
        fid, master = self._framework_id(), self._master_url()
        if not fid or not master:
            raise DlcError("cannot locate the job's sandbox: the scheduler is not registered yet")
        agent = self._agent_address(master, task.agent_id)
        virtual = f"/frameworks/{fid}/executors/{task.executor_id}/runs/latest/{stream}"
        query = urllib.parse.urlencode({"path": virtual, "offset": offset, "length": length})
        body = self._get_json(f"http://{agent}/files/read?{query}")
        # The agent writes the file's bytes into the JSON string as they are (only control
        # characters escaped); _get_json kept undecodable ones as surrogates: undo that for
        # the exact bytes (``raw``, what ``dlc cp`` copies), and give text readers valid text.
        raw = body.get("data", "").encode("utf-8", "surrogateescape")
        return {
            "data": raw.decode(errors="replace"),
            "raw": raw,
            "offset": offset + len(raw),
            "source": f"{agent}{virtual}",
        }

    def _agent_address(self, master: str, agent_id: str) -> str:
        slaves = fetch_slaves(master.rstrip("/"), self._timeout)  # the one master client
        if slaves is None:
            raise DlcError(f"cannot read the master's agent list at {master}/master/slaves")
        for agent in slaves:
            if agent.get("id") == agent_id:
                return agent["pid"].split("@", 1)[1]  # "slave(1)@127.0.0.1:5051"
        raise DlcError(f"agent {agent_id} is not known to the master any more; its logs are gone")

    def _get_json(self, url: str) -> dict:
        try:
            with urllib.request.urlopen(url, timeout=self._timeout) as resp:  # noqa: S310
                # surrogateescape: a binary file's bytes are not UTF-8 (see _read_remote)
                return json.loads((resp.read() or b"{}").decode("utf-8", "surrogateescape"))
        except (OSError, ValueError) as exc:
            raise DlcError(f"cannot read the sandbox via {url}: {exc}") from None


def offset_in_index(text: str, since: float, end: int) -> int:
    """The offset of the first index line at or after ``since`` (``end`` when none is)."""
    for line in text.splitlines():
        parts = line.split()
        well_formed = len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit()
        if well_formed and int(parts[0]) >= int(since):
            return min(int(parts[1]), end) if end else int(parts[1])
    return end


def _newest_run(runs: Path, stream: str) -> Path | None:
    """``runs/latest/<stream>`` (real agents), else the newest run's file (the emulator)."""
    if not runs.is_dir():
        return None
    latest = runs / "latest" / stream
    if latest.is_file():
        return latest
    files = [p for p in runs.glob(f"*/{stream}") if p.is_file()]
    return max(files, key=lambda p: p.stat().st_mtime) if files else None
