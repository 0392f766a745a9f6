"""The scheduling core: :class:`~dlc.scheduler.core.facade.SchedulerCore` and its components.

:mod:`~dlc.scheduler.core.facade` is the thin locked facade (jobs in, Mesos actions out);
each component is one module built on the shared :class:`~dlc.scheduler.core.state.CoreState`
(:mod:`~dlc.scheduler.core.state` says why components): ``offers`` (the offer round),
``status`` (task updates), ``requests`` (submit, kill), ``admin`` (tokens, tenancy settings),
``views`` (reads for the API and dashboard), ``usage``, ``elastic``, ``consolidation``,
``tenancy`` (quotas and preemption carried out), ``share_hold``; ``config`` (``Actions``,
``CoreConfig``). Beside them what the state holds: ``job_book``, ``mix_book``, ``offer_views``,
and ``ports`` (what the core needs from the store, metrics and engine, as protocols).
"""
