"""``dlc cp JOB:PATH`` against a hostile job (red-team 2026-11-23).

The job's container owns ``/outputs`` and may change it at any moment. The API (as the
scheduler's user, often root) reads ``<sandbox>/outputs/PATH``. Two attacks:

* check-then-open: resolve the path (inside: fine), then the container swaps a directory of
  it for ``ln -s /``, then the API opens the path by name and reads the host's file;
* a FIFO planted in ``/outputs``: opening it for reading blocks until a writer comes, so a
  few ``dlc cp`` calls would hold every API worker thread forever.
"""

from __future__ import annotations

import os
import threading

import pytest
from starlette.exceptions import HTTPException

from dlc.api.env_routes import read_local_output


@pytest.fixture
def sandbox(tmp_path):
    (tmp_path / "outputs" / "d").mkdir(parents=True)
    (tmp_path / "outputs" / "d" / "secret").write_text("job's own result")
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret").write_text("HOST SECRET")
    return tmp_path


def test_a_directory_swapped_for_a_link_after_the_check_cannot_redirect_the_read(
    sandbox, monkeypatch
):
    """The container's swap is made to happen at the worst moment: just before the API's
    first open under ``outputs``, after any check of the whole path."""
    real_open, swapped = os.open, []

    def open_after_the_swap(path, *args, **kwargs):
        # by name (".../outputs/d/secret") or component by component ("d" under outputs)
        if not swapped and (str(path) == "d" or str(path).endswith("outputs/d/secret")):
            swapped.append(path)
            d = sandbox / "outputs" / "d"
            os.rename(d, sandbox / "outputs" / "moved")
            os.symlink(sandbox / "host", d)  # the job: rm -r d; ln -s /host d
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_after_the_swap)
    try:
        data, _ = read_local_output(sandbox, "d/secret", 0, 100)
    except HTTPException as refused:
        assert refused.status_code == 400
        data = b""
    assert swapped, "the read never opened the path"
    assert b"HOST SECRET" not in data


def test_a_link_to_a_file_inside_outputs_is_refused_too(sandbox):
    os.symlink("d/secret", sandbox / "outputs" / "alias")
    with pytest.raises(HTTPException, match="link"):
        read_local_output(sandbox, "alias", 0, 100)
    assert read_local_output(sandbox, "d/secret", 0, 5) == (b"job's", 16)


def test_a_fifo_in_outputs_is_refused_without_blocking(sandbox):
    os.mkfifo(sandbox / "outputs" / "pipe")
    answer: list = []

    def read() -> None:
        try:
            read_local_output(sandbox, "pipe", 0, 100)
            answer.append("read")
        except HTTPException as exc:
            answer.append(exc.detail)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    stuck = reader.is_alive()
    if stuck:  # unblock the open so the test process can end
        os.close(os.open(sandbox / "outputs" / "pipe", os.O_WRONLY | os.O_NONBLOCK))
        reader.join(5)
    assert not stuck, "the read blocked on the FIFO"
    assert answer and "is not a file" in answer[0], answer


def test_a_huge_outputs_offset_is_a_400_naming_it(tmp_path):
    """``os.pread`` overflowed on ``offset=10**30``: a 500, like the logs' offset once did."""
    from dlc.api.client import ApiClient
    from dlc.api.logs import LogReader
    from dlc.api.server import ApiServer
    from dlc.errors import ApiError
    from dlc.scheduler.core.facade import SchedulerCore
    from dlc.store.sqlite import JobStore

    core = SchedulerCore(JobStore(tmp_path / "db"), resolver=lambda s: (s.image, None))
    server = ApiServer(core, LogReader(lambda: None), lambda a: None)
    server.start()
    try:
        client = ApiClient(server.url, core.store.add_token("alice"))
        with pytest.raises(ApiError, match="offset"):
            client._call("GET", f"/v1/jobs/j1/outputs?path=f&offset={10**30}")
    finally:
        server.stop()
        core.store.close()
