"""A mixed pool: a DGX-1 (NVIDIA) and an MI300X node (AMD) -> jobs land on their vendor."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dlc.errors import JobSpecError
from dlc.mesos.offers import offer_view
from dlc.scheduler.core.config import image_vendor
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.agent_facts import agent_vendor
from dlc.topology.discovery.discover import discover
from dlc.topology.node_config import agent_attributes
from tests.scheduler.helpers import place

from ..helpers import job, offer

ROOT = Path(__file__).resolve().parents[3]
DGX1 = ROOT.parent / "shared/fixtures/topology/dgx1-v100_nv1-nv2_mlx5_oneflow.txt"
MI300X = ROOT / "tests/fixtures/amd/mi300x-8gpu_amd-smi-topology-static_CONSTRUCTED.json"


def _pool(rocm: str = "6.4.1") -> list[dict]:
    nvidia = agent_attributes(replace(discover(from_file=DGX1), driver_version="550.54.15"))
    amd = agent_attributes(replace(discover(from_file=MI300X), driver_version=rocm))
    return [offer("o-dgx", "dgx1", attrs=nvidia), offer("o-mi300", "mi300x", attrs=amd)]


@pytest.mark.parametrize(
    ("spec", "agent"),
    [
        ({"gpu_vendor": "amd"}, "mi300x"),
        ({"gpu_vendor": "nvidia"}, "dgx1"),
        ({"cuda_version": "12.4"}, "dgx1"),  # a CUDA image never lands on AMD GPUs
        ({"gpu_vendor": "amd", "rocm_version": "6.4"}, "mi300x"),
    ],
)
def test_jobs_land_on_the_vendor_they_ask_for(spec, agent):
    result = place(_pool(), [job("j1", gpus=4, **spec)])
    assert [launch.agent_id for launch in result.launches] == [agent]


def test_refusals_say_why_in_one_line():
    amd_only = [_pool()[1]]
    result = place(amd_only, [job("cuda", gpus=1, cuda_version="12.4")])
    assert "built for NVIDIA CUDA 12.4; host-mi300x has amd GPUs" in result.waiting["cuda"]
    result = place(amd_only, [job("nv", gpus=1, gpu_vendor="nvidia")])
    assert "has amd GPUs, the job asks for nvidia" in result.waiting["nv"]
    far = [_pool(rocm="6.1")[1]]
    result = place(far, [job("old", gpus=1, gpu_vendor="amd", rocm_version="6.4")])
    assert "more than 2 releases" in result.waiting["old"]


def test_xgmi_group_kept_whole_on_the_amd_agent():
    result = place(_pool(), [job("j1", gpus=8, gpu_vendor="amd")])
    assert result.launches[0].gpu_ids == tuple(range(8))


def test_agent_vendor_defaults_to_nvidia_for_old_agents():
    assert agent_vendor({}, None) == "nvidia"
    assert agent_vendor({"gpu_vendor": "vamd"}, None) == "amd"


def test_framework_implies_vendor_and_shares_refused_on_amd():
    spec = JobSpec.from_dict({"framework": "pytorch:2.6", "gpu_vendor": "amd"})
    assert image_vendor(spec) == ("amd", "6.4")
    assert image_vendor(JobSpec.from_dict({"framework": "pytorch:2.6"})) == ("nvidia", None)
    with pytest.raises(JobSpecError, match="not offered on AMD GPUs"):
        JobSpec.from_dict({"image": "rocm/pytorch:latest", "gpus": 0.5, "gpu_vendor": "amd"})
    with pytest.raises(JobSpecError, match="gpu_vendor: 'intel' is not a GPU vendor"):
        JobSpec.from_dict({"image": "busybox", "gpu_vendor": "intel"})


@pytest.mark.mesos
def test_real_master_keeps_the_vendor_and_placement_reads_it(tmp_path):
    """A real Mesos 1.11 agent started with an MI300X's flags reports the vendor back, and
    placement on the master's view of the agent lands AMD jobs and refuses CUDA images."""
    import json
    import urllib.request

    from dlc.topology.node_config import node_config
    from tests.real_mesos import real_mesos_master

    topo = replace(discover(from_file=MI300X), driver_version="6.4.1")
    config = node_config(topo, cpus=2, mem_mib=1024)
    with real_mesos_master(tmp_path / "run", **config.env()) as mesos:
        url = f"http://{mesos.address}/master/slaves"
        agent = json.loads(urllib.request.urlopen(url, timeout=10).read())["slaves"][0]
    attrs = agent["attributes"]
    assert (attrs["gpu_vendor"], attrs["rocm"]) == ("vamd", "v6.4.1")
    assert "gpu_mem" not in agent["resources"]  # no share ranges on AMD
    offers = [offer("o1", "mi300x", attrs=attrs)]
    assert [la.agent_id for la in place(offers, [job("a", gpus=8, gpu_vendor="amd")]).launches] == [
        "mi300x"
    ]
    refused = place(offers, [job("c", gpus=1, cuda_version="12.4")])
    assert not refused.launches and "built for NVIDIA CUDA" in refused.waiting["c"]


def test_a_vendor_no_agent_has_is_refused_at_submit_in_one_line():
    # new-user walkthrough (issue 30): --gpu-vendor amd on an NVIDIA-only cluster was
    # accepted and waited forever; now submit names the field, the vendors there and the fix
    from dlc.scheduler.placement.inventory import Inventory

    inventory = Inventory()
    inventory.note_offers([offer_view(_pool()[0])])  # the DGX-1 only
    amd = JobSpec.from_dict({"image": "rocm/pytorch:latest", "gpus": 1, "gpu_vendor": "amd"})
    with pytest.raises(JobSpecError) as refused:
        inventory.check(amd)
    assert str(refused.value) == (
        "gpu_vendor: no agent has amd GPUs (the agents have: nvidia); drop --gpu-vendor, pick "
        "an image for those GPUs, or ask an admin"
    )
    inventory.check(replace(amd, gpus=0))  # a job without GPUs runs anywhere
    inventory.note_offers([offer_view(o) for o in _pool()])  # the MI300X joins
    inventory.check(amd)
