"""`dlc scheduler`: token creation and one-line errors (the running service is tested in e2e)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import click
import pytest
from click.testing import CliRunner

from dlc.cli.executor_cmd import command as executor
from dlc.cli.main import cli
from dlc.cli.scheduler_cmd import admin_token_from, executor_config, print_login
from dlc.executor.gpu_render import GpuStyle
from dlc.store.sqlite import JobStore


@pytest.mark.parametrize("admin, flag", [(False, []), (True, ["--admin"])])
def test_create_token_registers_a_working_token(tmp_path, admin, flag):
    db = tmp_path / "jobs.db"
    result = CliRunner().invoke(cli, ["scheduler", "--db", str(db), "--create-token", "bob", *flag])
    assert result.exit_code == 0, result.output
    token = result.output.strip()
    assert JobStore(db).user_for_token(token) == ("bob", admin)


@pytest.mark.parametrize(
    "args, message",
    [
        pytest.param([], "--master is required", id="no-master"),
        pytest.param(
            ["--master", "m:5050", "--principal", "p"],
            "both --principal and --secret",
            id="principal-without-secret",
        ),  # fmt: skip
    ],
)
def test_bad_options_are_one_line(tmp_path, args, message):
    result = CliRunner().invoke(cli, ["scheduler", "--db", str(tmp_path / "db"), *args])
    assert result.exit_code == 1
    assert result.output.strip().startswith("Error: ") and message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_scheduler_warns_at_start_of_an_allowed_prefix_over_dlcs_state(tmp_path):
    args = ["scheduler", "--db", str(tmp_path / "db"), "--allow-volume", "/run",
            "--allow-volume", str(tmp_path)]  # fmt: skip
    result = CliRunner().invoke(cli, args)  # no --master: stops right after the warnings
    assert result.exit_code == 1
    warning, error = result.stderr.splitlines()
    assert warning.startswith(
        "warning: --allow-volume /run: it contains DLC's MPS pipes /run/dlc-mps and "
    )
    assert warning.endswith("will be refused (the rest of /run stays allowed)")
    assert error.startswith("Error: --master is required")


def test_dlc_local_warns_of_a_prefix_over_its_work_dir(tmp_path):
    home = tmp_path.resolve()
    (home / "file").write_text("")  # a work dir that cannot be made: stops after the warning
    work = home / "file" / ".dlc-local"
    args = ["local", "--work-dir", str(work), "--allow-volume", str(home)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == (
        f"warning: --allow-volume {home}: it contains dlc local's work directory {work}; job "
        f"volumes that are, contain or lie inside them will be refused (the rest of {home} "
        "stays allowed)"
    )
    assert "--work-dir" in result.stderr.splitlines()[1]


def test_admin_token_flag_is_refused_with_the_safe_ways(tmp_path):
    # a token on the command line shows in `ps` to every user of the host
    result = CliRunner().invoke(
        cli, ["scheduler", "--db", str(tmp_path / "db"), "--admin-token", "s3cret"]
    )
    assert result.exit_code == 1
    assert "DLC_ADMIN_TOKEN" in result.output and "--admin-token-file" in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "content, message",
    [
        pytest.param(None, "cannot read it", id="missing"),
        pytest.param("", "one token on one line", id="empty"),
        pytest.param("a b\n", "one token on one line", id="two-words"),
    ],
)
def test_bad_admin_token_file_is_one_line(tmp_path, content, message):
    path = tmp_path / "admin.token"
    if content is not None:
        path.write_text(content)
    args = ["scheduler", "--db", str(tmp_path / "db"), "--admin-token-file", str(path)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1 and message in result.output
    assert result.output.startswith(f"Error: --admin-token-file {path}")


def test_admin_token_comes_from_file_or_environment(tmp_path, monkeypatch):
    path = tmp_path / "admin.token"
    path.write_text("from-file\n")
    monkeypatch.setenv("DLC_ADMIN_TOKEN", "from-env")
    assert admin_token_from(str(path)) == "from-file"
    assert admin_token_from(None) == "from-env"
    monkeypatch.delenv("DLC_ADMIN_TOKEN")
    assert admin_token_from(None) is None


def test_help_says_how_to_pass_the_admin_token(tmp_path):
    result = CliRunner().invoke(cli, ["scheduler", "--help"])
    text = " ".join(result.output.split())
    assert "--admin-token-file" in text and "DLC_ADMIN_TOKEN" in text and "`ps`" in text


def test_printed_urls_carry_no_token(capsys):
    print_login("http://127.0.0.1:8642", "tok-123", None)
    out = capsys.readouterr().out
    urls = [word for word in out.split() if "://" in word]
    assert urls and all("tok-123" not in url for url in urls)
    assert "export DLC_TOKEN=tok-123" in out


def test_executor_options_become_the_executor_command_and_environment():
    config = executor_config("/opt/dlc/bin/dlc executor", ("DLC_DEVICE_ROOT=/host/dev",),
                             "legacy", "host", True)  # fmt: skip
    assert config.command == "/opt/dlc/bin/dlc executor --memlock-unlimited"
    assert dict(config.env) == {"DLC_DEVICE_ROOT": "/host/dev", "DLC_GPU_STYLE": "legacy",
                                "DLC_NETWORK_MODE": "host"}  # fmt: skip
    default = executor_config(None, (), None, None, False)
    assert default.command is None and default.env == ()


def test_executor_options_reach_the_agents_executor_info():
    config = executor_config(None, (), "toolkit", None, False)
    # the executor reads exactly these variables as its --gpu-style/--network defaults
    assert dict(config.env)["DLC_GPU_STYLE"] in [s.value for s in GpuStyle]
    names = {p.name: p for p in executor.params}
    ctx = click.Context(executor)
    os.environ["DLC_GPU_STYLE"] = "toolkit"
    try:
        assert names["gpu_style"].get_default(ctx) == "toolkit"
    finally:
        del os.environ["DLC_GPU_STYLE"]


def test_bad_executor_env_is_one_line(tmp_path):
    result = CliRunner().invoke(cli, ["scheduler", "--db", str(tmp_path / "db"), "--master",
                                      "m:5050", "--executor-env", "NOEQUALS"])  # fmt: skip
    assert result.exit_code == 1
    assert result.output.strip() == (
        "Error: --executor-env 'NOEQUALS': give KEY=VALUE, e.g. DLC_DEVICE_ROOT=/dev"
    )


def test_unreachable_master_logs_one_line_not_a_traceback(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlc", "scheduler", "--master", "127.0.0.1:1", "--db",
         str(tmp_path / "db"), "--api-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    line = "cannot reach the Mesos master (Connection refused); retrying - check --master"
    seen: list[str] = []

    def retries_after_the_line(text: str) -> int:
        return text.partition(line)[2].count("try again") if line in text else -1

    try:
        # the first failed attempt (the one-line error, then pymesos's "sleep 2s and try
        # again") and the retry about 2 s later: what a fixed 6 s sleep saw on a quiet
        # machine, and nothing at all on a loaded one (the scheduler was still starting)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            text = "".join(seen)
            if retries_after_the_line(text) >= 2 or "Traceback" in text:
                break
            if select.select([proc.stderr], [], [], 0.5)[0]:
                got = os.read(proc.stderr.fileno(), 65536)  # the fd: no buffer select misses
                if not got:
                    break  # the scheduler exited
                seen.append(got.decode(errors="replace"))
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)
    err = "".join(seen) + rest
    assert "Traceback" not in err
    assert retries_after_the_line(err) >= 2, err[-2000:]
