"""`dlc shell` refused at once (no job, a session cap) prints the API's one line, whatever the
order in which the refusal and the CLI's opening message cross (a race: it once ended in
`ConnectionClosedError` and exit code 70, "a DLC bug")."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from dlc.api.client import ApiError
from dlc.cli import shell_cmd


@pytest.fixture
def refusing_server():
    from websockets.sync.server import serve

    def handler(ws):
        ws.send(json.dumps({"error": "user alice has 1 shell/exec sessions open"}))
        ws.close(4429)

    with serve(handler, "127.0.0.1", 0) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield f"ws://127.0.0.1:{server.socket.getsockname()[1]}/v1/jobs/j1/shell"
        server.shutdown()


@pytest.mark.parametrize("delay_s", [0.0, 0.3])  # 0.3: the close arrives before the CLI sends
def test_an_immediate_refusal_is_its_one_line(refusing_server, monkeypatch, delay_s):
    import websockets.sync.client as client

    real_connect = client.connect

    def slow_connect(*args, **kwargs):
        ws = real_connect(*args, **kwargs)
        time.sleep(delay_s)
        return ws

    monkeypatch.setattr(client, "connect", slow_connect)
    with open(os.devnull) as null, pytest.raises(ApiError, match="^user alice has 1 shell"):
        # when the opening message gets through first, the CLI goes on to read stdin
        monkeypatch.setattr("sys.stdin", null)
        shell_cmd.run_session(refusing_server, "token", None)
