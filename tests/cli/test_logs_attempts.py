"""``dlc logs`` of a job queued again after a failed or preempted attempt points at the
earlier attempt's output instead of only saying "no logs yet"."""

from __future__ import annotations

from click.testing import CliRunner

from dlc.api.logs import LogReader
from dlc.api.server import ApiServer
from dlc.cli.main import cli
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore
from tests.scheduler.helpers import offer


def test_a_requeued_job_points_at_the_previous_attempts_output(tmp_path):
    store = JobStore(tmp_path / "db")
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")),
                         lambda spec: (spec.image, None))  # fmt: skip
    server = ApiServer(core, LogReader(lambda: core.framework_id), lambda actions: None)
    server.start()
    try:
        job = core.submit("alice", JobSpec.from_dict({"image": "b", "gpus": 1, "retries": 1}))
        [(_, [info])] = core.on_offers([offer("o1", "a1", gpus=[0])]).accepts
        core.on_status({"task_id": info["task_id"], "state": "TASK_FAILED",
                        "agent_id": {"value": "a1"}, "message": "exit 1"})  # fmt: skip
        assert core.store.get_job(job.job_id).attempt == 1
        env = {"DLC_API": server.url, "DLC_TOKEN": store.add_token("alice")}
        result = CliRunner().invoke(cli, ["logs", job.job_id], env=env)
        assert result.exit_code == 3
        assert result.output == (
            f"Error: job {job.job_id} is queued: no logs yet (dlc logs -f {job.job_id} waits "
            f"for them); attempt 0 printed: dlc logs --attempt 0 {job.job_id}\n"
        )
    finally:
        server.stop()
