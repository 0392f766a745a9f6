"""Cluster simulator: replay GPU-cluster traces through placement policies.

The core (:mod:`dlc.sim.trace`, :mod:`dlc.sim.workload`, :mod:`dlc.sim.cluster`,
:mod:`dlc.sim.frag`, :mod:`dlc.sim.replay`, :mod:`dlc.sim.metrics`) is pure: it
takes parsed rows and returns numbers. Reading CSV files and writing JSON/plots
lives in :mod:`dlc.sim.io` and :mod:`dlc.sim.plot`.
"""
