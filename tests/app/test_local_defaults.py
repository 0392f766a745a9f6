"""``dlc local`` defaults: a simulated machine advertises a GPU model and offers enough
CPUs/memory that the shipped examples fill it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlc.app.local import LocalConfig, agent_spec, default_resources, model_from_file_name
from dlc.cli.submit_cmd import load_spec_file
from dlc.mesos.resources import attributes_summary, parse_attributes
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.model import PlacementConfig
from tests.scheduler.helpers import job, offer, place

ROOT = Path(__file__).resolve().parents[2]
DGX1 = ROOT / "examples" / "topologies" / "dgx1-v100.txt"


@pytest.mark.parametrize(
    "name, model",
    [("dgx1-v100.txt", "V100"), ("hgx-a100_nv12.txt", "A100"), ("p40-8gpu.txt", "P40"),
     ("rtx4090-8gpu.txt", None), ("machine.txt", None), ("l40s-box.txt", "L40S")],
)  # fmt: skip
def test_model_from_file_name(name, model):
    assert model_from_file_name(f"/x/{name}") == model


def test_defaults_keep_the_hosts_numbers_for_this_host():
    assert default_resources(8, 2.0, 4096, simulated=False) == (2.0, 4096)
    cpus, mem = default_resources(8, 2.0, 4096, simulated=True)
    assert cpus == pytest.approx(8 * 4.1) and mem == 8 * (16384 + 64)


def _offer_of(config: LocalConfig):
    spec, topo = agent_spec(config)
    resources = dict(part.split(":", 1) for part in spec.resources.split(";"))
    attrs = attributes_summary(parse_attributes(spec.attributes))
    return resources, attrs, topo


def test_simulated_dgx1_advertises_v100_and_the_v100_example_fills_it():
    resources, attrs, topo = _offer_of(LocalConfig(simulate=str(DGX1)))
    assert {g.model for g in topo.gpus} == {"V100"}
    assert "V100" in attrs["gpu_model"]
    example = JobSpec.from_dict(load_spec_file(str(ROOT / "examples" / "tensorflow-v100.yaml")))
    agent = offer("o1", "a1", list(range(8)), cpus=float(resources["cpus"]),
                  mem=float(resources["mem"]), attrs=attrs)  # fmt: skip
    jobs = [job(f"j{i}", gpus=example.gpus, gpu_model="V100", cpus=example.cpus,
                mem_mib=example.mem_mib) for i in range(4)]  # fmt: skip
    result = place([agent], jobs, PlacementConfig("first-fit"))
    assert len(result.launches) == 4, result.waiting  # all 8 GPUs busy


def test_gpu_model_flag_wins_and_host_numbers_can_be_forced():
    resources, attrs, topo = _offer_of(
        LocalConfig(simulate=str(DGX1), gpu_model="Tesla V100-SXM2-16GB", cpus=3, mem_mib=5000)
    )
    assert {g.model for g in topo.gpus} == {"Tesla V100-SXM2-16GB"}
    assert float(resources["cpus"]) == 3 and int(resources["mem"]) == 5000
