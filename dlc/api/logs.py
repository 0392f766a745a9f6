"""Where ``dlc logs`` gets a job's container output from.

The executor writes the container's output to its sandbox ``stdout``/``stderr``
files (the files the Mesos UI's Sandbox link shows). The scheduler reads them
back, trying in order:

1. local agent work directories given to the scheduler (``--sandbox-root``; ``dlc local``
   passes its emulator's), using the Mesos layout
   ``[slaves/<agent>/]frameworks/<fid>/executors/<eid>/runs/latest`` (the emulator has no
   ``latest`` link: its newest run);
2. the agent's own ``/files/read`` endpoint with the executor's virtual path
   ``/frameworks/<fid>/executors/<eid>/runs/latest/<file>``, the agent's
   address taken from the master's ``/master/slaves`` (its ``pid``) - the way
   that works on a real cluster.

Every part of a sandbox path comes from the operator (the roots) or from ids DLC itself
knows (the framework id it registered with, the agent it placed the task on, the executor id
it launched): nothing from a status update. Status updates reach the scheduler from anything
that can reach an executor API, and a ``dlc.sandbox`` label once made the scheduler read
``<any path>/stdout`` (red-team finding 2026-11-26). Below the root each component is opened
relative to its parent's descriptor without following links (:func:`open_beneath`, as the
``/outputs`` reads do), and ``runs/latest`` must name a run directory beside it.
"""

from __future__ import annotations

import json
import os
import stat
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dlc.errors import DlcError
from dlc.executor import fd_paths
from dlc.mesos.master import fetch_slaves
from dlc.scheduler.jobs.job import Job, TaskPlacement

STREAMS = ("stdout", "stderr")
#: the executor's time index beside each stream (dlc.executor.runtime.TIME_INDEX_SUFFIX)
TIME_SUFFIX = ".ts"
MAX_CHUNK = 1 << 20


class SandboxPathError(DlcError):
    """A sandbox file is reached through a link, or is not a regular file."""


def _plain_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name


def open_beneath(root: Path, names: Sequence[str]) -> int:
    """A read descriptor of the regular file ``root/names[0]/.../names[-1]``.

    ``root`` is the operator's directory (opened as given); every name below it is opened
    relative to its parent's descriptor with ``O_NOFOLLOW`` (:func:`fd_paths.open_beneath`, the
    same opener as the ``/outputs`` reads and the snapshot unpacking), so a link anywhere below
    the root (planted, or swapped in between a check and the open) is refused, not followed.
    ``O_NONBLOCK``: a FIFO planted there would otherwise hold the API's worker thread. The
    caller closes the descriptor.

    Raises:
        FileNotFoundError: a component is missing.
        SandboxPathError: a component is a link, not a plain name, or the end is not a file.
    """
    if not names or not all(_plain_name(n) for n in names):
        raise SandboxPathError(f"sandbox path {'/'.join(names)!r} is not a plain relative path")
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = fd_paths.open_beneath(root_fd, list(names), os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno in fd_paths.THROUGH_LINK:
            raise SandboxPathError(
                f"sandbox path {'/'.join(names)} goes through a link; not followed"
            ) from None
        raise
    finally:
        os.close(root_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SandboxPathError(f"sandbox path {'/'.join(names)} is not a regular file")
    return fd


@dataclass(frozen=True)
class SandboxFile:
    """A sandbox file found under an operator root: ``root/names...`` without links."""

    root: Path
    names: tuple[str, ...]

    @property
    def path(self) -> Path:
        """The file's path (no link in it below the root when it was found)."""
        return self.root.joinpath(*self.names)

    def sibling(self, name: str) -> SandboxFile:
        """Another file of the same run directory."""
        return SandboxFile(self.root, (*self.names[:-1], name))

    def read(self, offset: int, length: int) -> tuple[bytes, int]:
        """``length`` bytes from ``offset`` and the file's size, opened without links.

        Raises:
            FileNotFoundError, SandboxPathError: see :func:`open_beneath`.
        """
        fd = open_beneath(self.root, self.names)
        try:
            return os.pread(fd, length, offset), os.fstat(fd).st_size
        finally:
            os.close(fd)


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
        found = self._local(task, stream)
        if found is not None:
            data = self._read_local(found, offset, length)
            return {
                "data": data.decode(errors="replace"),
                "offset": offset + len(data),
                "source": str(found.path),
            }
        chunk = self._read_remote(task, stream, offset, length)
        chunk.pop("raw")  # the API answers in JSON: text only
        return chunk

    @staticmethod
    def _read_local(found: SandboxFile, offset: int, length: int) -> bytes:
        try:
            return found.read(offset, length)[0]
        except SandboxPathError as exc:
            raise DlcError(f"cannot read the job's {found.names[-1]}: {exc}") from None
        except OSError as exc:
            raise DlcError(f"cannot read the job's {found.names[-1]}: {exc.strerror}") from None

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
        local = self._local(task, stream)
        if local is not None:
            try:
                text = local.sibling(stream + TIME_SUFFIX).read(0, MAX_CHUNK)[0].decode()
            except (OSError, SandboxPathError, UnicodeDecodeError):
                text = ""
            try:
                size = local.read(0, 0)[1]
            except (OSError, SandboxPathError):
                size = 0
            return offset_in_index(text, since, size)
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
        """The path of a task's sandbox file on this host (no link below the root), or None."""
        found = self._local(task, stream)
        return found.path if found is not None else None

    def _local(self, task: TaskPlacement, stream: str) -> SandboxFile | None:
        fid = self._framework_id()
        if fid is None or not (_plain_name(fid) and _plain_name(task.executor_id)):
            return None
        runs = ("frameworks", fid, "executors", task.executor_id, "runs")
        # the root is an agent's work dir, its slaves/ folder, or one agent's folder; an
        # earlier attempt of a job queued again has no agent (the search below finds it)
        agent = (("slaves", task.agent_id), (task.agent_id,)) if _plain_name(task.agent_id) else ()
        bases = ((), *agent)
        for root in self._roots:
            for base in bases:
                found = _newest_run(root, (*base, *runs), stream)
                if found is not None:
                    return found
        # An earlier attempt (``dlc logs --attempt``) may have run on another agent: the store
        # keeps the latest attempt's agent only. The executor id names the job and attempt,
        # so look for it under each agent of the roots (names the agents made, no links).
        for root in self._roots:
            for other in _agent_dirs(root):
                if other != task.agent_id:
                    found = _newest_run(root, ("slaves", other, *runs), stream)
                    if found is not None:
                        return found
        return None

    def _read_remote(self, task: TaskPlacement, stream: str, offset: int, length: int) -> dict:
        fid, master = self._framework_id(), self._master_url()
        if not fid or not master:
            raise DlcError("cannot locate the job's sandbox: the scheduler is not registered yet")
        if not task.agent_id:
            attempt = task.task_id.split(".")[-2] if task.task_id.count(".") >= 2 else "?"
            raise DlcError(
                f"attempt {attempt} of this job ran on an agent the scheduler no longer records "
                "(a job queued again keeps none) and its sandbox is not on this host; read it "
                "on that agent under frameworks/*/executors/" + task.executor_id
            )
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


def _newest_run(root: Path, runs: tuple[str, ...], stream: str) -> SandboxFile | None:
    """``runs/latest/<stream>`` (real agents: ``latest`` must link to a run directory beside
    it), else the newest run's file (the emulator); nothing reached through another link."""
    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fd = fd_paths.open_dir(root_fd, list(runs))
    except OSError:
        return None  # missing, or a link on the way
    finally:
        os.close(root_fd)
    try:
        return _pick_run(fd, root, runs, stream)
    except OSError:
        return None
    finally:
        os.close(fd)


def _pick_run(runs_fd: int, root: Path, runs: tuple[str, ...], stream: str) -> SandboxFile | None:
    try:
        latest = os.readlink("latest", dir_fd=runs_fd)
    except OSError:
        latest = None
    if latest is not None and _plain_name(latest) and _is_file(runs_fd, latest, stream):
        return SandboxFile(root, (*runs, latest, stream))
    newest: tuple[float, str] | None = None
    for entry in os.scandir(runs_fd):
        if entry.name == "latest" or not entry.is_dir(follow_symlinks=False):
            continue
        info = _file_info(runs_fd, entry.name, stream)
        if info is not None and (newest is None or info.st_mtime > newest[0]):
            newest = (info.st_mtime, entry.name)
    return SandboxFile(root, (*runs, newest[1], stream)) if newest else None


def _file_info(runs_fd: int, run: str, stream: str) -> os.stat_result | None:
    """The stat of ``run/stream`` when ``run`` is a real directory and the file a regular one."""
    try:
        run_fd = fd_paths.open_dir(runs_fd, [run])
    except OSError:
        return None
    try:
        info = os.stat(stream, dir_fd=run_fd, follow_symlinks=False)
    except OSError:
        return None
    finally:
        os.close(run_fd)
    return info if stat.S_ISREG(info.st_mode) else None


def _is_file(runs_fd: int, run: str, stream: str) -> bool:
    return _file_info(runs_fd, run, stream) is not None


def _agent_dirs(root: Path) -> list[str]:
    """The agent folders under ``root/slaves`` (plain names only; none when unreadable)."""
    try:
        names = os.listdir(root / "slaves")
    except OSError:
        return []
    return sorted(n for n in names if _plain_name(n))
