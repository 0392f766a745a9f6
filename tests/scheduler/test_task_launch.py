"""The core starts tasks through the encoder it holds: engine-neutral launches in, the
engine's messages out (dlc/scheduler/task_launch.py, the TaskEncoder port)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from dlc.errors import DlcError
from dlc.mesos import task_info as mesos_task_info
from dlc.mesos.task_info import MesosTaskEncoder, build_task_info
from dlc.scheduler import ports, task_launch
from dlc.scheduler.core import CoreConfig, SchedulerCore
from dlc.scheduler.jobs import JobSpec, JobState
from dlc.scheduler.placement import PlacementConfig
from dlc.scheduler.task_launch import TaskLaunch
from dlc.store.memory import MemoryJobStore

from .helpers import offer

CONFIG = CoreConfig(placement=PlacementConfig("first-fit", executor_cpus=0.25))


class RecordingEncoder:
    """Records every launch it is asked to encode; its messages are the Mesos ones marked
    as its own (the echo from the offers still reads a TaskInfo's resources)."""

    def __init__(self) -> None:
        self.tasks: list[TaskLaunch] = []

    def encode(self, task: TaskLaunch) -> dict[str, Any]:
        self.tasks.append(task)
        return {**MesosTaskEncoder().encode(task), "encoded_by": "recorder"}


def _core(encoder: ports.TaskEncoder | None = None) -> SchedulerCore:
    return SchedulerCore(
        MemoryJobStore(), CONFIG, lambda spec: (spec.image or "img", None), encoder=encoder
    )


def test_the_core_launches_what_its_encoder_made_of_each_placed_task():
    encoder = RecordingEncoder()
    core = _core(encoder)
    core.set_framework_id("fw-1")
    first = core.submit("alice", JobSpec.from_dict({"image": "img", "gpus": 2}))
    second = core.submit("bob", JobSpec.from_dict({"image": "img", "gpus": 1}))
    actions = core.on_offers([offer("o1", "a1", [0, 1, 2, 3])])

    infos = [info for _, batch in actions.accepts for info in batch]
    assert [info["encoded_by"] for info in infos] == ["recorder", "recorder"]
    # one launch per task, as decided: the job, its placement and the core's settings
    assert [(t.job.job_id, t.launch.job_id) for t in encoder.tasks] == [
        (first.job_id, first.job_id),
        (second.job_id, second.job_id),
    ]
    assert [t.launch.task_id for t in encoder.tasks] == [i["task_id"]["value"] for i in infos]
    assert [t.launch.gpu_ids for t in encoder.tasks] == [(0, 1), (2,)]
    for task in encoder.tasks:
        assert task.executor is core.config.executor and task.executor.cpus == 0.25
        assert (task.framework_id, task.kill_grace_s) == ("fw-1", None)
        assert task.job.spec.image == "img"
    staged = core.store.get_job(first.job_id)
    assert staged.state is JobState.STAGING
    assert staged.tasks[0].task_id == encoder.tasks[0].launch.task_id


def test_the_mesos_encoder_is_the_task_info_builder():
    encoder = RecordingEncoder()
    core = _core(encoder)
    core.submit("alice", JobSpec.from_dict({"image": "img", "gpus": 1}))
    core.on_offers([offer("o1", "a1", [0])])
    (task,) = encoder.tasks
    assert MesosTaskEncoder().encode(task) == build_task_info(
        task.job, task.launch, task.framework_id, task.executor, task.kill_grace_s
    )


def test_a_core_without_an_encoder_takes_the_registered_default(monkeypatch):
    mine = RecordingEncoder()
    monkeypatch.setattr(ports, "_default_encoder", mine)
    core = _core()
    core.submit("alice", JobSpec.from_dict({"image": "img", "gpus": 1}))
    core.on_offers([offer("o1", "a1", [0])])
    assert len(mine.tasks) == 1


def test_a_core_with_no_encoder_anywhere_fails_at_once(monkeypatch):
    monkeypatch.setattr(ports, "_default_encoder", None)
    with pytest.raises(DlcError, match=r"no task encoder: pass SchedulerCore\(encoder=...\)"):
        _core()


def test_set_default_encoder_returns_the_one_it_replaced(monkeypatch):
    monkeypatch.setattr(ports, "_default_encoder", None)
    mine = RecordingEncoder()
    assert ports.set_default_encoder(mine) is None
    assert ports.default_encoder() is mine
    assert ports.set_default_encoder(None) is mine


def _task_info_literals(path: Path) -> list[str]:
    """Dict literals in ``path`` shaped like a Mesos TaskInfo (task id, agent id and
    resources), an ExecutorInfo (executor id and command) or a kill policy."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Dict):
            continue
        keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
        if {"task_id", "agent_id", "resources"} <= keys or {"executor_id", "command"} <= keys:
            found.append(f"{path.name}:{node.lineno}")
        elif "kill_policy" in keys:
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_module_of_the_core_writes_a_task_info():
    core = sorted(Path(task_launch.__file__).parent.rglob("*.py"))
    assert core and [hit for path in core for hit in _task_info_literals(path)] == []
    # the detector sees the Mesos adapter's builder, so an empty answer above means something
    assert _task_info_literals(Path(mesos_task_info.__file__))
