"""Docker image references: the engine's grammar, the registry host, the registry allow-list.

The grammar is the one of ``github.com/distribution/reference`` (``reference.go``)::

    reference := name [ ":" tag ] [ "@" digest ]
    name      := [ domain "/" ] path-component [ "/" path-component ]*
    domain    := domain-component [ "." domain-component ]* [ ":" port ]
    path-component := [a-z0-9]+ ( ( [._] | "__" | "-"+ ) [a-z0-9]+ )*
    tag       := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
    digest    := algorithm ":" hex{32,}

The first component is a registry host when it contains ``.`` or ``:`` or is ``localhost``
in any case (Docker's ``splitDockerDomain``); otherwise the image is on Docker Hub,
``docker.io``. Host names are compared lowercase (``LOCALHOST:5000`` is ``localhost:5000``,
which the engine reaches too). Docker also takes any other uppercase first component
(``UPPER/x``) for a host; DLC refuses it as a malformed Hub name, the stricter reading.
Pure functions, no I/O: the scheduler checks at submit, the executor again on the agent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dlc.errors import DlcError

#: Docker Hub's canonical registry name (``index.docker.io`` and ``registry-1`` are aliases)
DOCKER_HUB = "docker.io"
_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})
#: the name part (registry + path) may be at most this long (Docker's NameTotalLengthMax)
NAME_MAX = 255

_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_RE = re.compile(rf"^{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?$")
_PATH_COMPONENT_RE = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$")


class ImageReferenceError(DlcError):
    """An image reference does not follow Docker's grammar (the message says which part)."""


@dataclass(frozen=True)
class ImageReference:
    """A parsed image reference.

    Attributes:
        registry: registry host (``docker.io`` for Docker Hub names), with its port if any.
        path: repository path in the registry (``pytorch/pytorch``).
        tag: the tag, or ``None``.
        digest: ``sha256:...``, or ``None``.
    """

    registry: str
    path: str
    tag: str | None = None
    digest: str | None = None


def parse_reference(text: str) -> ImageReference:
    """Parse ``text`` by Docker's reference grammar.

    Raises:
        ImageReferenceError: which part is wrong (one line, no traceback-worthy text).
    """
    if not isinstance(text, str) or not text:
        raise ImageReferenceError("the image reference is empty")
    name, digest = text, None
    if "@" in name:
        name, digest = name.split("@", 1)
        if not _DIGEST_RE.match(digest):
            raise ImageReferenceError("the digest after '@' must be ALGORITHM:HEX (sha256:...)")
    tag = None
    head, slash, last = name.rpartition("/")
    if ":" in last:
        last, tag = last.split(":", 1)
        if not _TAG_RE.match(tag):
            raise ImageReferenceError(
                "the tag after ':' must be 1-128 of letters, digits, '_', '.', '-'"
            )
        name = f"{head}{slash}{last}"
    if len(name) > NAME_MAX:
        raise ImageReferenceError(f"the image name is longer than {NAME_MAX} characters")
    registry, path = split_registry(name)
    if registry != DOCKER_HUB and not _DOMAIN_RE.match(registry):
        raise ImageReferenceError(f"{registry[:80]!r} is not a registry HOST[:PORT]")
    if not all(_PATH_COMPONENT_RE.match(part) for part in path.split("/")):
        raise ImageReferenceError(
            "the repository name must be lowercase letters and digits separated by "
            "'/', '.', '_', '__' or '-' (no spaces, ';' or uppercase)"
        )
    return ImageReference(registry, path, tag, digest)


def split_registry(name: str) -> tuple[str, str]:
    """``(registry, path)`` of an image name without tag (Docker's ``splitDockerDomain``)."""
    first, sep, rest = name.partition("/")
    if sep and ("." in first or ":" in first or first.lower() == "localhost"):
        first = first.lower()  # a host name: the allow-list is compared lowercase too
        registry = DOCKER_HUB if first in _HUB_ALIASES else first
        if registry == DOCKER_HUB and "/" not in rest:
            rest = f"library/{rest}"
        return registry, rest
    return DOCKER_HUB, name if sep else f"library/{name}"


def normalize_registry(host: str) -> str:
    """An allow-list entry as compared: lowercase, Hub aliases folded into ``docker.io``."""
    host = host.strip().lower().rstrip("/")
    return DOCKER_HUB if host in _HUB_ALIASES else host


def registry_allowed(image: str, allowed: tuple[str, ...]) -> str | None:
    """``None`` when ``image`` may be pulled under ``allowed`` (empty: any), else the reason.

    Raises:
        ImageReferenceError: the reference itself is malformed.
    """
    registry = parse_reference(image).registry
    if not allowed or registry in {normalize_registry(a) for a in allowed}:
        return None
    return (
        f"image {image} comes from registry {registry}, which is not allowed here "
        f"(allowed: {', '.join(allowed)}); use an image from one of them"
    )
