"""Which backend serves which GPU vendor: the one place a new vendor is registered.

Backends load lazily (by module path) so that importing the registry pulls in no vendor
tool, and a host without one vendor's software still serves the other's GPUs.
"""

from __future__ import annotations

import importlib

from dlc.devices.base import DeviceBackend
from dlc.errors import DlcError

#: vendor -> module defining ``BACKEND`` (adding a vendor: one folder + one line here)
BACKENDS: dict[str, str] = {
    "nvidia": "dlc.devices.nvidia.backend",
    "amd": "dlc.devices.amd.backend",
}


def backend_for(vendor: str) -> DeviceBackend:
    """The backend of ``vendor`` (``"nvidia"``, ``"amd"``).

    Raises:
        DlcError: no backend is registered for that vendor (one line naming the known ones).
    """
    module = BACKENDS.get((vendor or "").lower())
    if module is None:
        known = ", ".join(sorted(BACKENDS))
        raise DlcError(f"gpu_vendor: no device backend for {vendor!r}; known: {known}")
    return importlib.import_module(module).BACKEND
