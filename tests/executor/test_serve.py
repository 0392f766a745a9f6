"""``serve``: the executor's main loop stops the driver when the lifecycle says so."""

from __future__ import annotations

import threading

from dlc.executor.executor import serve
from dlc.executor.lifecycle import ExecutorLifecycle, Verdict


class FakeDriver:
    def __init__(self):
        self.aborted = False
        self.calls = []

    def start(self):
        self.calls.append("start")

    def stop_quietly(self):
        self.calls.append("stop_quietly")

    def join(self):
        self.calls.append("join")


class FakeExecutor:
    def __init__(self, lifecycle, driver):
        self.lifecycle = lifecycle
        self.driver = driver

    def shutdown(self, driver):
        driver.calls.append("shutdown")  # containers stopped and removed here


def test_done_stops_the_driver_without_a_shutdown():
    life = ExecutorLifecycle()
    life.connected()
    driver = FakeDriver()
    life.task_launched("t")
    life.update_sent("t", "TASK_FINISHED", b"u")
    threading.Timer(0.05, life.acknowledged, args=(b"u",)).start()
    assert serve(driver, FakeExecutor(life, driver), poll_s=0.01) is Verdict.DONE
    assert driver.calls == ["start", "stop_quietly", "join"]


def test_agent_gone_removes_containers_before_stopping():
    life = ExecutorLifecycle(recovery_timeout_s=0.05)
    driver = FakeDriver()
    assert serve(driver, FakeExecutor(life, driver), poll_s=0.01) is Verdict.AGENT_GONE
    assert driver.calls == ["start", "shutdown", "stop_quietly", "join"]


def test_a_driver_stopped_by_the_agent_ends_the_loop():
    life = ExecutorLifecycle()
    driver = FakeDriver()
    driver.aborted = True  # SHUTDOWN from the agent: pymesos aborted the driver
    assert serve(driver, FakeExecutor(life, driver), poll_s=0.01) is None
    # shutdown is asked again (the real one returns at once after the agent's SHUTDOWN)
    assert driver.calls == ["start", "shutdown", "join"]


class RefusedDriver(FakeDriver):
    """pymesos's I/O thread raised (``Failed with HTTP 400: Executor cannot be found``)
    and interrupted the main thread."""

    def start(self):
        super().start()
        threading.Timer(0.05, self._abort).start()

    def _abort(self):
        self.aborted = True
        import _thread

        _thread.interrupt_main()


def test_an_executor_refused_by_its_agent_removes_its_containers_at_once():
    life = ExecutorLifecycle(recovery_timeout_s=900.0)
    life.connected()
    life.task_launched("t")  # still running: nobody else will ever stop it
    driver = RefusedDriver()
    assert serve(driver, FakeExecutor(life, driver), poll_s=0.01) is None
    assert driver.calls == ["start", "shutdown", "join"]
