"""The CLI's config file: named contexts, each an API address and a token, as in kubectl.

``~/.config/dlc/config.yaml`` (``$XDG_CONFIG_HOME/dlc/config.yaml``; ``$DLC_CONFIG`` names
another file)::

    current-context: prod
    contexts:
      prod:  {api: https://dlc.example.org, token-file: ~/.config/dlc/prod.token}
      local: {api: http://127.0.0.1:8642, token: 3f2a...}

What a command uses, first found wins: its ``--api``/``--token`` flags, ``$DLC_API``/``$DLC_TOKEN``,
the context named by ``--context``/``$DLC_CONTEXT``, the file's current context, the default URL.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dlc.errors import ConfigError

CONTEXT_KEYS = ("api", "token", "token-file")


def config_path() -> Path:
    """Where the config file lives (it need not exist)."""
    if os.environ.get("DLC_CONFIG"):
        return Path(os.environ["DLC_CONFIG"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "dlc" / "config.yaml"


@dataclass(frozen=True)
class Context:
    """One named context: where the API is and which token to send."""

    name: str
    api: str | None = None
    token: str | None = None
    token_file: str | None = None

    def read_token(self) -> str | None:
        """The token itself (read from ``token-file`` when that is how it is given).

        Raises:
            ConfigError: the token file cannot be read.
        """
        if self.token:
            return self.token
        if not self.token_file:
            return None
        path = Path(self.token_file).expanduser()
        try:
            return path.read_text(encoding="utf-8").strip() or None
        except OSError as exc:
            raise ConfigError(
                "token-file",
                f"{path}: {exc.strerror} (context {self.name!r}); fix the path with "
                f"`dlc login --context {self.name} --token-file FILE`",
            ) from None

    def to_dict(self) -> dict[str, str]:
        """The context as written in the file (unset keys left out)."""
        values = {"api": self.api, "token": self.token, "token-file": self.token_file}
        return {k: v for k, v in values.items() if v}


def load_config(path: Path | None = None) -> dict[str, Any]:
    """The config file's contents (an empty config when there is none).

    Raises:
        ConfigError: the file is unreadable, not YAML, or not shaped as documented.
    """
    path = path or config_path()
    if not path.exists():
        return {"contexts": {}}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            "config", f"{path}: cannot read it ({exc}); fix or remove the file"
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(
            "config", f"{path}: not valid YAML ({exc.__class__.__name__}); fix it"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("contexts", {}), dict):
        raise ConfigError(
            "config", f"{path}: expected 'current-context:' and a 'contexts:' mapping"
        )
    data.setdefault("contexts", {})
    for name, body in data["contexts"].items():
        if not isinstance(body, dict) or set(body) - set(CONTEXT_KEYS):
            raise ConfigError(
                "config", f"{path}: context {name!r} must be a mapping of {', '.join(CONTEXT_KEYS)}"
            )
    return data


def save_config(data: dict[str, Any], path: Path | None = None) -> Path:
    """Write the config file (mode 0600: it may hold tokens)."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        yaml.safe_dump(data, handle, sort_keys=False)
    os.replace(tmp, path)
    return path


def get_context(name: str | None = None, data: dict[str, Any] | None = None) -> Context | None:
    """The context ``name`` (default: ``$DLC_CONTEXT``, else the current one), or ``None``.

    Raises:
        ConfigError: a context was named that the file does not hold.
    """
    data = data if data is not None else load_config()
    chosen = name or os.environ.get("DLC_CONTEXT") or data.get("current-context")
    if not chosen:
        return None
    body = data["contexts"].get(chosen)
    if body is None:
        known = ", ".join(sorted(data["contexts"])) or "none yet"
        raise ConfigError(
            "context",
            f"{chosen!r} is not in {config_path()} (known: {known}); "
            "add it with `dlc login --context NAME --api URL`",
        )
    return Context(chosen, body.get("api"), body.get("token"), body.get("token-file"))
