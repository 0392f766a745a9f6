"""Red-team #14: a 5,000-digit number in a job spec, from the CLI, a YAML file and the API.

Every numeric field answers with one short line naming the field and its allowed range
(before: a generic "error parsing the body", a 5,000-character message echoing every
digit, or an OverflowError traceback for ``cpus``/``gpus``/``gpu_memory``).
"""

from __future__ import annotations

import json
import socket
import urllib.parse

import pytest
from click.testing import CliRunner

from dlc.api.logs import LogReader
from dlc.api.server import ApiServer
from dlc.cli.main import cli
from dlc.errors import JobSpecError
from dlc.scheduler.core.facade import SchedulerCore
from dlc.scheduler.jobs.job import JobSpec
from dlc.store.sqlite import JobStore

DIGITS = "7" * 5000
#: field -> (the CLI flag, what its message must say about the allowed range)
FIELDS = {
    "gpus": ("--gpus", "0 <= N <= 64"),
    "cpus": ("--cpus", "0.01 <= N <= 1024"),
    "mem_mib": ("--mem", None),
    "priority": ("--priority", "-1000 <= N <= 1000"),
    "nodes": ("--nodes", "1 <= N <= 1024"),
    "gpu_memory": ("--gpu-memory", "more than any GPU has"),
    "retries": ("--retries", "0 <= N <= 100"),
    "idle_timeout_s": ("--idle-timeout", "10 <= SECONDS <= 2592000"),
}


def _short_line(text: str) -> str:
    assert "\n" not in text.strip() and len(text) < 300, text[:400]
    assert "Traceback" not in text
    return text


@pytest.mark.parametrize("field", [f for f in FIELDS if f != "mem_mib"] + ["disk_mib"])
@pytest.mark.parametrize(
    "value",
    [DIGITS, int("7" * 4000), -int("7" * 4000), "-" + DIGITS, 1e308],
    ids=["text", "int", "negative-int", "negative-text", "1e308"],
)
def test_every_numeric_field_names_itself_and_its_range(field, value):
    with pytest.raises(JobSpecError) as refused:
        JobSpec.from_dict({"image": "busybox:1", field: value})
    assert refused.value.field == field
    message = _short_line(str(refused.value))
    rule = FIELDS.get(field, (None, "0 <= N <="))[1]
    assert rule in message or "whole number" in message


@pytest.fixture
def server(tmp_path):
    core = SchedulerCore(JobStore(tmp_path / "db"), resolver=lambda s: (s.image, "12.1"))
    api = ApiServer(core, LogReader(lambda: None), lambda a: None)
    api.start()
    yield api, core.store.add_token("mallory")
    api.stop()
    core.store.close()


@pytest.mark.parametrize("field", ["gpus", "cpus", "mem_mib", "priority", "nodes", "gpu_memory"])
def test_the_api_names_the_field_of_a_5000_digit_number(server, field):
    api, token = server
    body = f'{{"image": "busybox:1", "{field}": {DIGITS}}}'.encode()
    host, port = urllib.parse.urlsplit(api.url).netloc.split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(
            f"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + body
        )
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert head.split()[1] == b"400"
    answer = json.loads(payload)
    assert answer["field"] == field
    assert "between" in _short_line(answer["error"]) or "more than any GPU" in answer["error"]


@pytest.mark.parametrize("field", list(FIELDS))
def test_the_cli_names_the_field_of_a_5000_digit_flag(field):
    flag = FIELDS[field][0]
    result = CliRunner().invoke(
        cli, ["submit", "--image", "busybox:1", flag, DIGITS, "--", "true"],
        env={"DLC_API": "http://127.0.0.1:9", "DLC_CONFIG": "/nonexistent"},
    )  # fmt: skip
    assert result.exit_code == 2, result.output[:300]
    line = _short_line(result.output)
    assert line.startswith(f"Error: {'mem' if field == 'mem_mib' else field}:")


@pytest.mark.parametrize("field", ["gpus", "cpus", "mem_mib", "priority", "nodes", "gpu_memory"])
def test_a_yaml_file_names_the_field_of_a_5000_digit_number(tmp_path, field):
    spec = tmp_path / "job.yaml"
    spec.write_text(f"image: busybox:1\ncommand: echo\n{field}: {DIGITS}\n")
    result = CliRunner().invoke(
        cli, ["submit", "-f", str(spec)],
        env={"DLC_API": "http://127.0.0.1:9", "DLC_CONFIG": "/nonexistent"},
    )  # fmt: skip
    assert result.exit_code == 2, result.output[:300]
    assert _short_line(result.output).startswith(f"Error: {field}:")


@pytest.mark.parametrize("share", [0.9999, 0.9995, "0.99951"])
def test_a_share_that_rounds_to_a_whole_gpu_is_refused(share):
    """It became gpu_fraction 1.0: a "share" holding a whole GPU through the sharing path."""
    with pytest.raises(JobSpecError, match="rounds to a whole GPU"):
        JobSpec.from_dict({"image": "busybox:1", "gpus": share})
    assert JobSpec.from_dict({"image": "busybox:1", "gpus": 0.999}).gpu_fraction == 0.999
