"""The core reads offers and starts tasks through the codec it holds: the engine's offers in
as views, engine-neutral launches out as the engine's messages, the engine's status updates in
as task updates and reconciliation requests out (the EngineCodec port of
dlc/scheduler/core/ports.py, dlc/scheduler/tasks/launch.py)."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dlc.errors import DlcError
from dlc.mesos import status as mesos_status
from dlc.mesos import task_info as mesos_task_info
from dlc.mesos.codec import MesosCodec
from dlc.mesos.offers import offer_view
from dlc.mesos.task_info import build_task_info
from dlc.scheduler.core import ports
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec, JobState
from dlc.scheduler.placement.inventory import AgentTotals
from dlc.scheduler.placement.model import OfferView, PlacementConfig
from dlc.scheduler.tasks import launch as task_launch
from dlc.scheduler.tasks.launch import TaskLaunch
from dlc.scheduler.tasks.states import TaskUpdate
from dlc.store.memory import MemoryJobStore

from ..helpers import offer

CONFIG = CoreConfig(placement=PlacementConfig("first-fit", executor_cpus=0.25))


class RecordingCodec:
    """Records every offer it decodes, agent list it decodes, launch it encodes, round it
    echoes, status update it decodes and reconciliation it writes; its views, agents and
    messages are the Mesos ones, marked as its own, and it reads ids and updates, echoes,
    reserves and writes reconciliations as the Mesos codec does."""

    def __init__(self) -> None:
        self.offers: list[str] = []
        self.tasks: list[TaskLaunch] = []
        #: the job ids of each echoed round, in launch order
        self.echoed: list[list[str]] = []
        self.keepers: list[ports.ReservationKeeper] = []
        #: each agent list it decoded, with the roles it was asked to decode it for
        self.agent_lists: list[tuple[list[Mapping[str, Any]], tuple[str, ...]]] = []
        #: the task id of each status update it decoded, and each reconciliation's tasks
        self.updates: list[str] = []
        self.reconciled: list[list[tuple[str, str]]] = []
        self._mesos = MesosCodec()

    def offer_ids(self, offer: Mapping[str, Any]) -> tuple[str | None, str | None]:
        return self._mesos.offer_ids(offer)

    def offer_inputs(self, offer: Mapping[str, Any]) -> tuple[Any, ...]:
        return self._mesos.offer_inputs(offer)

    def decode_offer(self, offer: Mapping[str, Any]) -> OfferView:
        self.offers.append(offer["id"]["value"])
        view = offer_view(offer)
        return replace(view, attributes={**view.attributes, "decoded_by": "recorder"})

    def decode_agents(self, agents, roles: tuple[str, ...]) -> list[AgentTotals]:
        agents = list(agents)
        self.agent_lists.append((agents, roles))
        return [
            replace(totals, attributes={**totals.attributes, "decoded_by": "recorder"})
            for totals in self._mesos.decode_agents(agents, roles)
        ]

    def encode(self, task: TaskLaunch) -> dict[str, Any]:
        self.tasks.append(task)
        return {**MesosCodec().encode(task), "encoded_by": "recorder"}

    def echo_round(self, offers, jobs, roles, reserver, now, role_of) -> ports.EchoedRound:
        self.echoed.append([job_id for job_id, _ in jobs])
        return self._mesos.echo_round(offers, jobs, roles, reserver, now, role_of)

    def reserver(self, idle_s: float, principal: str | None) -> ports.ReservationKeeper:
        keeper = self._mesos.reserver(idle_s, principal)
        self.keepers.append(keeper)
        return keeper

    def decode_status(self, status: Mapping[str, Any]) -> TaskUpdate:
        update = self._mesos.decode_status(status)
        self.updates.append(update.task_id)
        return update

    def reconcile_request(self, tasks: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
        tasks = list(tasks)
        self.reconciled.append(tasks)
        return self._mesos.reconcile_request(tasks)


class FlatCodec(RecordingCodec):
    """A second engine's status updates: flat dicts with no Mesos key in them."""

    def decode_status(self, status: Mapping[str, Any]) -> TaskUpdate:
        self.updates.append(status["task"])
        return TaskUpdate(
            task_id=status["task"],
            state=status["phase"],
            agent_id=status.get("node", ""),
            message=status.get("text", ""),
            from_executor=status.get("by") == "executor",
        )

    def reconcile_request(self, tasks: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
        tasks = list(tasks)
        self.reconciled.append(tasks)
        return [{"task": task, "node": agent} for task, agent in tasks]


class RoundViews:
    """A metrics sink keeping the views of each round."""

    def __init__(self) -> None:
        self.rounds: list[list[OfferView]] = []

    def record_round(self, views, received, declined, latency_s, placed) -> None:
        self.rounds.append(list(views))


def _core(codec: ports.EngineCodec | None = None, metrics: RoundViews | None = None):
    return SchedulerCore(
        MemoryJobStore(), CONFIG, lambda spec: (spec.image or "img", None), metrics=metrics,
        codec=codec,
    )  # fmt: skip


def test_the_core_launches_what_its_encoder_made_of_each_placed_task():
    encoder = RecordingCodec()
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


def test_the_core_reads_offers_through_its_codec_once_per_changed_offer():
    codec, seen = RecordingCodec(), RoundViews()
    core = _core(codec, seen)
    core.submit("alice", JobSpec.from_dict({"image": "img", "gpus": 8}))  # never fits: waits
    core.on_offers([offer("o1", "a1", [0, 1]), offer("o2", "a2", [0])])
    assert codec.offers == ["o1", "o2"]
    # the round decided on the codec's views
    assert [(v.offer_id, v.attributes["decoded_by"]) for v in seen.rounds[0]] == [
        ("o1", "recorder"),
        ("o2", "recorder"),
    ]
    # an agent offering the same again is not decoded again (the parser's cache), a changed
    # one is
    core.on_offers([offer("o3", "a1", [0, 1]), offer("o4", "a2", [0, 1])])
    assert codec.offers == ["o1", "o2", "o4"]


def test_the_core_decodes_the_engines_agents_through_its_codec():
    codec = RecordingCodec()
    config = replace(CONFIG, roles=("dlc",))
    core = SchedulerCore(
        MemoryJobStore(), config, lambda spec: (spec.image or "img", None), codec=codec
    )
    slaves = [
        {"id": "a1", "hostname": "h1", "resources": {"cpus": 8.0, "mem": 4096.0,
                                                    "gpu_ids": "{0, 1}"}},
        {"id": "a2", "hostname": "h2", "active": False},
    ]  # fmt: skip
    core.update_agents(slaves)
    # the list as the engine adapter gave it, with the core's roles
    assert codec.agent_lists == [(slaves, ("dlc",))]
    # the inventory holds what the codec made of it
    (agent,) = core.inventory.agents()
    assert (agent.agent_id, agent.attributes["decoded_by"], agent.exact) == ("a1", "recorder", True)
    assert [(a.agent_id, a.attributes["decoded_by"]) for a in core.cluster()] == [
        ("a1", "recorder")
    ]


def test_the_core_reads_status_updates_and_writes_reconciliation_through_its_codec():
    codec = FlatCodec()
    core = _core(codec)
    job = core.submit("alice", JobSpec.from_dict({"image": "img", "gpus": 1, "retries": 0}))
    core.on_offers([offer("o1", "a1", [0])])
    task_id = f"{job.job_id}.0.0"
    # the reconciliation request is the codec's, of the tasks that may be alive
    assert core.reconcile_tasks() == [{"task": task_id, "node": "a1"}]
    assert codec.reconciled == [[(task_id, "a1")]]
    core.on_status({"task": task_id, "phase": "TASK_RUNNING", "node": "a1"})
    assert core.get_job(job.job_id).state is JobState.RUNNING
    # the agent the codec read is the one checked: another agent's update is not the task's
    core.on_status({"task": task_id, "phase": "TASK_FAILED", "node": "a2", "text": "forged"})
    assert core.get_job(job.job_id).state is JobState.RUNNING
    assert core.ignored_updates.count == 1
    core.on_status({"task": task_id, "phase": "TASK_FINISHED", "node": "a1", "text": "done"})
    ended = core.get_job(job.job_id)
    assert (ended.state, ended.message) == (JobState.FINISHED, "done")
    assert codec.updates == [task_id] * 3
    assert core.reconcile_tasks() == [] and codec.reconciled[-1] == []


def test_the_mesos_codec_is_the_core_s_status_reader():
    codec = RecordingCodec()
    core = _core(codec)
    job = core.submit("alice", JobSpec.from_dict({"image": "img", "gpus": 1}))
    core.on_offers([offer("o1", "a1", [0])])
    task_id = f"{job.job_id}.0.0"
    assert core.reconcile_tasks() == [{"task_id": {"value": task_id}, "agent_id": {"value": "a1"}}]
    core.on_status({"task_id": {"value": task_id}, "agent_id": {"value": "a1"},
                    "state": "TASK_RUNNING"})  # fmt: skip
    assert codec.updates == [task_id] and core.get_job(job.job_id).state is JobState.RUNNING


def test_a_malformed_offer_is_declined_as_the_codec_refuses_it():
    core = _core(RecordingCodec())
    core.submit("alice", JobSpec.from_dict({"image": "img", "gpus": 1}))
    bad = offer("o1", "a1", [0])
    bad["resources"][0]["scalar"] = {"value": "lots"}
    assert core.on_offers([bad]).declines == ["o1"]


def test_the_mesos_codec_is_the_offer_parser_and_the_task_info_builder():
    codec = RecordingCodec()
    core = _core(codec)
    core.submit("alice", JobSpec.from_dict({"image": "img", "gpus": 1}))
    raw = offer("o1", "a1", [0])
    core.on_offers([raw])
    (task,) = codec.tasks
    assert MesosCodec().encode(task) == build_task_info(
        task.job, task.launch, task.framework_id, task.executor, task.kill_grace_s
    )
    assert MesosCodec().decode_offer(raw) == offer_view(raw)


def test_the_core_cuts_its_launches_from_the_offers_through_its_codec():
    codec = RecordingCodec()
    core = _core(codec)
    first = core.submit("alice", JobSpec.from_dict({"image": "img", "gpus": 2}))
    second = core.submit("bob", JobSpec.from_dict({"image": "img", "gpus": 1}))
    actions = core.on_offers([offer("o1", "a1", [0, 1, 2, 3])])
    # one echo per round with launches, of the placed jobs in launch order
    assert codec.echoed == [[first.job_id, second.job_id]]
    assert [ids for ids, _ in actions.accepts] == [["o1"]]
    core.on_offers([offer("o2", "a1", [3])])  # nothing placed: nothing echoed
    assert len(codec.echoed) == 1


def test_reserve_keeps_its_reservations_in_a_keeper_the_codec_made():
    codec = RecordingCodec()
    config = replace(CONFIG, reserve_idle_s=60.0, principal="dlc-principal")
    core = SchedulerCore(
        MemoryJobStore(), config, lambda spec: (spec.image or "img", None), codec=codec
    )
    assert codec.keepers == [core.state.reserver]
    core.submit("alice", JobSpec.from_dict({"image": "img", "gpus": 1}))
    actions = core.on_offers([{**offer("o1", "a1", [0, 1]), "allocation_info": {"role": "dlc"}}])
    (ops,) = actions.operations.values()
    reserved = [r for op in ops for r in op["reserve"]["resources"]]
    assert {r["name"] for r in reserved} == {"gpus", "gpu_ids"}
    assert all(
        r["reservations"] == [{"type": "DYNAMIC", "role": "dlc", "principal": "dlc-principal"}]
        for r in reserved
    )
    # a reserved GPU keeps offers coming (to give it back when idle): no suppress
    assert codec.keepers[0].holding() and not actions.suppress


def test_the_mesos_codec_echoes_only_with_a_keeper_it_made():
    class Foreign:
        def holding(self) -> bool:
            return False

    with pytest.raises(DlcError, match="reserves with its own Reserver, not Foreign"):
        MesosCodec().echo_round([offer("o1", "a1", [0])], [], None, Foreign(), 0.0, None)


@pytest.mark.parametrize(
    ("body", "ids"),
    [
        pytest.param({"id": {"value": "o1"}, "agent_id": {"value": "a1"}}, ("o1", "a1"), id="both"),
        pytest.param({"id": {"value": "o1"}}, ("o1", None), id="no-agent"),
        pytest.param({"id": {"value": "o1"}, "agent_id": "a1"}, ("o1", None), id="agent-not-dict"),
        pytest.param({"agent_id": {"value": "a1"}}, (None, "a1"), id="no-id"),
        pytest.param({"id": None}, (None, None), id="id-null"),
        pytest.param(["o1"], (None, None), id="not-a-dict"),
        pytest.param({"id": {"value": 7}, "agent_id": {"value": "a1"}}, ("7", "a1"), id="int-id"),
    ],
)
def test_the_mesos_codec_reads_an_offers_ids_or_says_which_it_lacks(body, ids):
    assert MesosCodec().offer_ids(body) == ids


def test_an_idle_round_declines_offers_by_the_ids_its_codec_reads():
    no_agent = {"id": {"value": "o2"}, "resources": []}
    no_id = {"agent_id": {"value": "a3"}, "resources": []}
    core = _core(RecordingCodec())
    assert core.on_offers([offer("o1", "a1", [0]), no_agent, no_id]).declines == ["o1", "o2"]


def test_a_round_with_work_launches_on_good_offers_and_declines_those_without_ids():
    no_agent = {"id": {"value": "o2"}, "resources": []}
    no_id = {"agent_id": {"value": "a3"}, "resources": []}
    core = _core(MesosCodec())
    job = core.submit("alice", JobSpec.from_dict({"image": "img", "gpus": 1}))
    actions = core.on_offers([no_agent, offer("o1", "a1", [0]), no_id])
    assert [(ids, len(infos)) for ids, infos in actions.accepts] == [(["o1"], 1)]
    assert actions.declines == ["o2"]
    assert core.get_job(job.job_id).state is JobState.STAGING


def test_a_core_without_a_codec_takes_the_registered_default(monkeypatch):
    mine = RecordingCodec()
    monkeypatch.setattr(ports, "_default_codec", mine)
    core = _core()
    core.submit("alice", JobSpec.from_dict({"image": "img", "gpus": 1}))
    core.on_offers([offer("o1", "a1", [0])])
    assert (mine.offers, len(mine.tasks)) == (["o1"], 1)


def test_a_core_with_no_codec_anywhere_fails_at_once(monkeypatch):
    monkeypatch.setattr(ports, "_default_codec", None)
    with pytest.raises(DlcError, match=r"no engine codec: pass SchedulerCore\(codec=...\)"):
        _core()


def test_set_default_codec_returns_the_one_it_replaced(monkeypatch):
    monkeypatch.setattr(ports, "_default_codec", None)
    mine = RecordingCodec()
    assert ports.set_default_codec(mine) is None
    assert ports.default_codec() is mine
    assert ports.set_default_codec(None) is mine


def _task_info_literals(path: Path) -> list[str]:
    """Dict literals in ``path`` shaped like a Mesos TaskInfo (task id, agent id and
    resources), an ExecutorInfo (executor id and command) or a kill policy."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Dict):
            continue
        keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
        task_info = {"task_id", "agent_id", "resources"} <= keys or "kill_policy" in keys
        if task_info or {"executor_id", "command"} <= keys:
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_module_of_the_core_writes_a_task_info():
    core = sorted(Path(task_launch.__file__).parents[1].rglob("*.py"))
    assert core and [hit for path in core for hit in _task_info_literals(path)] == []
    # the detector sees the Mesos adapter's builder, so an empty answer above means something
    assert _task_info_literals(Path(mesos_task_info.__file__))


def _engine_id_reads(path: Path) -> list[str]:
    """Where ``path`` names Mesos's id wrapping (``{"value": ...}``) or an update's source: the
    string constants a core reading TaskStatus or writing reconciliation JSON would hold."""
    return [
        f"{path.name}:{node.lineno}"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and node.value in ("value", "SOURCE_EXECUTOR")
    ]


def test_no_module_of_the_core_reads_a_task_status():
    core = sorted(Path(task_launch.__file__).parents[1].rglob("*.py"))
    assert core and [hit for path in core for hit in _engine_id_reads(path)] == []
    # the detector sees the Mesos adapter's reader, so an empty answer above means something
    assert _engine_id_reads(Path(mesos_status.__file__))


def test_the_cores_codec_is_fixed_for_its_life():
    # the offer parser and the idle offers hold the codec's methods: a swap would split
    # parsing (old codec) from encoding (new codec)
    mine = RecordingCodec()
    core = _core(mine)
    assert core.state.codec is mine
    with pytest.raises(AttributeError):
        core.state.codec = MesosCodec()  # type: ignore[misc]
