"""The orphan reaper (dlc.executor.reaper.watch) against a fake engine."""

from __future__ import annotations

from dlc.executor.reaper import watch
from dlc.executor.runtime import ContainerInfo


class LateEngine:
    """A create the dead executor sent completes only after the reaper's first look."""

    def __init__(self):
        self.looks = 0
        self.removed: list[str] = []

    def list_containers(self, labels):
        self.looks += 1
        if self.looks == 2 and not self.removed:
            return [ContainerInfo("c1", "dlc-j1.0.0", "created", dict(labels))]
        return []

    def remove_all(self, containers, grace_s):
        self.removed += [c.id for c in containers]
        return [c.id for c in containers]


def test_a_container_created_after_the_executor_died_is_removed_too():
    engine = LateEngine()
    dead_pid = 2**22 + 12345  # above pid_max: no such process
    assert watch(dead_pid, "fw", "ex", late_s=1.5, runtime=engine) == 1
    assert engine.removed == ["c1"] and engine.looks >= 2


def test_an_orderly_end_needs_no_second_look(tmp_path):
    engine = LateEngine()
    done = tmp_path / "dlc-executor.done"
    done.write_text("")
    assert watch(2**22 + 12345, "fw", "ex", late_s=30, runtime=engine, done_path=str(done)) == 0
    assert engine.looks == 1
