"""Tenancy: who may use the cluster, how much, in which order, and who is stopped for whom.

Pure (no I/O, no clock of its own); docs/quotas.md is the user's side. The modules, by the
question each answers:

* :mod:`~dlc.scheduler.tenancy.policy`: the terms: groups, pools, quotas (guarantee and
  ceiling), per-user limits, grace period, as one :class:`~.policy.Policy` the store builds;
  :class:`~.policy.Resources`, the amounts everything here adds up.
* :mod:`~dlc.scheduler.tenancy.job_groups`: the ``(group, pool)`` a job is charged to,
  resolved once per round for the policy the round plans with.
* :mod:`~dlc.scheduler.tenancy.share_charge`: what a GPU memory share is charged, in GPUs,
  on a cluster of mixed GPU sizes.
* Admission. :mod:`~dlc.scheduler.tenancy.quotas`: at submit, :func:`~.quotas.check_submit`
  refuses what can never run (an unknown pool, more than the group's ceiling, the pool or
  the user's GPU, CPU or memory limit) against the
  :mod:`~dlc.scheduler.tenancy.admission_facts` of the current inventory version; each round,
  :func:`~.quotas.plan` admits queued jobs within guarantees, lets them borrow what no one
  else claims, and holds the rest with a reason (``dlc queue``);
  :mod:`~dlc.scheduler.tenancy.user_holdings`: what each user holds now against their
  limits, for views. Both, and elastic growth, count a user's holdings with one
  :class:`~.held.UserTally` (:mod:`~dlc.scheduler.tenancy.held`). A user's CPU and memory
  limits count each task's executor too (:func:`~.held.on_agents`, with the core's
  :class:`~dlc.scheduler.placement.inventory.Overheads`); group quotas count the ask.
* Fair order. :mod:`~dlc.scheduler.tenancy.fairness`: the groups take turns by
  dominant-resource fairness on what they borrow; :mod:`~dlc.scheduler.tenancy.fair_share`:
  decayed GPU-hours over time (the :class:`~.fair_share.UsageLedger`), which order borrowers,
  victims and users within a group when fair share is on; :mod:`~dlc.scheduler.tenancy.billing`:
  what a job is billed in them (the largest of its GPUs, CPUs and memory, in GPUs).
* Preemption. :mod:`~dlc.scheduler.tenancy.preemption`: which running jobs to stop so that a
  group gets its guarantee back, or a higher-priority job of the same group may run
  (lowest priority and youngest first, protected runtime and eviction delay per class).
  :func:`~.quotas.plan` finds *when* and *how much* (an admitted job the pool cannot hold,
  a higher-priority job of a ``preempt_within`` group); its
  :class:`~.preemption.VictimChooser` says *who* and *why*, as a
  :class:`~.preemption.VictimChoice`; the plan returns the victims as typed
  :class:`~.preemption.Preemption` decisions (job, reason, eviction delay) in its
  :class:`~.quotas.QueuePlan`, and the core carries them out.

How a round calls them: the core's tenancy component
(:class:`~dlc.scheduler.core.tenancy.TenancyOps`) makes one
:class:`~.job_groups.JobGroups` and calls :func:`~.quotas.plan` with the queue, the active
jobs, the policy, pool capacity and the fair-share tenure; the offer round places the plan's
admitted jobs in its order (:func:`~.quotas.split_by_pool` keeps a pool's agents for that
pool's jobs), and the component carries out the plan's preemptions (kill now, or after the
victim class's eviction delay) and writes the ledger.

What is not here, and why: the component itself (``core/tenancy.py``) stays beside the other
components of :class:`~dlc.scheduler.core.facade.SchedulerCore` in ``core/``: it works on the
elastic component and the core's state, which import this package, so inside it the package
and the core would import each other (the ``no-cycles`` contract of ``.importlinter``); this
package is the layer under the core. ``jobs/spec_admission.py`` checks a spec against the
operator's settings (volumes, registries, container user), not against groups or quotas, and
the job module re-exports it. ``tasks/usage.py`` is the executors' GPU readings (allocated
versus used), ``placement/round_cap.py`` bounds how many queued jobs one round considers;
neither is about who may use what. The priority classes and the group/pool name rule are spec fields
(:mod:`dlc.scheduler.jobs.spec_fields`), which this package reads.
"""
