"""When the executor ends: last task terminal and acknowledged, ack timeout, agent gone."""

from __future__ import annotations

import pytest

from dlc.errors import DlcError
from dlc.executor.executor import recovery_timeout_from_env
from dlc.executor.lifecycle import ExecutorLifecycle, Verdict


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


def connected(clock, **kw):
    life = ExecutorLifecycle(clock=clock, **kw)
    life.connected()
    return life


def test_no_task_yet_keeps_running(clock):
    assert connected(clock).verdict() is None


def test_ends_once_the_terminal_update_is_acknowledged(clock):
    life = connected(clock)
    life.task_launched("t1")
    life.update_sent("t1", "TASK_RUNNING", b"u1")
    assert life.verdict() is None
    life.update_sent("t1", "TASK_FINISHED", b"u2")
    assert life.verdict() is None  # waiting for the ack
    life.acknowledged(b"u1")
    assert life.verdict() is None
    life.acknowledged(b"u2")
    assert life.verdict() is Verdict.DONE


def test_waits_for_the_last_of_several_tasks(clock):
    life = connected(clock)
    life.task_launched("t1")
    life.task_launched("t2")
    life.update_sent("t1", "TASK_FAILED", b"a")
    life.acknowledged(b"a")
    assert life.verdict() is None  # t2 still runs
    life.update_sent("t2", "TASK_KILLED", b"b")
    life.acknowledged(b"b")
    assert life.verdict() is Verdict.DONE


def test_a_launch_after_a_finished_task_keeps_it_alive(clock):
    life = connected(clock)
    life.task_launched("t1")
    life.update_sent("t1", "TASK_FINISHED", b"a")
    life.task_launched("t2")
    life.acknowledged(b"a")
    assert life.verdict() is None


def test_a_lost_ack_ends_it_after_the_ack_timeout(clock):
    life = connected(clock, ack_timeout_s=20)
    life.task_launched("t1")
    life.update_sent("t1", "TASK_FINISHED", b"a")
    clock.now += 19
    assert life.verdict() is None
    clock.now += 2
    assert life.verdict() is Verdict.ACK_TIMEOUT


def test_agent_gone_past_the_recovery_timeout(clock):
    life = connected(clock, recovery_timeout_s=30)
    life.task_launched("t1")
    life.disconnected()
    clock.now += 29
    assert life.verdict() is None
    life.connected()  # the agent came back in time
    clock.now += 100
    assert life.verdict() is None
    life.disconnected()
    clock.now += 31
    assert life.verdict() is Verdict.AGENT_GONE


def test_never_subscribing_counts_as_agent_gone(clock):
    life = ExecutorLifecycle(clock=clock, recovery_timeout_s=5)
    clock.now += 6
    assert life.verdict() is Verdict.AGENT_GONE


def test_without_recovery_timeout_a_disconnection_alone_never_decides(clock):
    life = ExecutorLifecycle(clock=clock, recovery_timeout_s=None)
    clock.now += 1e6
    assert life.verdict() is None


@pytest.mark.parametrize(
    ("env", "seconds"),
    [
        pytest.param({}, None, id="no-checkpoint-var"),
        pytest.param({"MESOS_CHECKPOINT": "0", "MESOS_RECOVERY_TIMEOUT": "5secs"}, None, id="0"),
        pytest.param({"MESOS_CHECKPOINT": "1"}, 900.0, id="mesos-default"),
        pytest.param({"MESOS_CHECKPOINT": "1", "MESOS_RECOVERY_TIMEOUT": "2mins"}, 120.0, id="env"),
    ],
)
def test_recovery_timeout_from_env(env, seconds):
    assert recovery_timeout_from_env(env) == seconds


def test_bad_recovery_timeout_names_the_variable():
    env = {"MESOS_CHECKPOINT": "1", "MESOS_RECOVERY_TIMEOUT": "soon"}
    with pytest.raises(DlcError, match="^MESOS_RECOVERY_TIMEOUT: 'soon'"):
        recovery_timeout_from_env(env)
