"""A usage report travels as a framework message: executor -> agent -> master -> scheduler.

The same test on the emulator and on the real Mesos 1.11 master: a custom executor sends a
report through DLC's own :class:`~dlc.executor.executor.DriverSink` (``message``), and the
scheduler receives the bytes unchanged, decodable by
:func:`dlc.scheduler.tasks.usage.decode_report`.
"""

from __future__ import annotations

import queue
import textwrap
from pathlib import Path

import pytest

from dlc.scheduler.tasks.usage import decode_report
from tests.contract.test_emulator_contract import (
    GPU_TASK,
    NO_FILTER,
    executor_info,
    new_id,
    task_info,
)

EXECUTOR_SOURCE = textwrap.dedent(
    """
    import threading, time
    from dlc.executor.executor import DriverSink
    from dlc.mesos import import_pymesos
    from dlc.mesos.executor_endpoint import make_executor_driver
    from dlc.scheduler.tasks.usage import GpuUsage, encode_report

    pymesos = import_pymesos()

    class Executor(pymesos.Executor):
        def launchTask(self, driver, task):
            def run():
                task_id = task["task_id"]["value"]
                driver.sendStatusUpdate({"task_id": task["task_id"], "state": "TASK_RUNNING"})
                sink = DriverSink()
                sink.driver = driver
                reading = GpuUsage(0, 63.0, 71, 1542, 81559, 1542, 6, 1700000000.0)
                sink.message(encode_report({task_id: [reading]}))
                time.sleep(1)
                driver.sendStatusUpdate({"task_id": task["task_id"], "state": "TASK_FINISHED"})
                time.sleep(1)
                driver.stop()

            threading.Thread(target=run, daemon=True).start()

        def shutdown(self, driver):
            driver.stop()

    make_executor_driver(Executor()).run()
    """
)


@pytest.fixture
def usage_executor(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("executor") / "usage_executor.py"
    path.write_text(EXECUTOR_SOURCE)
    return path


def test_usage_report_reaches_the_scheduler_as_a_framework_message(harness, usage_executor) -> None:
    framework = harness()
    messages: queue.Queue = queue.Queue()
    framework.recorder.frameworkMessage = lambda driver, executor_id, agent_id, data: messages.put(
        (executor_id["value"], agent_id["value"], data)
    )
    offer = framework.offer()
    task_id = new_id("usage")
    executor = executor_info(usage_executor)
    framework.driver.launchTasks(
        offer["id"], [task_info(offer, task_id, executor=executor, **GPU_TASK)], NO_FILTER
    )
    assert framework.update(task_id, timeout=30)["state"] == "TASK_RUNNING"
    executor_id, agent_id, data = messages.get(timeout=15)
    assert executor_id == executor["executor_id"]["value"]
    assert agent_id == offer["agent_id"]["value"]
    (reading,) = decode_report(data, agent_id)
    assert reading.task_id == task_id
    assert (reading.gpus[0].util_pct, reading.gpus[0].mem_used_mib) == (63.0, 1542)
    assert framework.update(task_id)["state"] == "TASK_FINISHED"
