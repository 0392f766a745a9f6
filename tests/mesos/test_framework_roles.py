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
