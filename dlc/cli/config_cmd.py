"""``dlc config``: the CLI's contexts (``get-contexts``, ``use-context``, ``delete-context``)."""

from __future__ import annotations

import click

from dlc.cli.config_file import config_path, get_context, load_config, save_config
from dlc.cli.output import emit, format_table, output_option
from dlc.errors import ConfigError


@click.group("config")
def command() -> None:
    """Show and switch the contexts of ~/.config/dlc/config.yaml (see `dlc login`)."""


@command.command("get-contexts")
@output_option
def get_contexts(output: str) -> None:
    """List the contexts; the current one is starred (tokens are never printed)."""
    data = load_config()
    current = data.get("current-context")
    items = []
    for name, body in sorted(data["contexts"].items()):
        token = "file " + body["token-file"] if body.get("token-file") else (
            "inline" if body.get("token") else "none")  # fmt: skip
        items.append({"name": name, "current": name == current, "api": body.get("api"),
                      "token": token})  # fmt: skip
    if output in ("json", "yaml"):
        emit(items, output)
        return
    rows = [("*" if i["current"] else "", i["name"], i["api"] or "-", i["token"]) for i in items]
    for line in format_table(("CURRENT", "NAME", "API", "TOKEN"), rows):
        click.echo(line)


@command.command("current-context")
def current_context() -> None:
    """Print the current context's name."""
    found = get_context()
    if found is None:
        raise ConfigError("context", f"none set in {config_path()}; run `dlc login --api URL`")
    click.echo(found.name)


@command.command("use-context")
@click.argument("name")
def use_context(name: str) -> None:
    """Make NAME the current context."""
    data = load_config()
    get_context(name, data)  # names the known ones when NAME is not among them
    data["current-context"] = name
    save_config(data)
    click.echo(f"current context: {name}")


@command.command("delete-context")
@click.argument("name")
def delete_context(name: str) -> None:
    """Remove context NAME from the config file."""
    data = load_config()
    get_context(name, data)
    del data["contexts"][name]
    if data.get("current-context") == name:
        data.pop("current-context")
    save_config(data)
    click.echo(f"deleted context {name}")


@command.command("path")
def path() -> None:
    """Print where the config file is ($DLC_CONFIG, else ~/.config/dlc/config.yaml)."""
    click.echo(str(config_path()))
