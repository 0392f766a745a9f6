"""discover(): file input, NVML, the nvidia-smi fallback, and the no-GPU error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dlc.errors import DiscoveryError, TopologyParseError
from dlc.topology.discovery.discover import describe_source, discover
from dlc.topology.model import P2PStatus
from tests.fakes.fake_nvml import FakeNvml, NVMLError_DriverNotLoaded

FIXTURES = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "topology"
FAKES = Path(__file__).resolve().parents[2] / "fakes"
ROOT = Path(__file__).resolve().parents[3]
RTX5090 = FIXTURES / "rtx5090-2gpu_phb_tabs.txt"
RTX5090_P2P = FIXTURES / "rtx5090-2gpu_phb_tabs.p2p.txt"
TRUNCATED = FIXTURES / "dgx2-v100_nv6_16gpu_10nic_TRUNCATED.txt"
H100 = FIXTURES / "hgx-h100_nv18_gpu-numa-id_thunderkittens.txt"


@pytest.fixture
def path_with(monkeypatch, tmp_path):
    """Set PATH to the fake nvidia-smi (``True``) or to an empty folder (``False``)."""

    def configure(smi: bool, **knobs: str) -> Path:
        empty = tmp_path / "empty-bin"
        empty.mkdir(exist_ok=True)
        # The fake needs python3 from the real PATH; "no nvidia-smi" means a PATH of nothing.
        real = os.environ.get("PATH", "")
        monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{real}" if smi else str(empty))
        for var in [v for v in os.environ if v.startswith("FAKE_SMI_")]:
            monkeypatch.delenv(var)
        log = tmp_path / "smi-calls.log"
        monkeypatch.setenv("FAKE_SMI_LOG", str(log))
        for key, value in knobs.items():
            monkeypatch.setenv(f"FAKE_SMI_{key.upper()}", str(value))
        return log

    return configure


def dead_nvml() -> FakeNvml:
    from dlc.topology.parse_topo import parse_topo_m

    return FakeNvml(parse_topo_m(RTX5090.read_text()), fail={"nvmlInit": NVMLError_DriverNotLoaded})


def test_from_file_with_p2p():
    topo = discover(from_file=RTX5090, p2p_file=RTX5090_P2P)

    assert topo.source == "file:rtx5090-2gpu_phb_tabs.txt"
    assert describe_source(topo) == "file rtx5090-2gpu_phb_tabs.txt"
    assert topo.link(0, 1).p2p is P2PStatus.GNS
    assert topo.link(0, 1).label == "PHB"


@pytest.mark.parametrize(
    "allow,gpus", [(True, 5), (False, None)], ids=["allow-truncated", "reject-truncated"]
)
def test_truncated_file(allow, gpus):
    if gpus is not None:
        assert len(discover(from_file=TRUNCATED, allow_truncated=allow).gpus) == gpus
        return
    with pytest.raises(TopologyParseError) as caught:
        discover(from_file=TRUNCATED)
    assert str(caught.value).startswith(f"{TRUNCATED}: line ")
    assert caught.value.line is not None


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (
            {"from_file": "/nonexistent/topo.txt"},
            "cannot read topology file /nonexistent/topo.txt: No such file or directory",
        ),
        (
            {"from_file": RTX5090, "p2p_file": "/nonexistent/p2p.txt"},
            "cannot read P2P file /nonexistent/p2p.txt: No such file or directory",
        ),
        ({"from_file": FIXTURES}, f"cannot read topology file {FIXTURES}: Is a directory"),
        ({"p2p_file": RTX5090_P2P}, "--p2p-file needs --from-file"),
    ],
    ids=["missing-topo", "missing-p2p", "directory", "p2p-alone"],
)
def test_file_errors(kwargs, message):
    with pytest.raises(DiscoveryError) as caught:
        discover(**kwargs)

    assert str(caught.value).startswith(message)


def test_garbage_file_names_the_file(tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\nworld\n")

    with pytest.raises(TopologyParseError, match=f"^{junk}: "):
        discover(from_file=junk)


def test_nvml_first(path_with):
    from dlc.topology.parse_topo import parse_topo_m

    log = path_with(smi=True, topo=RTX5090)
    fake = FakeNvml(parse_topo_m(H100.read_text()))

    topo = discover(nvml=fake)

    assert topo.source == "nvml"
    assert describe_source(topo) == "NVML (live)"
    assert {link.label for link in topo.pairs()} == {"NV18"}
    assert not log.exists()  # nvidia-smi was never run


def test_nvml_imported_lazily(path_with, monkeypatch):
    from dlc.topology.parse_topo import parse_topo_m

    path_with(smi=False)
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(parse_topo_m(H100.read_text())))

    assert discover().source == "nvml"


def test_smi_when_nvml_fails(path_with):
    log = path_with(smi=True, topo=RTX5090, p2p=RTX5090_P2P)

    topo = discover(nvml=dead_nvml())

    assert topo.source == "nvidia-smi"
    assert describe_source(topo) == "nvidia-smi (live)"
    assert topo.link(0, 1).p2p is P2PStatus.GNS
    assert "topo -m" in log.read_text()


@pytest.mark.parametrize(
    "pynvml_module,reason",
    [
        (None, "pynvml not installed: pip install nvidia-ml-py"),
        ("dead", "nvmlInit failed: Driver Not Loaded"),
    ],
    ids=["no-pynvml", "no-driver"],
)
def test_no_gpu_anywhere(path_with, monkeypatch, pynvml_module, reason):
    path_with(smi=False)
    monkeypatch.setitem(sys.modules, "pynvml", dead_nvml() if pynvml_module else None)

    with pytest.raises(DiscoveryError) as caught:
        discover()

    assert str(caught.value) == (
        f"no NVIDIA GPU found: NVML unavailable ({reason}) and nvidia-smi not on PATH; "
        "use --from-file FILE to describe a machine"
    )


def test_both_live_sources_fail(path_with):
    path_with(smi=True, topo=RTX5090, fail="driver")

    with pytest.raises(DiscoveryError) as caught:
        discover(nvml=dead_nvml())

    message = str(caught.value)
    assert "couldn't communicate with the NVIDIA driver" in message
    assert message.endswith("(NVML was unavailable too: nvmlInit failed: Driver Not Loaded)")
    assert "\n" not in message


def test_modules_import_without_pynvml():
    code = (
        "import sys; sys.modules['pynvml'] = None\n"
        "import dlc.topology.discovery.discover, dlc.topology.discovery.nvml\n"
        "import dlc.topology.discovery.smi\n"
        "print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )

    assert done.stdout.strip() == "ok", done.stderr


def test_importing_discovery_does_not_load_pynvml():
    code = "import sys, dlc.topology.discovery.discover; print('pynvml' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )

    assert done.stdout.strip() == "False", done.stderr


@pytest.mark.parametrize(
    "source,want",
    [("topo-m", "nvidia-smi topo -m text"), ("something", "something")],
    ids=["topo-m", "unknown"],
)
def test_describe_other_sources(source, want):
    from dataclasses import replace

    topo = replace(discover(from_file=RTX5090), source=source)

    assert describe_source(topo) == want
