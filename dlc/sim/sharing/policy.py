"""Which backend each agent runs, and whether tenants may mix under one MPS daemon.

Three policies are compared (docs/simulator.md, "The cost of sharing"):

- ``mps-mixed``: every agent runs MPS and any tenants' shares mix on a GPU (DLC before
  issue 27);
- ``tenancy[:F]``: DLC's rule (``share_placement.mps_tenancy``): a fraction ``F`` of the
  agents (default 0.5) runs MPS and each of their GPUs holds one tenant's shares; the other
  agents run the shim (time-slicing), where tenants mix;
- ``time-slicing``: every agent runs the shim.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlc.errors import FieldError
from dlc.sim.sharing.costs import MPS, TIME_SLICING

POLICY_NAMES = ("mps-mixed", "tenancy", "time-slicing")
DEFAULT_MPS_FRACTION = 0.5


@dataclass(frozen=True)
class BackendPolicy:
    """A backend per agent, and the tenancy rule on MPS agents."""

    name: str
    mps_fraction: float
    #: MPS GPUs hold one tenant's shares (DLC's rule since issue 27)
    tenancy: bool

    def backend_of(self, i: int) -> str:
        """Agent ``i``'s backend: MPS agents are spread evenly through the node list."""
        f = self.mps_fraction
        return MPS if int((i + 1) * f + 1e-9) > int(i * f + 1e-9) else TIME_SLICING


def parse_policy(text: str, mps_fraction: float | None = None) -> BackendPolicy:
    """``mps-mixed``, ``tenancy``, ``tenancy:0.25`` or ``time-slicing``."""
    name, _, arg = text.strip().partition(":")
    if name == "mps-mixed" and not arg:
        return BackendPolicy(text.strip(), 1.0, False)
    if name == "time-slicing" and not arg:
        return BackendPolicy(text.strip(), 0.0, False)
    if name == "tenancy":
        try:
            f = float(arg) if arg else (mps_fraction if mps_fraction is not None else 0.5)
        except ValueError:
            f = -1.0
        if not 0.0 <= f <= 1.0:
            raise FieldError("--policy", f"{text!r}: the MPS fraction must be in [0, 1]")
        return BackendPolicy(f"tenancy:{f:g}", f, True)
    raise FieldError(
        "--policy", f"{text!r} is not one of mps-mixed, tenancy[:MPS_FRACTION], time-slicing"
    )
