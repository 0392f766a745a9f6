"""Sharing-cost simulator: policies compared on work delivered, not GPUs allocated.

:mod:`~dlc.sim.sharing.costs` (measured throughput per backend, fault blast radius),
:mod:`~dlc.sim.sharing.policy` (backend per agent, the tenancy rule),
:mod:`~dlc.sim.sharing.workload` (openb shapes and lengths as timed jobs),
:mod:`~dlc.sim.sharing.cluster` (placement), :mod:`~dlc.sim.sharing.engine` (the event loop)
are pure; :mod:`~dlc.sim.sharing.runs` reads the trace and runs policies x seeds.
"""
