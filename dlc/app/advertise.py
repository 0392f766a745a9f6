"""The API URL the scheduler gives agents (``--api-advertise-url``), checked before it is used.

The API binds one address (``--api-host``) but executors on other hosts reach it at another:
through a TLS proxy's name, or this host's address on the cluster network. Executors fetch
``dlc submit --workdir`` snapshots from the advertised URL, and the Mesos UI links to it, so
an address only this host can use (127.x, ``localhost``) or no address at all (0.0.0.0) is
refused, and a loopback URL while the master (so its agents) is another host is logged as
a warning (one line at start).
"""

from __future__ import annotations

import ipaddress
import urllib.parse

from dlc.errors import DlcError

UNSPECIFIED = ("0.0.0.0", "::", "")  # noqa: S104 - names that are no address to connect to


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and 127.0.0.0/8 or ::1 literals."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def master_hosts(master: str) -> list[str]:
    """The host names in ``--master`` (``HOST:PORT``, ``http://HOST:PORT``, ``zk://H1,H2/PATH``)."""
    rest = master.split("://", 1)[1] if "://" in master else master
    hosts = rest.split("/", 1)[0].split("@")[-1]
    return [h.rsplit(":", 1)[0] if h.count(":") == 1 else h for h in hosts.split(",") if h]


def master_is_local(master: str) -> bool:
    """True when every host in ``--master`` is this host's loopback (agents beside us)."""
    hosts = master_hosts(master)
    return bool(hosts) and all(is_loopback(h) for h in hosts)


def advertised_api_url(bound_url: str, advertise_url: str | None) -> str:
    """The API URL executors and the Mesos UI get.

    Args:
        bound_url: where the API listens (``http://HOST:PORT`` of ``--api-host``).
        advertise_url: ``--api-advertise-url`` (``None``/empty: the bound URL).

    Raises:
        DlcError: the URL names no address at all (0.0.0.0), or is no http(s) URL.
    """
    url = (advertise_url or bound_url).rstrip("/")
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise DlcError(f"--api-advertise-url: {url!r} is not an http(s)://HOST[:PORT] URL")
    if parsed.hostname in UNSPECIFIED:
        option = "--api-advertise-url" if advertise_url else "--api-host"
        raise DlcError(
            f"{option}: agents cannot connect to {url} (no address); pass "
            "--api-advertise-url http(s)://HOST:PORT, the API as the agents reach it"
        )
    return url


def loopback_warning(url: str, master: str) -> str | None:
    """One line when ``url`` is loopback but ``master`` (so its agents) may be another host."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if not is_loopback(host) or master_is_local(master):
        return None
    return (
        f"the API is advertised to agents as {url}, this host's loopback, but master "
        f"{master} is not local: `dlc submit --workdir` jobs on other hosts will fail; "
        "pass --api-advertise-url http(s)://HOST:PORT"
    )
