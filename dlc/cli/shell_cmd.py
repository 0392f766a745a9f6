"""``dlc shell JOB``: an interactive terminal in your running job's container.

The path is ``dlc exec``'s (API, then the task's executor, then the engine's exec API), over
a websocket so keystrokes and output stream both ways. On a terminal, stdin goes raw (every
key, Ctrl-C included, reaches the container's shell) and window resizes follow; from a pipe
the lines are sent as typed and end-of-input becomes Ctrl-D. Exits with the shell's code.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import threading

import click

from dlc.api.client import ApiClient, ApiError, quote_job_id
from dlc.cli.client_opts import api_options


@click.command("shell")
@click.argument("job_id")
@api_options
@click.option("--command", "shell_cmd", default=None, metavar="PROG",
              help="Program to run instead of bash (else sh), e.g. --command python3.")  # fmt: skip
def command(job_id, api, token, shell_cmd):
    """Open an interactive shell in your running job's container: dlc shell JOB"""
    client = ApiClient(api, token)
    path = f"/v1/jobs/{quote_job_id(job_id)}/shell"
    url = "ws" + client.url[len("http") :] + path
    sys.exit(run_session(url, client.token, [shell_cmd] if shell_cmd else None))


def run_session(url: str, token: str | None, argv: list[str] | None) -> int:
    """Connect, relay this terminal, and return the remote exit code."""
    from websockets.exceptions import WebSocketException
    from websockets.sync.client import connect

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        ws = connect(url, additional_headers=headers, open_timeout=10, max_size=1 << 20)
    except (OSError, WebSocketException) as exc:
        raise ApiError(f"cannot open a shell at {url} ({exc}); is the scheduler running?") from None
    rows, cols = _size()
    with ws:
        opening = json.dumps({"rows": rows, "cols": cols, **({"argv": argv} if argv else {})})
        try:
            ws.send(opening)
        except WebSocketException:  # refused at once (no job, a session cap): read why below
            return _pump_output(ws)
        tty = os.isatty(sys.stdin.fileno())
        restore = _raw_mode(ws) if tty else None
        try:
            threading.Thread(target=_pump_stdin, args=(ws, tty), daemon=True).start()
            return _pump_output(ws)
        finally:
            if restore:
                restore()


def _pump_output(ws) -> int:
    from websockets.exceptions import ConnectionClosed

    out = sys.stdout.buffer
    try:
        for message in ws:
            if isinstance(message, bytes):
                out.write(message)
                out.flush()
                continue
            control = json.loads(message)
            if "error" in control:
                raise ApiError(str(control["error"]))
            if "exit_code" in control:
                return int(control["exit_code"])
    except ConnectionClosed:
        pass
    raise ApiError("the shell's connection closed before the shell ended")


def _pump_stdin(ws, tty: bool) -> None:
    from websockets.exceptions import ConnectionClosed

    fd = sys.stdin.fileno()
    try:
        while data := os.read(fd, 4096):
            ws.send(data)
        if not tty:
            ws.send(b"\x04")  # end of the piped input: Ctrl-D to the remote terminal
    except (ConnectionClosed, OSError):
        pass


def _size() -> tuple[int, int]:
    size = shutil.get_terminal_size((0, 0))
    return size.lines, size.columns


def _raw_mode(ws):
    """Put the local terminal in raw mode; follow resizes. Returns the undo."""
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)

    def on_resize(*_):
        rows, cols = _size()
        # the session may have ended already; a resize is optional
        with contextlib.suppress(Exception):
            ws.send(json.dumps({"rows": rows, "cols": cols}))

    previous = signal.signal(signal.SIGWINCH, on_resize)

    def restore() -> None:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        signal.signal(signal.SIGWINCH, previous)

    return restore
