"""The image catalog: framework versions -> image references, CUDA versions and driver floors.

The shipped catalog is ``catalog.yaml`` beside this module. A site adds or overrides entries
with a file of the same layout (its own registry or mirror), named by ``extra_path``, else by
``$DLC_IMAGES``, else ``/etc/dlc/images.yaml`` when it exists. Later files win entry by entry.

ROCm (AMD) images live under ``<framework>-rocm`` names and carry a ``rocm`` version instead
of ``cuda``; an entry's :attr:`ImageEntry.vendor` says which GPUs it runs on, and
:meth:`Catalog.resolve` with ``vendor="amd"`` turns ``pytorch:2.6`` into ``pytorch-rocm:2.6``.
ROCm rule: AMD supports a kernel driver with the user space of its own release and up to two
releases either side, so :meth:`Catalog.rocm_supports` compares positions in ``rocm_releases``.

Driver rule (what the scheduler uses): a job runs on an agent whose driver is at least the
minimum that NVIDIA lists for the image's CUDA version (the toolkit's own driver). CUDA
minor-version compatibility (any 12.x on >= 525.60.13) is *not* used by default, because it
disables PTX JIT of newer PTX, which framework wheels rely on for GPUs newer than their build;
:func:`driver_supports` takes ``minor_compat=True`` for sites that accept those limits.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from dlc.errors import DlcError, ImageNotFound

SITE_CATALOG = Path("/etc/dlc/images.yaml")
ENV_VAR = "DLC_IMAGES"


@dataclass(frozen=True)
class ImageEntry:
    """One framework version a user can ask for.

    Attributes:
        framework: framework name, e.g. ``"pytorch"``.
        version: full version, e.g. ``"2.3.1"``.
        image: image reference the executor runs.
        cuda: CUDA version inside the image (``"12.1"``), or ``None`` for a CPU-only image.
        min_driver: minimum NVIDIA Linux driver for ``cuda`` (``None`` for CPU images).
        rocm: ROCm version inside an AMD image (``"6.4"``), else ``None``.
    """

    framework: str
    version: str
    image: str
    cuda: str | None
    min_driver: str | None
    rocm: str | None = None

    @property
    def vendor(self) -> str | None:
        """The GPU vendor the image needs: ``amd`` (ROCm), ``nvidia`` (CUDA), ``None`` (CPU)."""
        if self.rocm:
            return "amd"
        return "nvidia" if self.cuda else None

    @property
    def spec(self) -> str:
        """``framework:version``."""
        return f"{self.framework}:{self.version}"


def version_key(version: str) -> tuple[int, ...]:
    """Sort key of a dotted version (``"550.54.14"`` -> ``(550, 54, 14)``).

    Raises:
        DlcError: a part is not a number.
    """
    try:
        return tuple(int(part) for part in version.strip().split("."))
    except ValueError:
        raise DlcError(f"version {version!r} is not dotted numbers (e.g. 550.54.14)") from None


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A PyYAML error as one short line: ``"<problem> at line N"``."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    return f"{problem} at line {mark.line + 1}" if mark is not None else problem


class Catalog:
    """Framework images and CUDA driver floors (build it with :func:`load_catalog`)."""

    def __init__(
        self,
        entries: Iterable[ImageEntry],
        cuda_min_driver: Mapping[str, str],
        minor_compat_floor: Mapping[str, str],
        rocm_releases: Iterable[str] = (),
    ):
        self.cuda_min_driver = dict(cuda_min_driver)
        self.minor_compat_floor = dict(minor_compat_floor)
        self.rocm_releases = [str(r) for r in rocm_releases]
        self._entries: dict[str, list[ImageEntry]] = {}
        for entry in entries:
            self._entries.setdefault(entry.framework, []).append(entry)
        for versions in self._entries.values():
            versions.sort(key=lambda e: version_key(e.version))

    def frameworks(self) -> list[str]:
        """Known framework names, sorted."""
        return sorted(self._entries)

    def entries(self, framework: str | None = None) -> list[ImageEntry]:
        """All entries (of one framework), oldest version first."""
        names = [framework] if framework else self.frameworks()
        return [e for name in names for e in self._entries.get(name, [])]

    def resolve(self, framework_spec: str, vendor: str | None = None) -> ImageEntry:
        """The entry for ``"pytorch"``, ``"pytorch:2.3"`` or ``"pytorch:2.3.1"``.

        A bare name is the newest version; a prefix picks the newest version it matches
        (``2.3`` matches ``2.3.1``, not ``2.30.0``). ``vendor="amd"`` reads ``pytorch`` as
        its ROCm build ``pytorch-rocm`` when the catalog has one.

        Raises:
            ImageNotFound: unknown framework or version (the message lists the known ones),
                or the framework's images are for another GPU vendor than ``vendor``.
        """
        name, _, wanted = framework_spec.strip().partition(":")
        name = asked = name.lower()
        if vendor == "amd" and not name.endswith("-rocm") and f"{name}-rocm" in self._entries:
            name = f"{name}-rocm"
        if vendor == "nvidia" and name.endswith("-rocm"):
            raise ImageNotFound(
                f"gpu_vendor: {name} images are built for AMD ROCm, not NVIDIA; ask for "
                f"--framework {name.removesuffix('-rocm')} or --gpu-vendor amd"
            )
        versions = self._entries.get(name)
        if not versions:
            known = ", ".join(self.frameworks()) or "none"
            raise ImageNotFound(
                f"framework: {name!r} is not in the image catalog (known: {known}); pass one "
                "of them as NAME:VERSION (`dlc images list` shows the versions)"
            )
        if not wanted:
            return versions[-1]
        want = version_key(wanted)
        matches = [e for e in versions if version_key(e.version)[: len(want)] == want]
        if not matches:
            known = ", ".join(e.version for e in versions)
            cuda = self._cuda_only(asked, want) if name != asked else None
            if cuda is not None:  # e.g. tensorflow:2.13 --gpu-vendor amd: only a CUDA build
                raise ImageNotFound(
                    f"gpu_vendor: {asked}:{wanted} is built for NVIDIA (CUDA {cuda}) only, not "
                    f"AMD; pick a ROCm build ({name} {known}) or --gpu-vendor nvidia"
                )
            raise ImageNotFound(
                f"framework: {name}:{wanted} is not in the image catalog (known {name} "
                f"versions: {known}); pass one of them as {name}:VERSION"
            )
        return matches[-1]

    def _cuda_only(self, name: str, want: tuple) -> str | None:
        """The CUDA version of ``name``'s newest build matching ``want``, if it has one."""
        found = [
            e for e in self._entries.get(name, ()) if version_key(e.version)[: len(want)] == want
        ]
        return (found[-1].cuda or "") if found else None

    def driver_supports(self, driver_version: str, cuda: str | None, minor_compat=False) -> bool:
        """Whether an agent's driver runs images built for ``cuda``.

        Args:
            driver_version: the agent's NVIDIA driver, e.g. ``"535.104.05"``.
            cuda: CUDA version of the image; ``None`` (CPU image) always runs.
            minor_compat: also accept drivers that only meet the CUDA minor-version
                compatibility floor of ``cuda``'s major release.

        Raises:
            DlcError: ``cuda`` is not in the driver table, or a version is malformed.
        """
        if cuda is None:
            return True
        floor = self.cuda_min_driver.get(cuda)
        if floor is None:
            known = ", ".join(sorted(self.cuda_min_driver, key=version_key))
            raise DlcError(f"cuda: no driver floor known for CUDA {cuda} (known: {known})")
        if minor_compat:
            floor = min(
                floor, self.minor_compat_floor.get(cuda.split(".")[0], floor), key=version_key
            )
        return version_key(driver_version) >= version_key(floor)

    def rocm_supports(self, agent_rocm: str, image_rocm: str) -> bool:
        """Whether an agent whose ROCm driver release is ``agent_rocm`` runs ``image_rocm``.

        AMD supports a kernel-mode driver with user space up to two releases older or newer
        (:attr:`rocm_releases` gives the order). Releases are compared as ``major.minor``.

        Raises:
            DlcError: either version is not in ``rocm_releases``.
        """
        order = self.rocm_releases

        def place(version: str) -> int:
            short = ".".join(version.strip().split(".")[:2])
            if short not in order:
                raise DlcError(f"rocm: {version} is not a known ROCm release ({', '.join(order)})")
            return order.index(short)

        return abs(place(agent_rocm) - place(image_rocm)) <= 2


def _read_yaml(path: Path) -> dict:
    try:
        body = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise DlcError(f"image catalog {path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise DlcError(f"image catalog {path}: not UTF-8 text; give a YAML catalog") from None
    except yaml.YAMLError as exc:
        raise DlcError(f"image catalog {path}: not valid YAML ({yaml_problem(exc)})") from None
    if not isinstance(body, dict):
        raise DlcError(f"image catalog {path}: top level must be a mapping")
    return body


def _merge(base: dict, extra: dict, source: str) -> None:
    for key in ("cuda_min_driver", "minor_compat_floor"):
        base.setdefault(key, {}).update({str(k): str(v) for k, v in (extra.get(key) or {}).items()})
    if extra.get("rocm_releases"):
        base["rocm_releases"] = [str(r) for r in extra["rocm_releases"]]
    for name, versions in (extra.get("frameworks") or {}).items():
        if not isinstance(versions, dict):
            raise DlcError(
                f"image catalog {source}: frameworks.{name} must map versions to entries"
            )
        target = base.setdefault("frameworks", {}).setdefault(str(name).lower(), {})
        for version, entry in versions.items():
            if not isinstance(entry, dict) or "image" not in entry:
                raise DlcError(
                    f"image catalog {source}: frameworks.{name}.{version} needs an 'image' field"
                )
            target[str(version)] = entry


def _build(body: dict, source: str) -> Catalog:
    drivers = body.get("cuda_min_driver", {})
    releases = [str(r) for r in body.get("rocm_releases") or ()]
    entries = []
    for name, versions in body.get("frameworks", {}).items():
        for version, raw in versions.items():
            version_key(version)
            cuda = None if raw.get("cuda") in (None, "none") else str(raw["cuda"])
            if cuda is not None and cuda not in drivers:
                raise DlcError(
                    f"image catalog {source}: frameworks.{name}.{version}.cuda {cuda} has no "
                    "entry in cuda_min_driver; add one"
                )
            rocm = None if raw.get("rocm") in (None, "none") else str(raw["rocm"])
            if rocm is not None and (cuda is not None or rocm not in releases):
                raise DlcError(
                    f"image catalog {source}: frameworks.{name}.{version}.rocm {rocm} must be "
                    "one of rocm_releases, on an entry without cuda"
                )
            entries.append(
                ImageEntry(
                    name,
                    version,
                    str(raw["image"]),
                    cuda,
                    drivers.get(cuda) if cuda else None,
                    rocm,
                )
            )
    return Catalog(entries, drivers, body.get("minor_compat_floor", {}), releases)


def site_catalog_path() -> Path | None:
    """The site override file in effect: ``$DLC_IMAGES``, else ``/etc/dlc/images.yaml``."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    return SITE_CATALOG if SITE_CATALOG.exists() else None


def load_catalog(extra_path: str | os.PathLike | None = None) -> Catalog:
    """The shipped catalog merged with the site's overrides.

    Args:
        extra_path: override file; default :func:`site_catalog_path`.

    Raises:
        DlcError: an override file is unreadable or malformed (message names file and field).
    """
    shipped = resources.files("dlc.images").joinpath("catalog.yaml").read_text()
    body: dict = {}
    _merge(body, yaml.safe_load(shipped), "catalog.yaml")
    path = Path(extra_path) if extra_path else site_catalog_path()
    source = "catalog.yaml"
    if path is not None:
        _merge(body, _read_yaml(path), str(path))
        source = str(path)
    return _build(body, source)


@functools.lru_cache(maxsize=8)
def _cached(path: str | None, mtime_ns: int) -> Catalog:
    return load_catalog(path)


def current_catalog(extra_path: str | os.PathLike | None = None) -> Catalog:
    """:func:`load_catalog`, cached until the override file changes (the scheduler asks often)."""
    path = Path(extra_path) if extra_path else site_catalog_path()
    try:
        mtime = path.stat().st_mtime_ns if path else 0
    except OSError:
        mtime = -1  # load_catalog reports the unreadable file
    return _cached(str(path) if path else None, mtime)


def resolve(
    framework_spec: str, extra_path: str | os.PathLike | None = None, vendor: str | None = None
) -> ImageEntry:
    """Shortcut: ``current_catalog(extra_path).resolve(framework_spec, vendor)``."""
    return current_catalog(extra_path).resolve(framework_spec, vendor)


def rocm_supports(agent_rocm: str, image_rocm: str) -> bool:
    """Shortcut on the shipped + site catalog; see :meth:`Catalog.rocm_supports`."""
    return current_catalog().rocm_supports(agent_rocm, image_rocm)


def driver_supports(driver_version: str, cuda_version: str | None, minor_compat=False) -> bool:
    """Shortcut on the shipped + site catalog; see :meth:`Catalog.driver_supports`."""
    return current_catalog().driver_supports(driver_version, cuda_version, minor_compat)
