"""The native P2P probe: build it, run it, read its JSON, merge it into a topology.

Public interface:

* :func:`build_probe`, :func:`run_probe` - compile (``make``, needs ``nvcc``) and run
  ``native/p2p_probe``;
* :func:`parse_probe_json` - validate the probe's JSON into a :class:`ProbeResult`;
* :func:`merge_measurements` - measured bandwidth and P2P status into a
  :class:`~dlc.topology.model.Topology`;
* :func:`compare_with_nominal` - measured vs nominal rows for reports;
* :func:`measured_topology` - the one call ``dlc node-config --probe`` needs.

Importing this package runs nothing; only :mod:`dlc.probe.runner` starts processes.
"""

from dlc.probe.merge import (
    Comparison,
    compare_with_nominal,
    load_probe_json,
    measured_topology,
    merge_measurements,
)
from dlc.probe.result import ProbeDevice, ProbePair, ProbeResult, parse_probe_json
from dlc.probe.runner import build_probe, parse_size, run_probe

__all__ = [
    "Comparison",
    "ProbeDevice",
    "ProbePair",
    "ProbeResult",
    "build_probe",
    "compare_with_nominal",
    "load_probe_json",
    "measured_topology",
    "merge_measurements",
    "parse_probe_json",
    "parse_size",
    "run_probe",
]
