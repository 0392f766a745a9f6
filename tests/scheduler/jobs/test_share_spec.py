"""GPU shares in the job spec (issue 12): --gpus F, --gpu-memory SIZE, their errors, admission."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from dlc.cli.main import cli
from dlc.errors import JobSpecError
from dlc.mesos.agents import decode_agents
from dlc.mesos.offers import offer_view
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.inventory import Inventory

BASE = {"image": "busybox:1.36"}


@pytest.mark.parametrize(
    "body, fraction, memory, gpus",
    [
        ({"gpus": 0.5}, 0.5, None, 1),
        ({"gpus": "0.25"}, 0.25, None, 1),
        ({"gpu_memory": "4G"}, None, 4096, 1),
        ({"gpu_memory": 512}, None, 512, 1),
        ({"gpu_memory": "1.5GiB"}, None, 1536, 1),
        ({"gpus": 0.5, "gpu_memory": "10G"}, 0.5, 10240, 1),
        ({"gpus": 2}, None, None, 2),
        ({"gpus": 2.0}, None, None, 2),
        ({"gpus": "3"}, None, None, 3),
    ],
)
def test_share_fields_parse(body, fraction, memory, gpus):
    spec = JobSpec.from_dict({**BASE, **body})
    assert (spec.gpu_fraction, spec.gpu_memory, spec.gpus) == (fraction, memory, gpus)
    assert spec.is_share == (fraction is not None or memory is not None)
    assert JobSpec.from_dict(spec.to_dict()) == spec


def test_share_amounts():
    half = JobSpec.from_dict({**BASE, "gpus": 0.5})
    assert (half.share_core_milli, half.share_memory_mib(32768)) == (500, 16384)
    mem = JobSpec.from_dict({**BASE, "gpu_memory": "4G"})
    assert (mem.share_core_milli, mem.share_memory_mib(32768)) == (0, 4096)
    assert mem.share_text == "4 GiB" and half.share_text == "0.5"


@pytest.mark.parametrize(
    "body, field, words",
    [
        ({"gpus": 1.5}, "gpus", "not a whole number"),
        ({"gpus": -1}, "gpus", "got -1"),
        ({"gpus": -0.5}, "gpus", "got -0.5"),
        ({"gpus": "half"}, "gpus", "whole number or a fraction"),
        ({"gpus": 65}, "gpus", "between 0 and 64"),
        ({"gpu_memory": "-4G"}, "gpu_memory", "more than 0"),
        ({"gpu_memory": 0}, "gpu_memory", "at least 1 MiB"),
        ({"gpu_memory": "4X"}, "gpu_memory", "not a size"),
        ({"gpus": 0.5, "nodes": 2}, "nodes", "one node"),
        ({"gpu_memory": "4G", "nodes": 2}, "nodes", "one node"),
        ({"gpus": 2, "gpu_memory": "4G"}, "gpu_memory", "ONE GPU"),
        # no share at all: named gpu_fraction (the user wrote no gpus), with both fixes
        ({"gpu_fraction": 0}, "gpu_fraction", "0 is no share of a GPU; pass --gpus 0"),
        ({"gpu_fraction": "0"}, "gpu_fraction", "0 is no share of a GPU; pass --gpus 0"),
        ({"gpu_fraction": -0.5}, "gpu_fraction", "-0.5 is no share of a GPU"),
        ({"gpus": 2, "gpu_fraction": 0}, "gpu_fraction", "or a share of one GPU 0 < F < 1"),
        ({"gpus": 0, "gpu_fraction": 0.5}, "gpu_fraction", "a CPU-only job (gpus: 0) takes no"),
        ({"gpus": 0, "gpu_memory": "4G"}, "gpu_memory", "a CPU-only job (--gpus 0) takes no"),
    ],
)
def test_bad_shares_get_one_line_errors(body, field, words):
    with pytest.raises(JobSpecError) as err:
        JobSpec.from_dict({**BASE, **body})
    assert err.value.field == field
    text = str(err.value)
    assert words in text and "\n" not in text and ("--" in text or "drop" in text)


def _inventory(mem_text: str | None) -> Inventory:
    inv = Inventory()
    totals = {"cpus": 16, "mem": 65536, "disk": 1000, "gpus": 2, "gpu_ids": "{0, 1}"}
    if mem_text:
        totals["gpu_mem"] = mem_text
        totals["gpu_core"] = "[0-999, 1048576-1049575]"
    inv.replace_agents(decode_agents([{"id": "a1", "hostname": "h1", "total_resources": totals}]))
    return inv


def test_admission_refuses_more_memory_than_any_gpu_has():
    inv = _inventory("[0-32767, 1048576-1081343]")
    inv.check(JobSpec.from_dict({**BASE, "gpu_memory": "32G"}))
    error = inv.impossible(JobSpec.from_dict({**BASE, "gpu_memory": "40G"}))
    assert error is not None and error.field == "gpu_memory"
    assert "no GPU has more than 32768 MiB" in str(error) and "--gpu-memory" in str(error)


def test_admission_refuses_shares_where_no_agent_takes_them():
    error = _inventory(None).impossible(JobSpec.from_dict({**BASE, "gpus": 0.5}))
    assert error is not None and error.field == "gpus" and "whole GPUs" in str(error)
    assert _inventory(None).impossible(JobSpec.from_dict({**BASE, "gpus": 1})) is None


@pytest.mark.parametrize(
    "args, words",
    [
        (["--gpus", "1.5"], "not a whole number"),
        (["--gpus", "-1"], "got -1"),
        (["--gpus", "0.5", "--nodes", "2"], "one node"),
        (["--gpu-memory", "lots"], "not a size"),
    ],
)
def test_submit_flags_errors_are_one_line(args, words):
    result = CliRunner().invoke(
        cli,
        ["submit", "--image", "busybox:1.36", *args, "--api", "http://127.0.0.1:9", "--", "true"],
    )
    assert result.exit_code != 0
    assert words in result.output and "Traceback" not in result.output


def test_the_cluster_view_reads_free_memory_and_compute_per_gpu_from_the_offers():
    from tests.scheduler.placement.test_share_placement import ranged_offer

    inv = _inventory("[0-32767, 1048576-1081343]")
    body = ranged_offer("o1", "a1", gpus=2, used={1: (4096, 250)})
    inv.note_offers([offer_view(body)])
    (agent,) = inv.view()
    free = {g.index: (g.memory_mib, g.free_memory_mib, g.free_compute_milli) for g in agent.gpus}
    assert free == {0: (32768, 32768, 1000), 1: (32768, 32768 - 4096, 750)}
