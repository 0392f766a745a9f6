"""The core's user requests: submit (admission) and kills.

:class:`Requests`, a component of :class:`~dlc.scheduler.core.facade.SchedulerCore` (why components:
:mod:`~dlc.scheduler.core.state`). Admission refuses, with a one-line error, what no known agent
could ever run, a priority above the caller's grant, a user's queue past its cap and what the
tenancy policy forbids; a kill is stored before it is acknowledged.
"""

from __future__ import annotations

from dataclasses import replace

from dlc.errors import JobNotFound, JobSpecError, LimitReached
from dlc.scheduler.core.config import LIVE_STATES, Actions, default_resolver, image_vendor
from dlc.scheduler.core.state import CoreState, task_ended
from dlc.scheduler.core.tenancy import TenancyOps
from dlc.scheduler.jobs.job import (
    Job,
    JobSpec,
    JobState,
    check_container_user,
    check_registry,
    check_volumes,
)
from dlc.scheduler.tenancy.quotas import check_submit


class Requests:
    """What users ask of the core: submit a job, kill one or many.

    Args:
        state: the core's shared state.
        tenancy_ops: the admission facts and the policy a submit is checked against.
    """

    def __init__(self, state: CoreState, tenancy_ops: TenancyOps) -> None:
        self.state = state
        self.tenancy_ops = tenancy_ops

    def submit(
        self, user: str, spec: JobSpec, max_priority: int | None = None, admin: bool = False
    ) -> Job:
        """Validate, resolve the image, check it could ever run, and queue a job.

        Args:
            user: the owner.
            spec: the validated request.
            max_priority: the highest priority this caller was granted (``None``: the
                configured default for users or admins).
            admin: whether the caller is an admin (picks the default grant).

        Raises:
            JobSpecError, ImageNotFound: the spec cannot run here; the message says why.
        """
        state = self.state
        check_volumes(spec, state.config.allowed_volumes, user)
        self._check_priority(spec, max_priority, admin)
        check_container_user(spec, state.config.executor.policy)
        vendor, rocm = image_vendor(spec, use_catalog=state.resolver is default_resolver)
        if vendor and spec.gpu_vendor and vendor != spec.gpu_vendor:
            raise JobSpecError(
                "gpu_vendor",
                f"{spec.framework or spec.image} runs on {vendor} GPUs, not {spec.gpu_vendor}; "
                f"drop --gpu-vendor or pick a {spec.gpu_vendor} image",
            )
        image, cuda = state.resolver(spec)
        check_registry(spec, image, state.config.executor.policy.allowed_registries)
        spec = replace(spec, image=image, cuda_version=cuda or spec.cuda_version)
        spec = replace(spec, gpu_vendor=spec.gpu_vendor or vendor, rocm_version=rocm or None)
        # the agents as the last offer round left them: no wait for a round in progress
        facts = self.tenancy_ops.admission_facts()
        facts.inventory.check(spec)
        check_submit(state.tenancy, user, spec, facts.capacity, facts.sizes,
                     facts.inventory.overheads)  # fmt: skip
        # only the book's lock (the next offer round sees the job); the store names it
        book = state.book
        job = Job("", user, spec)
        return book.add(job, room=lambda: self._check_queue_room(user, admin), stamp=True)

    def _check_queue_room(self, user: str, admin: bool) -> None:
        cap = self.state.config.max_queued_per_user
        if not cap or admin:
            return
        queued = self.state.book.queued_count(user)
        if queued >= cap:
            raise LimitReached(
                f"{user} already has {queued} jobs queued, the most one user may queue "
                f"(--max-queued-per-user {cap}); wait for some to start, or kill some with "
                "`dlc kill --all --state queued`"
            )

    def _check_priority(self, spec: JobSpec, max_priority: int | None, admin: bool) -> None:
        limit = max_priority
        if limit is None:
            config = self.state.config
            limit = config.admin_max_priority if admin else config.default_max_priority
        if limit is not None and spec.priority > limit:
            raise JobSpecError(
                "priority",
                f"{spec.priority} is above your limit {limit}; "
                f"use --priority {limit} or lower, or ask an admin",
            )

    def kill(self, job_id: str, user: str, admin: bool = False) -> tuple[Job, Actions]:
        """Kill a job the caller owns (an admin may kill any).

        The kill is stored before this returns (and so before the caller is told), and
        re-sent (:meth:`pending_kills`) until every task of the job is over.

        Raises:
            JobNotFound: no such job visible to the caller.
        """
        state = self.state
        book = state.book
        with book.lock:  # a queued job: the book alone, no wait for an offer round
            job = book.queued.get(job_id)
            if job is not None:
                if not admin and job.user != user:
                    raise JobNotFound(f"no job {job_id}; list your jobs with `dlc jobs`")
                job = replace(job, state=JobState.KILLED, kill_requested=True, message="killed")
                return book.save(job) or job, Actions()
        with state.lock:  # a running job (or one an offer round was launching)
            job = state.visible_job(job_id, user, admin)
            actions = Actions()
            if job.state.terminal:
                return job, actions
            if job.state is JobState.QUEUED:
                job = state.save(
                    replace(job, state=JobState.KILLED, kill_requested=True, message="killed")
                )
                return job, actions
            job = state.save(
                replace(job, kill_requested=True, message=f"kill requested by {user}"),
                event="kill requested",
            )
            actions.kills = [(t.task_id, t.agent_id) for t in job.tasks if not task_ended(t)]
            return job, actions

    def kill_all(
        self,
        user: str,
        admin: bool = False,
        owner: str | None = "",
        states: frozenset[JobState] = LIVE_STATES,
    ) -> tuple[list[Job], Actions]:
        """Kill every live job of ``owner`` in ``states`` (``dlc kill --all``).

        Args:
            user, admin: the caller. A user reaches only their own jobs, whatever ``owner``.
            owner: whose jobs: ``""`` the caller's, a user name, or ``None`` everyone's
                (admins only).
            states: which of the live states (queued, staging, running, preempted).

        Returns:
            the jobs as stored after the kill, and the task kills to send.
        """
        if not admin or owner == "":
            owner = user
        chosen = [
            j.job_id
            for j in self.state.book.live()
            if (owner is None or j.user == owner) and j.state in states and not j.kill_requested
        ]
        killed, actions = [], Actions()
        for job_id in chosen:  # each a kill of its own (a queued one waits for no round)
            job, more = self.kill(job_id, user, admin)
            killed.append(job)
            actions.kills.extend(more.kills)
        return killed, actions

    def jobs_page(self, user: str, admin: bool, limit: int, before: str | None = None) -> list[Job]:
        """A page of the caller's jobs (all jobs for an admin), newest first, older than
        job ``before`` (which the caller must be able to see).

        Raises:
            JobNotFound: ``before`` is not a job the caller may see.
        """
        if before is not None:
            self.state.visible_job(before, user, admin)
        return self.state.store.list_jobs_page(None if admin else user, limit, before)
