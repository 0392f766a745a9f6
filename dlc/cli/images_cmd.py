"""``dlc images``: the framework image catalog (list entries; check them against a driver)."""

from __future__ import annotations

import click

from dlc.cli.output import emit, output_option
from dlc.errors import DlcError
from dlc.images.catalog import load_catalog, site_catalog_path, version_key

_catalog_option = click.option(
    "--catalog",
    "catalog_path",
    metavar="FILE",
    help="Site catalog overriding the shipped one "
    "[default: $DLC_IMAGES, else /etc/dlc/images.yaml].",
)


@click.group(name="images")
def command():
    """Framework images (PyTorch, TensorFlow, ...) DLC can run, with their CUDA versions."""


@command.command(name="list")
@click.option("--framework", metavar="NAME", help="Only this framework (e.g. pytorch).")
@click.option("--json", "as_json", is_flag=True, help="Same as -o json.")
@output_option
@_catalog_option
def list_images(framework, as_json, output, catalog_path):
    """List framework versions, their images, CUDA versions and minimum drivers."""
    catalog = load_catalog(catalog_path)
    if framework:
        catalog.resolve(framework)  # unknown name -> ImageNotFound listing the known ones
    entries = catalog.entries(framework.lower() if framework else None)
    if as_json or output in ("json", "yaml"):
        emit([_row(e) for e in entries], "json" if as_json else output)
        return
    _table(
        ["framework", "version", "cuda", "rocm", "min driver", "image"],
        [
            [e.framework, e.version, e.cuda or "-", e.rocm or "-", e.min_driver or "-", e.image]
            for e in entries
        ],
    )
    site = catalog_path or site_catalog_path()
    if site:
        click.echo(f"(site catalog: {site})")


def _check_driver(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        version_key(value)
    except DlcError:
        raise DlcError(
            f"--driver: {value!r} is not a driver version; give dotted numbers as "
            "nvidia-smi prints them, e.g. 535.104.05"
        ) from None
    return value


@command.command(name="check")
@click.option(
    "--driver",
    "driver_version",
    required=True,
    metavar="VERSION",
    callback=_check_driver,
    help="NVIDIA driver version of the agent, e.g. 535.104.05.",
)
@click.option(
    "--minor-compat",
    is_flag=True,
    help="Also accept CUDA minor-version compatibility (limited: no PTX JIT).",
)
@click.option("--json", "as_json", is_flag=True, help="Same as -o json.")
@output_option
@_catalog_option
def check_images(driver_version, minor_compat, as_json, output, catalog_path):
    """Which catalog entries run on an agent with driver VERSION."""
    catalog = load_catalog(catalog_path)
    # an NVIDIA driver runs no ROCm image, whatever its version
    rows = [
        (e, e.vendor != "amd" and catalog.driver_supports(driver_version, e.cuda, minor_compat))
        for e in catalog.entries()
    ]
    if as_json or output in ("json", "yaml"):
        emit([{**_row(e), "runs": ok} for e, ok in rows], "json" if as_json else output)
        return
    _table(
        ["framework", "version", "cuda", "min driver", "runs"],
        [
            [e.framework, e.version, e.cuda or "-", e.min_driver or "-", "yes" if ok else "no"]
            for e, ok in rows
        ],
    )
    runs = sum(ok for _, ok in rows)
    click.echo(f"{runs} of {len(rows)} entries run on driver {driver_version}")


def _row(entry) -> dict:
    return {
        "framework": entry.framework,
        "version": entry.version,
        "image": entry.image,
        "cuda": entry.cuda,
        "min_driver": entry.min_driver,
        "rocm": entry.rocm,
        "vendor": entry.vendor,
    }


def _table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        click.echo("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
