"""One ``dlc doctor`` check's outcome (shared by :mod:`dlc.cli.doctor_cmd` and
:mod:`dlc.cli.doctor_guard`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    """One check's outcome: ``ok``, what was found, and the fix when it failed."""

    name: str
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        """``ok    driver: ...`` or ``FAIL  docker: ...; fix: ...``."""
        head = f"{'ok' if self.ok else 'FAIL':<5} {self.name}: {self.detail}"
        return head if self.ok or not self.fix else f"{head}; fix: {self.fix}"
