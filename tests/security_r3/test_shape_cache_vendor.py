"""Red-team 2026-11-26 (second pass), finding 36: one user's AMD job kept every NVIDIA job off.

The offer round's failure cache skips a job when a job of the same *kind* needing no more
already failed. The kind left out the GPU vendor and the image's ROCm release, which placement
checks per agent: one ``--gpu-vendor amd --gpus 1 --cpus 0.1`` job that could not be placed
(AMD GPUs all busy, or none in the pool) made every later ``--gpus 1`` job of any user wait
"found for a job of this kind", round after round, while NVIDIA GPUs stood free.
"""

from __future__ import annotations

from dlc.mesos.offers import offer_view
from dlc.scheduler.jobs.job import Job, JobSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.scheduler.placement.shape_cache import ShapeBudget, kind_of
from tests.scheduler.helpers import offer, place


def _job(job_id: str, user: str, cpus: float, **extra) -> Job:
    spec = JobSpec.from_dict({"image": "busybox", "gpus": 1, "cpus": cpus, **extra})
    return Job(job_id, user, spec, submitted_at=0.0)


def test_a_failed_amd_job_does_not_keep_nvidia_jobs_off_free_gpus():
    nvidia = [offer_view(offer("o1", "a1", gpus=[0, 1]))]
    queue = [
        _job("j-mallory", "mallory", 0.1, gpu_vendor="amd"),  # no AMD agent: fails
        _job("j-alice", "alice", 1.0),
        _job("j-bob", "bob", 2.0, gpu_vendor="nvidia"),
    ]
    out = place(nvidia, queue, PlacementConfig("first-fit"), budget=ShapeBudget(4))
    assert {launch.job_id for launch in out.launches} == {"j-alice", "j-bob"}, out.waiting
    assert set(out.waiting) == {"j-mallory"}


def test_the_kind_tells_vendors_and_rocm_releases_apart():
    plain = _job("a", "u", 1.0)
    assert kind_of(plain) != kind_of(_job("b", "u", 1.0, gpu_vendor="amd"))
    amd = _job("c", "u", 1.0, gpu_vendor="amd", rocm_version="6.1")
    assert kind_of(amd) != kind_of(_job("d", "u", 1.0, gpu_vendor="amd", rocm_version="5.7"))
