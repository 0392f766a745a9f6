"""The optional ``share`` field of LaunchSpec: encode/decode round trip and bad input."""

from __future__ import annotations

import base64
import json

import pytest

from dlc.errors import DlcError
from dlc.scheduler.jobs.launch_spec import GpuShare, LaunchSpec

UUID = "GPU-094dfacd-6ee2-c0d6-540b-1740f12448d1"


@pytest.mark.parametrize(
    "share",
    [
        GpuShare(0, UUID, 4096, 250, "mps", gpu_minor=0),
        GpuShare(2, None, 8192, 0, "watchdog"),
        GpuShare(1, "MIG-5c89852c-d268-c3f3-1b07-005d5ae1dc3f", 0, 0, "mig"),
        GpuShare(3, None, 0, 500, "none"),
    ],
    ids=["mps", "watchdog", "mig", "none"],
)
def test_share_round_trips(share):
    spec = LaunchSpec(job_id="j1", image="busybox", share=share)
    back = LaunchSpec.decode(spec.encode())
    assert back == spec and back.share == share and back.gpu_ids == ()


def test_spec_without_share_still_decodes_from_an_old_scheduler():
    body = json.loads(LaunchSpec(job_id="j1", image="busybox").to_json())
    del body["share"]
    data = base64.b64encode(json.dumps(body).encode()).decode()
    assert LaunchSpec.decode(data).share is None


@pytest.mark.parametrize(
    "share, message",
    [
        ({"gpu_index": -1}, "share.gpu_index"),
        ({"gpu_index": 0, "core_milli": 1001}, "share.core_milli: 1001 is not in 0..1000"),
        ({"gpu_index": 0, "memory_mib": -5}, "share.memory_mib"),
        ({"gpu_index": 0, "backend": "hami"}, "share.backend: 'hami' is not one of mps"),
        ({"memory_mib": 5}, "share must be a JSON object with gpu_index"),
        ([1, 2], "share must be a JSON object"),
    ],
    ids=["negative-index", "core-over", "negative-memory", "unknown-backend", "no-index", "list"],
)
def test_bad_share_is_a_one_line_error(share, message):
    body = json.loads(LaunchSpec(job_id="j1", image="busybox").to_json())
    body["share"] = share
    with pytest.raises(DlcError, match=message) as err:
        LaunchSpec.from_json(json.dumps(body))
    assert "\n" not in str(err.value)
