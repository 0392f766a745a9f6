"""The emulator's ``GET /`` page: what the emulator is and what it holds right now.

The real master serves the Mesos web UI at ``/``; the emulator has none, so a browser
pointed at it (``dlc local`` prints its address) gets this plain page instead: the
agents, the frameworks with a link to each one's ``webui_url`` (DLC's dashboard), and
the tasks. Built from the same ``/master/state`` dict the JSON endpoint serves.
"""

from __future__ import annotations

from html import escape
from typing import Any

_STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:70em}"
    "table{border-collapse:collapse;margin-bottom:1.5em}"
    "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}"
)


def _table(headers: list[str], rows: list[list[str]], empty: str) -> str:
    """An HTML table; ``rows`` hold already-escaped cell HTML."""
    if not rows:
        return f"<p><em>{escape(empty)}</em></p>"
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _resources(summary: dict[str, Any]) -> str:
    parts = [f"{k}:{v}" for k, v in sorted(summary.items()) if k not in ("ports",)]
    return escape(" ".join(parts))


def _link(url: str) -> str:
    if not url.startswith(("http://", "https://")):
        return escape(url) or "-"
    return f'<a href="{escape(url, quote=True)}">{escape(url)}</a>'


def render_index(state: dict[str, Any]) -> str:
    """The HTML page for ``state`` (a :func:`~dlc.mesos.emulator.state.master_state` dict)."""
    agents = [
        [escape(a["id"]), escape(a["hostname"]), _resources(a["resources"]),
         _resources(a["used_resources"]), escape(" ".join(f"{k}:{v}" for k, v in sorted(
             a["attributes"].items()) if k != "dlc_topo"))]
        for a in state["slaves"]
    ]  # fmt: skip
    frameworks, tasks = [], []
    for fw in state["frameworks"] + state["completed_frameworks"]:
        status = "connected" if fw["connected"] else "disconnected"
        frameworks.append(
            [f'<span id="framework-{escape(fw["id"], quote=True)}">{escape(fw["id"])}</span>',
             escape(fw["name"]), status, _link(fw["webui_url"]), str(len(fw["tasks"]))]
        )  # fmt: skip
        for task in fw["tasks"] + fw["completed_tasks"]:
            tasks.append(
                [escape(task["id"]), escape(task["name"]), escape(fw["name"]),
                 escape(task["state"]), escape(task["slave_id"]), _resources(task["resources"])]
            )  # fmt: skip
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>DLC Mesos emulator</title><style>{_STYLE}</style></head><body>"
        "<h1>DLC's Mesos emulator</h1>"
        f"<p>This is not Apache Mesos and has no Mesos web UI: it is the in-process emulator "
        f"of <code>dlc local</code>, speaking the v1 scheduler and executor APIs (Mesos "
        f"{escape(state['version'])} subset). Master id <code>{escape(state['id'])}</code>; "
        "JSON state at <a href='/master/state'>/master/state</a>. Follow a framework's "
        "web UI link for DLC's dashboard.</p>"
        "<h2>Agents</h2>"
        + _table(["id", "hostname", "resources", "used", "attributes"], agents, "no agents")
        + "<h2>Frameworks</h2>"
        + _table(["id", "name", "status", "web UI", "tasks"], frameworks, "no frameworks yet")
        + "<h2>Tasks</h2>"
        + _table(["id", "name", "framework", "state", "agent", "resources"], tasks, "no tasks")
        + "</body></html>"
    )
