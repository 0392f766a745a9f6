"""FrameworkInfo roles (MULTI_ROLE) and the ``--role`` checks."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from dlc.cli.main import cli
from dlc.errors import ConfigError
from dlc.mesos.framework import FrameworkConfig, check_roles, framework_info


def test_several_roles_subscribe_multi_role_with_refinement():
    info = framework_info(FrameworkConfig("m:5050", user="u", roles=("dlc", "eng/dlc")), None)
    assert "role" not in info
    assert info["roles"] == ["dlc", "eng/dlc"]
    assert info["capabilities"] == [
        {"type": "GPU_RESOURCES"}, {"type": "PARTITION_AWARE"},
        {"type": "MULTI_ROLE"}, {"type": "RESERVATION_REFINEMENT"},
    ]  # fmt: skip


def test_one_named_role_is_multi_role_too_and_the_default_stays_plain():
    assert framework_info(FrameworkConfig("m", user="u", role="dlc"), None)["roles"] == ["dlc"]
    plain = framework_info(FrameworkConfig("m", user="u"), None)
    assert plain["role"] == "*" and "roles" not in plain


@pytest.mark.parametrize("good", [("dlc",), ("eng/dlc", "batch"), ("*",), ("a.b",)])
def test_good_roles(good):
    assert check_roles(good) == good


@pytest.mark.parametrize(
    "bad",
    [[""], ["a b"], ["-a"], ["/a"], ["a/"], [".."], ["a/./b"], ["x*"], ["a//b"], ["*", "dlc"]],
)
def test_bad_roles_name_the_field_and_the_fix(bad):
    with pytest.raises(ConfigError, match="role") as info:
        check_roles(bad)
    assert "\n" not in str(info.value)


def test_cli_refuses_a_bad_role_in_one_line(tmp_path):
    result = CliRunner().invoke(
        cli, ["scheduler", "--master", "127.0.0.1:1", "--db", str(tmp_path / "db"),
              "--role", "bad role"],
    )  # fmt: skip
    assert result.exit_code != 0
    assert "is not a Mesos role name" in result.output
    assert "Traceback" not in result.output


def test_node_config_role_reserves_the_gpu_resources_only():
    result = CliRunner().invoke(
        cli, ["node-config", "--from-file", "tests/topology/data/h100-x1/topo_m.txt",
              "--gpu-mem", "81559", "--cpus", "16", "--role", "dlc", "--format", "args"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    resources = result.output.split()[0]
    assert resources == (
        "--resources=cpus:16;gpus(dlc):1;gpu_ids(dlc):{0};gpu_mem(dlc):[0-81558];"
        "gpu_core(dlc):[0-999]"
    )
    # the master's parser reads it back as reserved for dlc
    from dlc.mesos.resources import Resources

    parsed = Resources.parse(resources.partition("=")[2])
    assert parsed.select(lambda name, role: role == "dlc").names() == {
        "gpus", "gpu_ids", "gpu_mem", "gpu_core"
    }  # fmt: skip


def test_reserve_operations_go_in_the_launchs_accept_and_alone_otherwise(tmp_path):
    from dlc.mesos.framework import MesosFramework
    from dlc.scheduler.core.facade import Actions, SchedulerCore
    from dlc.store.memory import MemoryJobStore
    from tests.mesos.test_framework import FakeDriver

    FakeDriver.instances = []
    core = SchedulerCore(MemoryJobStore())
    fw = MesosFramework(
        core, FrameworkConfig("127.0.0.1:5050", refuse_seconds=7), FakeDriver,
        version_probe=lambda url: None, agents_probe=lambda url: [],
    )  # fmt: skip
    fw._start_driver()
    driver = FakeDriver.instances[0]
    info = {"task_id": {"value": "t1"}, "agent_id": {"value": "a1"}}
    reserve = {"type": "RESERVE", "reserve": {"resources": []}}
    unreserve = {"type": "UNRESERVE", "unreserve": {"resources": []}}
    fw._carry_out(Actions(accepts=[(["o1"], [info])],
                          operations={("o1",): [reserve], ("o2",): [unreserve]}))  # fmt: skip
    accepted = driver.named("acceptOffers")
    assert ([{"value": "o2"}], [unreserve], {"refuse_seconds": 7}) in accepted
    launch = {"type": "LAUNCH", "launch": {"task_infos": [info]}}
    assert ([{"value": "o1"}], [reserve, launch]) in accepted
    assert driver.named("launchTasks") == []


def test_group_roles_parse_and_name_the_fix():
    from dlc.mesos.framework import parse_group_roles

    assert parse_group_roles(["vision=v", "nlp=dlc"], ("dlc", "v")) == (
        ("vision", "v"), ("nlp", "dlc")
    )  # fmt: skip
    with pytest.raises(ConfigError, match="add --role other"):
        parse_group_roles(["vision=other"], ("dlc",))
    with pytest.raises(ConfigError, match="GROUP=ROLE"):
        parse_group_roles(["vision"], ("dlc",))


def test_per_role_suppress_is_sent_once_until_a_revive(tmp_path):
    from dlc.mesos.framework import MesosFramework
    from dlc.scheduler.core.facade import Actions, SchedulerCore
    from dlc.store.memory import MemoryJobStore
    from tests.mesos.test_framework import FakeDriver

    FakeDriver.instances = []
    fw = MesosFramework(
        SchedulerCore(MemoryJobStore()), FrameworkConfig("127.0.0.1:5050"), FakeDriver,
        version_probe=lambda url: None, agents_probe=lambda url: [],
    )  # fmt: skip
    fw._start_driver()
    driver = FakeDriver.instances[0]
    fw._carry_out(Actions(suppress_roles=("dlc",)))
    fw._carry_out(Actions(suppress_roles=("dlc",)))
    assert driver.named("suppressOffers") == [(["dlc"],)]
    fw._carry_out(Actions(revive=True))
    fw._carry_out(Actions(suppress_roles=("dlc",)))
    assert driver.named("suppressOffers") == [(["dlc"],), (["dlc"],)]
