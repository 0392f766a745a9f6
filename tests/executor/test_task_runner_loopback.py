"""TaskRunner runs the loopback guard before every host-network container (finding 59)."""

from __future__ import annotations

from dlc.executor.loopback_guard import GuardMode, LoopbackGuard

from .test_task_runner import data, make


class Nft:
    """A stand-in ``nft``: records its calls, answers with ``code``."""

    def __init__(self, code: int = 0, out: str = ""):
        self.code, self.out, self.calls = code, out, []
        self.runtime = None
        self.creates_before: list[int] = []

    def __call__(self, argv, stdin):
        self.calls.append(list(argv))
        if self.runtime is not None:
            self.creates_before.append(sum(c[0] == "create" for c in self.runtime.calls))
        return self.code, self.out


def test_a_gang_task_installs_the_guard_before_its_container_is_created(tmp_path):
    nft = Nft()
    runner, runtime, sink = make(tmp_path, loopback_guard=LoopbackGuard(GuardMode.ENFORCE, run=nft))
    nft.runtime = runtime
    runner.launch("t1", data(network="host"))
    runner.join(5)
    assert nft.calls == [["nft", "-f", "-"]]
    assert nft.creates_before == [0]  # before the container existed
    assert sink.states()[-1] == "TASK_FINISHED"


def test_the_executors_host_network_setting_counts_too(tmp_path):
    nft = Nft()
    guard = LoopbackGuard(GuardMode.ENFORCE, run=nft)
    runner, _, _ = make(tmp_path, loopback_guard=guard, network_mode="host")
    runner.launch("t1", data())
    runner.join(5)
    assert nft.calls == [["nft", "-f", "-"]]


def test_an_enforced_guard_that_cannot_be_installed_fails_the_task_without_a_container(tmp_path):
    nft = Nft(1, "Error: Could not process rule: Operation not permitted")
    runner, runtime, sink = make(tmp_path, loopback_guard=LoopbackGuard(GuardMode.ENFORCE, run=nft))
    runner.launch("t1", data(network="host"))
    runner.join(5)
    _, state, message, reason, _ = sink.last()
    assert state == "TASK_FAILED" and reason == "REASON_CONTAINER_LAUNCH_FAILED"
    assert "cannot install the loopback guard" in message
    assert not [c for c in runtime.calls if c[0] == "create"]


def test_bridge_tasks_leave_the_firewall_alone(tmp_path):
    nft = Nft()
    runner, _, sink = make(tmp_path, loopback_guard=LoopbackGuard(GuardMode.ENFORCE, run=nft))
    runner.launch("t1", data())
    runner.join(5)
    assert nft.calls == [] and sink.states()[-1] == "TASK_FINISHED"
