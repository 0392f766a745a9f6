"""Every ``dlc`` subcommand answers bad input with ONE ``Error: ...`` line and a non-zero exit.

Each case names the field or flag that was wrong and says how to fix it; none may show a
traceback. File arguments use placeholders (``{garbage}``, ``{dgx1}`` ...) that the
``files`` fixture turns into real paths.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dlc.api.logs import LogReader
from dlc.api.server import ApiServer
from dlc.cli.main import cli
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore, default_resolver
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore
from dlc.topology.encoding import decode_topology
from tests.fixture_files import FIXTURE_DIR, REPO_ROOT

DGX1 = FIXTURE_DIR / "dgx1-v100_nv1-nv2_mlx5_oneflow.txt"
DGX2_CUT = FIXTURE_DIR / "dgx2-v100_nv6_16gpu_10nic_TRUNCATED.txt"
RTX3090 = FIXTURE_DIR / "rtx3090-2gpu_nv4-bridge_lxc.txt"
PROBE_DGX1 = REPO_ROOT / "tests" / "probe" / "data" / "dgx1_v100_synthetic.json"


@pytest.fixture
def files(tmp_path) -> dict[str, str]:
    """Placeholder -> path of the bad (and a few good) input files."""
    made = {
        "garbage": b"garbage\x00\xff not a table\n",
        "empty": b"",
        "cut": DGX1.read_bytes()[:300],
        "badjson": b'{"x": 1\n',
        "wrongdoc": b'{"schema": "nope"}\n',
        "badyaml": b"framework: [\n",
        "listyaml": b"- a\n- b\n",
        "neggpus": b"framework: pytorch:2.3\ngpus: -1\n",
        "unknownfield": b"framework: pytorch:2.3\ngpu: 2\n",
    }
    paths = {}
    for name, data in made.items():
        path = tmp_path / name
        path.write_bytes(data)
        paths[name] = str(path)
    missing = str(tmp_path / "no-such-dir" / "file")
    fixed = {
        "dgx1": DGX1,
        "dgx2cut": DGX2_CUT,
        "rtx3090": RTX3090,
        "p2p5090": FIXTURE_DIR / "rtx5090-2gpu_phb_tabs.p2p.txt",
        "probe": PROBE_DGX1,
    }
    return paths | {k: str(v) for k, v in fixed.items()} | {"missing": missing}


def invoke(args: list[str], files: dict[str, str], env: dict[str, str] | None = None):
    argv = [arg.format(**files) for arg in args]
    return CliRunner().invoke(cli, argv, env={"COLUMNS": "100", **(env or {})}, prog_name="dlc")


def assert_one_line_error(result, fragments: tuple[str, ...], exit_code: int | None) -> None:
    assert result.exit_code != 0, result.output
    if exit_code is not None:
        assert result.exit_code == exit_code, result.output
    assert isinstance(result.exception, SystemExit), result.exception  # handled, not a crash
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: "), lines[0]
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


OFFLINE = [
    # -- click usage errors: one line, pointing at --help, exit 2
    ("unknown-command", ["nosuch"], ("No such command 'nosuch'", "dlc --help"), 2),
    ("unknown-group-option", ["--badopt"], ("--badopt",), 2),
    ("unknown-images-subcommand", ["images", "frob"], ("'frob'", "dlc images --help"), 2),
    ("missing-required-option", ["images", "check"], ("--driver", "images check --help"), 2),
    (
        "float-not-a-number",
        ["node-config", "--from-file", "{dgx1}", "--cpus", "abc"],
        ("--cpus", "'abc'"),
        2,
    ),
    (
        "bad-format-choice",
        ["node-config", "--from-file", "{dgx1}", "--format", "xml"],
        ("--format", "'xml'"),
        2,
    ),
    # -- dlc topology
    (
        "topology-missing-file",
        ["topology", "--from-file", "{missing}"],
        ("cannot read topology file", "No such file"),
        1,
    ),
    (
        "topology-garbage",
        ["topology", "--from-file", "{garbage}"],
        ("no `nvidia-smi topo -m` table found", "GPU0 GPU1"),
        1,
    ),
    ("topology-empty", ["topology", "--from-file", "{empty}"], ("topology text is empty",), 1),
    (
        "topology-cut-mid-row",
        ["topology", "--from-file", "{cut}"],
        ("table ends inside GPU2's row", "--allow-truncated"),
        1,
    ),
    (
        "topology-truncated-dgx2",
        ["topology", "--from-file", "{dgx2cut}"],
        ("table ends after GPU4's row", "--allow-truncated"),
        1,
    ),
    (
        "topology-bad-json",
        ["topology", "--from-file", "{badjson}"],
        ("not valid JSON", "at line 2"),
        1,
    ),
    (
        "topology-wrong-schema",
        ["topology", "--from-file", "{wrongdoc}"],
        ("schema is 'nope'", "dlc-topology/1"),
        1,
    ),
    (
        "topology-bad-p2p-file",
        ["topology", "--from-file", "{dgx1}", "--p2p-file", "{garbage}"],
        ("no `nvidia-smi topo -p2p` matrix found",),
        1,
    ),
    (
        "topology-p2p-of-another-machine",
        ["topology", "--from-file", "{dgx1}", "--p2p-file", "{p2p5090}"],
        ("disagree about GPU2", "same machine"),
        1,
    ),
    (
        "topology-p2p-without-file",
        ["topology", "--p2p-file", "{garbage}"],
        ("--p2p-file needs --from-file",),
        1,
    ),
    (
        "topology-png-unwritable",
        ["topology", "--from-file", "{dgx1}", "--png", "{missing}"],
        ("--png: cannot write", "No such file or directory"),
        1,
    ),
    (
        "topology-svg-unwritable",
        ["topology", "--from-file", "{dgx1}", "--svg", "{missing}"],
        ("--svg: cannot write", "No such file or directory"),
        1,
    ),
    # -- dlc node-config
    (
        "node-config-garbage",
        ["node-config", "--from-file", "{garbage}"],
        ("no `nvidia-smi topo -m` table found",),
        1,
    ),
    (
        "node-config-truncated",
        ["node-config", "--from-file", "{dgx2cut}"],
        ("table ends after GPU4's row",),
        1,
    ),
    (
        "node-config-negative-cpus",
        ["node-config", "--from-file", "{dgx1}", "--cpus", "-1"],
        ("cpus:", "--cpus 8"),
        2,
    ),
    (
        "node-config-nan-cpus",
        ["node-config", "--from-file", "{dgx1}", "--cpus", "nan"],
        ("cpus:",),
        2,
    ),
    (
        "node-config-zero-mem",
        ["node-config", "--from-file", "{dgx1}", "--mem", "0"],
        ("mem:", "--mem 65536"),
        2,
    ),
    (
        "node-config-probe-garbage",
        ["node-config", "--from-file", "{dgx1}", "--probe", "--probe-json", "{garbage}"],
        ("--probe-json", "is not text"),
        1,
    ),
    (
        "node-config-probe-other-machine",
        ["node-config", "--from-file", "{rtx3090}", "--probe-json", "{probe}"],
        ("probe GPU 2 is not in the topology", "another machine"),
        1,
    ),
    # -- dlc probe
    (
        "probe-json-garbage",
        ["probe", "--probe-json", "{garbage}"],
        ("--probe-json", "is not text"),
        1,
    ),
    (
        "probe-json-missing",
        ["probe", "--probe-json", "{missing}"],
        ("--probe-json: cannot read", "No such file"),
        1,
    ),
    ("probe-json-not-json", ["probe", "--probe-json", "{badjson}"], ("probe JSON", "not JSON"), 1),
    (
        "probe-json-not-a-probe-run",
        ["probe", "--probe-json", "{wrongdoc}"],
        ("probe JSON: version",),
        1,
    ),
    (
        "probe-json-with-gpus",
        ["probe", "--probe-json", "{probe}", "--from-file", "{dgx1}", "--gpus", "0,1"],
        ("--gpus shapes a new run", "--probe-json"),
        1,
    ),
    ("probe-bad-gpu-list", ["probe", "--gpus", "0,a"], ("--gpus", "0,1,3"), 1),
    ("probe-negative-gpu", ["probe", "--gpus", "-1"], ("--gpus",), 1),
    ("probe-gpu-twice", ["probe", "--gpus", "0,0"], ("--gpus", "listed twice"), 1),
    ("probe-bad-size", ["probe", "--size", "12X"], ("--size", "64M"), 1),
    ("probe-negative-timeout", ["probe", "--timeout", "-5"], ("--timeout", "x>0"), 2),
    # -- dlc images
    (
        "images-driver-letters",
        ["images", "check", "--driver", "abc"],
        ("--driver: 'abc'", "535.104.05"),
        1,
    ),
    ("images-driver-empty", ["images", "check", "--driver", ""], ("--driver: ''",), 1),
    (
        "images-unknown-framework",
        ["images", "list", "--framework", "nosuch"],
        ("'nosuch' is not in the image catalog", "known: "),
        1,
    ),
    (
        "images-catalog-missing",
        ["images", "list", "--catalog", "{missing}"],
        ("image catalog", "cannot read"),
        1,
    ),
    (
        "images-catalog-binary",
        ["images", "list", "--catalog", "{garbage}"],
        ("image catalog", "not UTF-8"),
        1,
    ),
    (
        "images-catalog-bad-yaml",
        ["images", "list", "--catalog", "{badyaml}"],
        ("image catalog", "not valid YAML", "line 2"),
        1,
    ),
    (
        "images-catalog-not-mapping",
        ["images", "list", "--catalog", "{listyaml}"],
        ("top level must be a mapping",),
        1,
    ),
    # -- API clients without a scheduler: the spec is checked before any request
    (
        "jobs-unreachable",
        ["jobs", "--api", "http://127.0.0.1:9"],
        ("cannot reach the DLC scheduler at http://127.0.0.1:9", "dlc local"),
        1,
    ),
    (
        "status-unreachable",
        ["status", "j1", "--api", "http://127.0.0.1:9"],
        ("cannot reach the DLC scheduler",),
        1,
    ),
    ("jobs-api-not-a-url", ["jobs", "--api", "notaurl"], ("--api/DLC_API: 'notaurl'",), 1),
    ("jobs-api-ftp", ["jobs", "--api", "ftp://x"], ("--api/DLC_API", "http(s) URL"), 1),
    ("jobs-api-bad-port", ["logs", "j1", "--api", "http://h:99999"], ("--api/DLC_API",), 1),
    (
        "submit-cpu-only-with-a-gpu-model",
        ["submit", "--framework", "pytorch:2.3", "--gpus", "0", "--gpu-model", "V100"],
        ("gpu_model: a CPU-only job (--gpus 0) runs on no GPU",),
        2,
    ),
    (
        "submit-negative-gpus",
        ["submit", "--framework", "pytorch:2.3", "--gpus", "-1"],
        ("gpus:", "got -1"),
        2,
    ),
    (
        "submit-99-gpus",
        ["submit", "--framework", "pytorch:2.3", "--gpus", "99"],
        ("gpus:", "got 99"),
        2,
    ),
    (
        "submit-framework-no-version",
        ["submit", "--framework", "pytorch"],
        ("framework:", "pytorch:2.3"),
        2,
    ),
    (
        "submit-bad-mem",
        ["submit", "--framework", "pytorch:2.3", "--mem", "12X"],
        ("mem: '12X'",),
        2,
    ),
    ("submit-spec-missing", ["submit", "-f", "{missing}"], ("spec: cannot read",), 2),
    ("submit-spec-binary", ["submit", "-f", "{garbage}"], ("spec:", "not UTF-8"), 2),
    ("submit-spec-bad-yaml", ["submit", "-f", "{badyaml}"], ("spec:", "not valid YAML"), 2),
    ("submit-spec-list", ["submit", "-f", "{listyaml}"], ("spec:", "must hold a mapping"), 2),
    ("submit-spec-negative-gpus", ["submit", "-f", "{neggpus}"], ("gpus:", "got -1"), 2),
    (
        "submit-spec-unknown-field",
        ["submit", "-f", "{unknownfield}"],
        ("gpu: unknown field", "gpus"),
        2,
    ),
    # -- servers and the executor
    ("scheduler-no-master", ["scheduler"], ("--master is required",), 1),
    (
        "scheduler-principal-alone",
        ["scheduler", "--master", "x", "--principal", "a"],
        ("--principal and --secret",),
        1,
    ),
    (
        "scheduler-unknown-policy",
        ["scheduler", "--master", "x", "--policy", "nosuch"],
        ("--policy", "'tree'"),
        2,
    ),
    (
        "scheduler-bad-fair-share-billing",
        ["scheduler", "--master", "x", "--fair-share-billing", "gpus=1"],
        ("fair_share_billing: 'gpus=1' is not cpus=N or mem=SIZE; write e.g. cpus=8,mem=64G",),
        2,
    ),
    (
        "scheduler-bad-fair-share-half-life",
        ["scheduler", "--master", "x", "--fair-share-half-life", "7 days"],
        ("fair_share_half_life: '7 days' is not a time",),
        2,
    ),
    ("local-port-out-of-range", ["local", "--api-port", "99999"], ("--api-port",), 2),
    # was an agent of 32 MiB on which every job waited
    (
        "local-mem-without-unit",
        ["local", "--api-port", "0", "--mem", "32"],
        ("mem: 32 without a unit is 32 MiB, too little for an agent; write 32G",),
        2,
    ),
    (
        "local-relative-allow-volume",
        ["local", "--api-port", "0", "--allow-volume", "data"],
        ("--allow-volume: 'data' is not an absolute path; pass a host directory",),
        2,
    ),
    (
        "scheduler-relative-allow-volume",
        ["scheduler", "--master", "x", "--allow-volume", "data"],
        ("--allow-volume: 'data' is not an absolute path",),
        2,
    ),
    ("local-mem-not-a-size", ["local", "--api-port", "0", "--mem", "lots"], ("mem: 'lots'",), 2),
    ("local-unknown-policy", ["local", "--policy", "nosuch"], ("--policy", "first-fit"), 2),
    (
        "local-simulate-garbage",
        ["local", "--simulate", "{garbage}", "--api-port", "0"],
        ("no `nvidia-smi topo -m` table found",),
        1,
    ),
    (
        "local-simulate-missing",
        ["local", "--simulate", "{missing}", "--api-port", "0"],
        ("cannot read topology file",),
        1,
    ),
    ("local-work-dir-uncreatable", ["local", "--work-dir", "{garbage}/sub"], ("--work-dir",), 1),
    ("cleanup-nothing-selected", ["cleanup"], ("--all, --framework ID or --executor ID",), 1),
    ("executor-outside-mesos", ["executor"], ("MESOS_FRAMEWORK_ID", "Mesos agent"), 1),
]


@pytest.mark.parametrize(
    "args, fragments, exit_code",
    [pytest.param(a, f, c, id=i) for i, a, f, c in OFFLINE],
)
def test_bad_input_is_one_error_line(files, monkeypatch, tmp_path, args, fragments, exit_code):
    monkeypatch.chdir(tmp_path)  # `dlc local`'s default --work-dir must not land in the repo
    for name in ("DLC_API", "DLC_TOKEN", "MESOS_FRAMEWORK_ID", "MESOS_EXECUTOR_ID"):
        monkeypatch.delenv(name, raising=False)
    assert_one_line_error(invoke(args, files), fragments, exit_code)


@pytest.mark.parametrize("args", [[], ["images"]], ids=["dlc", "dlc-images"])
def test_a_bare_group_shows_its_help_not_an_error(files, args):
    result = invoke(args, files)
    assert "Usage: dlc" in result.output and "Error:" not in result.output
    assert ("Start here" if args == [] else "Commands:") in result.output


def test_dlc_help_lists_every_command_once_starting_with_local_and_submit():
    from dlc.cli.main import COMMANDS, SECTIONS

    listed = [name for _, names in SECTIONS for name in names]
    assert sorted(listed) == sorted(COMMANDS)  # each once, none left out
    out = CliRunner().invoke(cli, ["--help"]).output
    start = out.index("Start here")
    assert start < out.index("  local ") < out.index("  submit ") < out.index("Hosts and operators")
    assert out.index("Hosts and operators") < out.index("  executor ")


def test_p2p_mismatch_gives_no_truncation_hint(files):
    result = invoke(["topology", "--from-file", "{dgx1}", "--p2p-file", "{p2p5090}"], files)
    assert "--allow-truncated" not in result.stderr


def test_executor_with_an_unwritable_sandbox(files, monkeypatch, tmp_path):
    monkeypatch.setenv("MESOS_FRAMEWORK_ID", "f")
    monkeypatch.setenv("MESOS_EXECUTOR_ID", "e")
    monkeypatch.setenv("MESOS_AGENT_ENDPOINT", "127.0.0.1:9")
    monkeypatch.setenv("MESOS_SANDBOX", str(tmp_path / "gone"))
    result = invoke(["executor", "--no-reaper"], files)
    assert_one_line_error(result, ("MESOS_SANDBOX", "dlc-executor.log"), 1)


@pytest.mark.parametrize("command", ["topology", "node-config"])
def test_no_gpu_and_no_file(files, monkeypatch, tmp_path, command):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi on PATH
    monkeypatch.setitem(sys.modules, "pynvml", None)  # and NVML cannot be imported
    result = invoke([command], files)
    assert_one_line_error(result, ("no NVIDIA GPU found", "--from-file FILE"), 1)


def test_a_bug_is_one_line_too(monkeypatch, files):
    def explode(*_args, **_kwargs):
        raise KeyError("boom")

    monkeypatch.setattr("dlc.cli.node_config_cmd.node_config", explode)
    result = invoke(["node-config", "--from-file", "{dgx1}"], files)
    assert_one_line_error(result, ("internal error KeyError", "DLC_DEBUG=1"), 70)


@pytest.fixture
def api(tmp_path):
    """A live scheduler API on loopback with the shipped image catalog."""
    store = JobStore(tmp_path / "db")
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("tree")), default_resolver)
    server = ApiServer(core, LogReader(lambda: None), lambda actions: None)
    server.start()
    yield {"DLC_API": server.url, "DLC_TOKEN": store.add_token("alice")}
    server.stop()
    store.close()


ONLINE = [
    (
        "unknown-framework-version",
        ["submit", "--framework", "pytorch:0.1", "--", "true"],
        ("framework: pytorch:0.1", "known pytorch versions", "pass one of them as pytorch:VERSION"),
    ),
    ("unknown-framework", ["submit", "--framework", "caffe:1.0"], ("framework: 'caffe'",)),
    ("volume-not-allowed", ["submit", "--image", "x", "-v", "/etc:/h"], ("volumes:", "/etc")),
    ("status-unknown-job", ["status", "nosuchjob"], ("nosuchjob",)),
    ("kill-unknown-job", ["kill", "nosuchjob"], ("nosuchjob",)),
    ("logs-unknown-job", ["logs", "nosuchjob"], ("nosuchjob",)),
    # was "no endpoint GET /v1/jobs/j/../x; see /openapi.json"
    ("status-not-a-job-id", ["status", "j/../x"], ("JOB: 'j/../x' is not a job id", "dlc jobs")),
    ("kill-not-a-job-id", ["kill", "j1 j2"], ("JOB: 'j1 j2' is not a job id",)),
    ("logs-since-not-a-job-id", ["logs", "j/../x", "--since", "5m"], ("JOB: 'j/../x'",)),
    ("cp-not-a-job-id", ["cp", "j/../x:a.txt", "-"], ("JOB: 'j/../x'",)),
    ("open-not-a-job-id", ["open", "j/../x"], ("JOB: 'j/../x'",)),
    ("exec-not-a-job-id", ["exec", "j/../x", "--", "ls"], ("JOB: 'j/../x'",)),
]


@pytest.mark.parametrize("args, fragments", [pytest.param(a, f, id=i) for i, a, f in ONLINE])
def test_bad_request_to_a_live_api(api, files, args, fragments):
    assert_one_line_error(invoke(args, files, env=api), fragments, None)


def test_bad_token_is_one_line(api, files):
    result = invoke(["jobs"], files, env={**api, "DLC_TOKEN": "wrong"})
    assert_one_line_error(result, ("token",), None)


def test_node_config_probe_carries_measured_figures(files):
    """``--probe --probe-json``: the dlc_topo attribute decodes to measured links (issue 6)."""
    plain = invoke(["node-config", "--from-file", "{dgx1}", "--format", "json"], files)
    probed = invoke(
        ["node-config", "--from-file", "{dgx1}", "--probe", "--probe-json", "{probe}",
         "--format", "json"],
        files,
    )  # fmt: skip
    assert plain.exit_code == 0 and probed.exit_code == 0, probed.output
    before = decode_topology(json.loads(plain.stdout)["attributes"]["dlc_topo"])
    after = decode_topology(json.loads(probed.stdout)["attributes"]["dlc_topo"])
    assert all(link.measured_gbps is None for link in before.pairs())
    expected: dict[tuple[int, int], float] = {}
    for pair in json.loads(Path(files["probe"]).read_text())["pairs"]:
        # One way, with P2P where it was enabled; the slower direction counts.
        value = pair["uni_gbps_p2p"] if pair["p2p_enabled"] else pair["uni_gbps_nop2p"]
        key = (min(pair["src"], pair["dst"]), max(pair["src"], pair["dst"]))
        expected[key] = min(value, expected.get(key, value))
    measured = {key: link.measured_gbps for key, link in after.links.items()}
    assert set(measured) == set(expected)
    for key, value in expected.items():
        assert measured[key] == pytest.approx(value, abs=0.01), key
    nvlink = [measured[k] for k, link in after.links.items() if link.nvlinks]
    other = [measured[k] for k, link in after.links.items() if not link.nvlinks]
    assert nvlink and other and min(nvlink) > max(other)
