"""The core's reads for the API and the dashboard, and what it knows of the agents.

:class:`Views`, a component of :class:`~dlc.scheduler.core.facade.SchedulerCore` (why components:
:mod:`~dlc.scheduler.core.state`). The API's routes and the dashboard never open the store (the
``core-not-store`` import contract, and ``tests/api/test_no_core_store.py`` for ``core.store``):
they read jobs, history, tokens, the queue and the cluster's picture through these methods
(:class:`~dlc.scheduler.core.ports.JobReader`).
"""

from __future__ import annotations

from typing import Any

from dlc.scheduler.core.state import CoreState
from dlc.scheduler.jobs.job import Job
from dlc.scheduler.placement.cluster import AgentView, Holder


class Views:
    """Queries: jobs, history, tokens, queue reasons, agents and their GPUs."""

    def __init__(self, state: CoreState) -> None:
        self.state = state

    def queue_reason(self, job_id: str) -> str | None:
        """``position 3 of 7; waiting behind job j1 which reserves agent a1`` for a queued
        job (``None`` when it is not queued). Reads the job book only: no wait for an
        offer round (the reason is the latest round's)."""
        book = self.state.book
        with book.lock:
            if job_id not in book.queued:
                return None
            order = [j.job_id for j in book.ordered()]
            reason = self.state.reasons.get(job_id) or "waiting for the first offers"
            return f"position {order.index(job_id) + 1} of {len(order)}; {reason}"

    def get_job(self, job_id: str) -> Job:
        """One job, whoever owns it (from memory while queued or active): for a caller that
        authorizes another way, such as an executor's job secret. No wait for an offer round.

        Raises:
            JobNotFound: no such job.
        """
        return self.state.book.find(job_id) or self.state.store.get_job(job_id)

    def all_jobs(self) -> list[Job]:
        """Every stored job, oldest first (the dashboard's and the metrics' view)."""
        return self.state.store.list_jobs()

    def job_history(self, job_id: str) -> list[tuple[float, str, str]]:
        """``(time, state, message)`` entries of a job, oldest first."""
        return self.state.store.history(job_id)

    def state_events(self) -> list[tuple[str, float, str]]:
        """``(job_id, time, state)`` of every job's history, in time order."""
        return self.state.store.state_events()

    def authenticate(self, token: str) -> tuple[str, bool, int | None] | None:
        """``(user, is_admin, max_priority)`` for a valid API token, else ``None``."""
        return self.state.store.authenticate(token)

    def user_for_token(self, token: str) -> tuple[str, bool] | None:
        """``(user, is_admin)`` for a valid API token, else ``None``."""
        return self.state.store.user_for_token(token)

    def update_agents(self, slaves: list[dict[str, Any]]) -> None:
        """Take agent totals from the master (``GET /master/slaves`` ``slaves`` list)."""
        state = self.state
        with state.lock:
            state.catch_up_offers()  # in the order they came: the master's totals replace them
            state.inventory.replace_agents(state.codec.decode_agents(slaves, state.config.roles))
            for job in state.active.values():  # keep what DLC's own tasks prove exists
                for task in job.tasks:
                    state.inventory.note_gpus(task.agent_id, task.gpu_ids, task.hostname)

    def cluster(self) -> list[AgentView]:
        """The cluster's one picture: every known agent, each GPU with its facts and state
        (free, taken by which task, or draining), by hostname."""
        state = self.state
        with state.lock:
            taken: dict[str, dict[int, Holder]] = {}
            for _, task, holder in state.running_tasks():
                for gpu in task.gpu_ids:
                    taken.setdefault(task.agent_id, {})[gpu] = holder
            state.catch_up_offers()
            draining = {a.agent_id: state.drains.held(a.agent_id) for a in state.inventory.agents()}
            return state.inventory.view(taken, draining)

    def cluster_agent(self, agent_id: str) -> AgentView | None:
        """One agent of :meth:`cluster`, or ``None``."""
        return next((a for a in self.cluster() if a.agent_id == agent_id), None)

    def max_agent_gpus(self) -> int:
        """Most GPUs any known agent has (0 when no agent is known yet)."""
        with self.state.lock:
            return self.state.inventory.max_gpus()

    def note_agent(self, agent_id: str, gpu_ids: set[int]) -> None:
        """Record GPUs an agent has (lower bound) for admission."""
        with self.state.lock:
            self.state.inventory.note_gpus(agent_id, gpu_ids)

    def draining_gpus(self, agent_id: str) -> frozenset[int]:
        """GPUs of an agent held back until an ended task is confirmed gone."""
        with self.state.lock:
            return self.state.drains.held(agent_id)
