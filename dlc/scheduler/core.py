"""The scheduler's brain: jobs in, Mesos actions out, no pymesos inside.

:class:`SchedulerCore` owns the queue, calls :func:`~dlc.scheduler.placement.place`
on offers, turns status updates into job states (with retries), and answers
with :class:`Actions` (accept / decline / kill / revive / suppress) that the
framework adapter carries out on the driver. Tests and the benchmark drive it
with plain dicts.

Ordering that makes restarts safe: a job's tasks are saved as *staging* before
the ACCEPT is sent, so a scheduler that dies in between finds them on restart,
reconciles them, and re-queues a job whose task the master never saw (reason
``REASON_RECONCILIATION``) instead of launching anything twice.

Other rules (``docs/scheduler.md`` has the whole story):

* admission refuses what no known agent could ever run (:mod:`~dlc.scheduler.inventory`)
  and a priority above the caller's grant;
* queued and active jobs live in memory (loaded once from the store), so an offer
  round costs the same with 20,000 finished jobs as with none;
* two locks: the core's, which offer rounds, status updates and kills of running jobs
  take (they stay serialised with each other), and the job book's
  (:mod:`~dlc.scheduler.job_book`), which alone is enough to submit, to kill a queued job
  and to read jobs, so none of those waits for an offer round. A round decides on the
  queue as it began and applies under the book's lock (a job killed meanwhile is not
  launched); admission reads facts frozen per inventory version
  (:mod:`~dlc.scheduler.tenancy.admission_facts`). Lock order: core, book, store;
* no job blocks the queue: a big job reserves a few agents for a bounded time
  (:mod:`~dlc.scheduler.queue`), and every waiting job has a reason;
* a kill is stored before it is acknowledged and re-sent until the task is over;
* a task that ended without proof its container stopped keeps its GPUs out of
  offers until that proof or a timeout (:mod:`~dlc.scheduler.draining`);
* ``TASK_UNREACHABLE`` is not an end: the job stays running until the master says.

The class is composed of mixins, one concern per module (``core_state``, ``core_tenancy``,
``core_requests``, ``core_offers``, ``core_status``, ``core_views``, ``core_usage``,
``core_admin``) over a job book (``job_book``: jobs, queue, store write-through); why
mixins, and which module holds what, is in :mod:`~dlc.scheduler.core_state`. Callers import
:class:`SchedulerCore`, :class:`CoreConfig` and :class:`Actions` from here.
"""

from __future__ import annotations

from dlc.scheduler.core_admin import AdminMixin
from dlc.scheduler.core_config import (
    LIVE_STATES,
    Actions,
    CoreConfig,
    ImageResolver,
    default_resolver,
)
from dlc.scheduler.core_offers import OfferRoundMixin
from dlc.scheduler.core_requests import RequestsMixin
from dlc.scheduler.core_status import StatusMixin
from dlc.scheduler.core_usage import UsageMixin
from dlc.scheduler.core_views import ViewsMixin

__all__ = [
    "LIVE_STATES",
    "Actions",
    "CoreConfig",
    "ImageResolver",
    "SchedulerCore",
    "default_resolver",
]


class SchedulerCore(
    RequestsMixin, OfferRoundMixin, StatusMixin, ViewsMixin, UsageMixin, AdminMixin
):
    """Thread-safe job lifecycle and placement on top of a :class:`JobStore`.

    Built as :class:`~dlc.scheduler.core_state.CoreState` is (its docstring lists the
    arguments); each mixin holds one concern of the core.
    """
