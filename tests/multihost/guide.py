"""docs/install.md as a script: its ```sh dlc-test:HOST blocks, rewritten to run in a test root.

The guide's commands are run as written, with only these changes (docs/install.md says so):
the system paths move under a temporary root, ``sudo`` goes (the test is root already), and the
lines that need a real systemd host or an editor are skipped (the test starts each service from
its installed unit and edits the settings file itself). Everything else is kept verbatim.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "install.md"
FENCE = re.compile(r"^```sh dlc-test:(?P<host>[\w-]+)\n(?P<body>.*?)^```$", re.M | re.S)
#: system paths of the guide -> folders under the test root (longest first)
PATHS = ("/etc/systemd/system", "/usr/local/bin", "/opt/dlc", "/etc/dlc", "/var/lib/dlc")
#: commands that need a real systemd host, an editor or real users: the test does their part
SKIPPED = ("systemctl", "useradd", "chown", "chgrp", "sudoedit")


@dataclass(frozen=True)
class Block:
    """One tagged shell block of the guide."""

    host: str
    lines: tuple[str, ...]


def blocks(text: str | None = None) -> list[Block]:
    """Every ``dlc-test:`` block of the guide, in order."""
    text = GUIDE.read_text() if text is None else text
    return [
        Block(m["host"], tuple(x for x in m["body"].splitlines() if x.strip()))
        for m in FENCE.finditer(text)
    ]


def block(host: str) -> Block:
    """The one block for ``host`` (the test fails loudly when the guide lost it)."""
    found = [b for b in blocks() if b.host == host]
    assert len(found) == 1, f"docs/install.md must have one ```sh dlc-test:{host} block"
    return found[0]


def relocate(text: str, root: Path) -> str:
    """``text`` with the guide's system paths moved under ``root``."""
    for path in PATHS:
        text = re.sub(rf"(?<![\w/]){re.escape(path)}", str(root) + path, text)
    return text


def script(found: Block, root: Path, site_packages: str) -> str:
    """A bash script of the block's lines, relocated, without sudo and the skipped commands.

    ``site_packages``: the dependencies' folder a new venv gets through a ``.pth`` file, so
    that ``pip install --find-links dist dlc`` runs offline (``--no-index``): only DLC and
    ``http-parser`` come from ``dist/``, the third-party packages are already there.
    """
    out = ["set -euo pipefail"]
    for line in found.lines:
        line = re.sub(r"\bsudo (-u \w+ )?", "", line)
        words = shlex.split(line.strip("() "), comments=True) or [""]
        if words[0] in SKIPPED:
            out.append(f"# skipped: {line}")
            continue
        line = relocate(line, root)
        line = re.sub(r"\bpip install ", "pip install -q --no-index ", line)
        out.append(line)
        venv = re.search(r"python3 -m venv (\S+)", line)
        if venv:
            pth = Path(venv[1]) / "lib" / "python3.11" / "site-packages" / "_deps.pth"
            out.append(f"echo {shlex.quote(site_packages)} > {shlex.quote(str(pth))}")
    return "\n".join(out) + "\n"


def exec_start(unit: Path) -> list[str]:
    """The argv of a unit's ``ExecStart=`` (continuation lines joined, ``$$`` made ``$`` as
    systemd does; its ``$NAME`` substitution is left to the shell, which sees the same
    values in its environment)."""
    text = unit.read_text().replace("\\\n", " ")
    line = next(x for x in text.splitlines() if x.startswith("ExecStart="))
    return [word.replace("$$", "$") for word in shlex.split(line.removeprefix("ExecStart="))]


def env_file(path: Path, **changes: str) -> dict[str, str]:
    """``KEY=VALUE`` lines of a settings file, after writing ``changes`` into it (the edit
    the guide asks the operator to make)."""
    lines = path.read_text().splitlines()
    values: dict[str, str] = {}
    kept = []
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and not line.startswith("#") and key in changes:
            continue
        kept.append(line)
        if sep and not line.startswith("#"):
            values[key] = value
    kept += [f"{k}={v}" for k, v in changes.items()]
    path.write_text("\n".join(kept) + "\n")
    return {**values, **changes}
