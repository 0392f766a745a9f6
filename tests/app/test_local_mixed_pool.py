"""`dlc local --simulate A --simulate B`: a mixed pool, one agent per file, each advertised as
`dlc node-config` would advertise that machine, each giving its executors its own vendor."""

from __future__ import annotations

from dlc.app.local import LocalConfig, pool_specs
from dlc.topology.discovery.discover import discover
from dlc.topology.node_config import node_config
from tests.app.test_local import DGX1

MI300X = DGX1.parent / "mi300x-amd-smi.json"
BOTH = (str(DGX1), str(MI300X))


def test_one_agent_per_file_with_its_own_vendor_and_node_config_attributes():
    specs, topologies = pool_specs(LocalConfig(simulate=BOTH, cpus=64, mem_mib=262144))
    assert [s.hostname for s in specs] == ["127.0.0.1", "127.0.0.2"]
    assert [t.vendor for t in topologies] == ["nvidia", "amd"]
    # the AMD agent advertises exactly what `dlc node-config --from-file` prints for it
    amd = node_config(discover(from_file=MI300X), cpus=64, mem_mib=262144)
    assert specs[1].attributes == amd.attributes_text
    assert specs[1].resources == amd.resources + ";disk:65536"
    assert "gpu_vendor:vamd" in specs[1].attributes and "gpu_vendor" not in specs[0].attributes
    assert "dlc_sharing" not in specs[1].attributes  # AMD: no enforced shares
    # each agent's executors learn the vendor from their agent, as on a real AMD agent
    assert dict(specs[0].executor_env) == {"DLC_GPU_VENDOR": "nvidia", "DLC_GPU_STYLE": "none"}
    assert dict(specs[1].executor_env) == {"DLC_GPU_VENDOR": "amd", "DLC_GPU_STYLE": "none"}


def test_agents_n_runs_n_of_each_file_and_counts_them_all():
    specs, _ = pool_specs(LocalConfig(simulate=BOTH, agents=2))
    assert [s.hostname for s in specs] == [f"127.0.0.{i}" for i in (1, 2, 3, 4)]
    assert ["gpu_vendor:vamd" in s.attributes for s in specs] == [False, False, True, True]


def test_stand_in_devices_only_for_simulated_amd_agents(tmp_path):
    specs, _ = pool_specs(LocalConfig(simulate=BOTH, device_root=str(tmp_path)))
    assert dict(specs[0].executor_env)["DLC_GPU_STYLE"] == "none"  # NVIDIA needs a real driver
    assert dict(specs[1].executor_env) == {
        "DLC_GPU_VENDOR": "amd", "DLC_GPU_STYLE": "auto", "DLC_SIMULATED_GPUS": "1",
        "DLC_DEVICE_ROOT": str(tmp_path),
    }  # fmt: skip
