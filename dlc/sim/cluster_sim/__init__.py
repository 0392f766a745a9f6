"""A discrete-event simulator that drives DLC's real scheduling core through simulated Mesos.

Unlike :mod:`dlc.sim.replay` (placement functions called directly), this package runs
:class:`dlc.scheduler.core.facade.SchedulerCore` itself: its queue, quotas, borrowing, preemption,
reservations and share placement, on offers built by a simulated master with Mesos's own
resource arithmetic (:mod:`dlc.mesos.resources`, RANGES ``gpu_mem``/``gpu_core`` included),
the in-memory store and a virtual clock. ``docs/simulator.md`` ("Mesos-driven simulator").
"""
