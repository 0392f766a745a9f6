"""The core's many-field records are keyword-only (issue 26, "A core you can read"): a call
site names every field, so a new or moved field cannot shift values between fields."""

from __future__ import annotations

import dataclasses

import pytest

from dlc.scheduler.gangs.topology import GroupChoice
from dlc.scheduler.jobs.queue import Reservation
from dlc.scheduler.placement.consolidation import (
    AgentGpus,
    ConsolidationPlan,
    ConsolidationRequest,
    Move,
    RunningJob,
)
from dlc.scheduler.placement.decide import DecideRequest
from dlc.scheduler.placement.model import Launch
from dlc.scheduler.placement.share_hold import ShareHold
from dlc.scheduler.placement.share_placement import ShareChoice
from dlc.scheduler.tasks.draining import Drain
from dlc.scheduler.tenancy.quotas import QueueRow

RECORDS = [AgentGpus, ConsolidationPlan, ConsolidationRequest, DecideRequest, Drain, GroupChoice,
           Launch, Move, QueueRow, Reservation, RunningJob, ShareChoice, ShareHold]  # fmt: skip


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.__name__)
def test_every_field_is_named_at_the_call_site(record):
    assert all(f.kw_only for f in dataclasses.fields(record) if f.init)


def test_a_positional_launch_is_refused():
    with pytest.raises(TypeError):
        Launch("j1", "j1.0.0", 0, "a", "h", ("o",), (0,))  # type: ignore[misc]
    launch = Launch(job_id="j1", task_id="j1.0.0", rank=0, agent_id="a", hostname="h",
                    offer_ids=("o",), gpu_ids=(0,))  # fmt: skip
    assert launch.share is None and launch.policy == ""
