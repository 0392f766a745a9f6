"""The API URL agents get (`--api-advertise-url`): never 0.0.0.0; loopback only locally."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from dlc.app.advertise import advertised_api_url, loopback_warning, master_hosts
from dlc.cli.main import cli
from dlc.errors import DlcError


def test_bound_address_is_advertised_unless_a_url_is_given():
    assert advertised_api_url("http://198.51.100.3:8642", None) == "http://198.51.100.3:8642"
    given = advertised_api_url("http://127.0.0.1:8642", "https://dlc.example.org/")
    assert given == "https://dlc.example.org"


@pytest.mark.parametrize("bound, given, option", [
    ("http://0.0.0.0:8642", None, "--api-host"),
    ("http://[::]:8642", None, "--api-host"),
    ("http://127.0.0.1:8642", "http://0.0.0.0:8642", "--api-advertise-url"),
])  # fmt: skip
def test_no_address_is_refused_in_one_line(bound, given, option):
    with pytest.raises(DlcError) as err:
        advertised_api_url(bound, given)
    assert str(err.value).startswith(f"{option}: agents cannot connect")
    assert "--api-advertise-url http(s)://HOST:PORT" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_url_that_is_no_url_is_refused():
    with pytest.raises(DlcError, match="is not an http"):
        advertised_api_url("http://127.0.0.1:8642", "dlc.example.org:8642")


def test_loopback_is_only_a_warning_and_only_with_a_remote_master():
    url = "http://127.0.0.1:8642"
    assert loopback_warning(url, "127.0.0.1:5050") is None
    assert loopback_warning(url, "zk://127.0.0.1:2181,localhost:2182/mesos") is None
    assert loopback_warning("http://198.51.100.3:8642", "198.51.100.2:5050") is None
    warning = loopback_warning(url, "198.51.100.2:5050")
    assert warning and "--api-advertise-url" in warning and "\n" not in warning
    assert loopback_warning(url, "zk://zk1:2181,zk2:2181/mesos")


def test_master_hosts_of_every_form():
    assert master_hosts("m:5050") == ["m"]
    assert master_hosts("http://10.0.0.1:5050") == ["10.0.0.1"]
    assert master_hosts("zk://a:2181,b:2181/mesos") == ["a", "b"]


def test_scheduler_binding_everything_without_an_advertised_url_exits_in_one_line(tmp_path):
    result = CliRunner().invoke(cli, ["scheduler", "--master", "198.51.100.2:5050", "--db",
                                      str(tmp_path / "db"), "--api-host", "0.0.0.0"])  # fmt: skip
    assert result.exit_code != 0
    assert "--api-host: agents cannot connect to http://0.0.0.0:8642" in result.output
    assert not (tmp_path / "db").exists()  # refused before the store was opened


def test_executors_and_the_mesos_ui_get_the_advertised_url(tmp_path):
    from dlc.app.service import SchedulerService, ServiceConfig

    url = "https://dlc.example.org"
    svc = SchedulerService(ServiceConfig(master="198.51.100.2:5050", db=str(tmp_path / "db"),
                                         api_port=0, api_advertise_url=url))  # fmt: skip
    try:
        assert svc.api_url == url
        assert svc.core.config.executor.api_url == url  # the --workdir snapshot's base
        assert svc.framework.config.webui_url == url + "/"
        assert svc.api.url.startswith("http://127.0.0.1:")  # still bound where asked
    finally:
        svc.stop()
