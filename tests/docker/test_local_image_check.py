"""``dlc local`` refuses at submit an image its Docker engine lacks and its registry has not."""

from __future__ import annotations

import pytest

from dlc.app.local import LocalImageCheck
from dlc.errors import ImageNotFound
from dlc.scheduler.jobs.job import JobSpec


def spec(image: str) -> JobSpec:
    return JobSpec.from_dict({"image": image, "gpus": 1})


def test_a_missing_image_is_refused_at_submit_and_present_ones_pass(
    docker_runtime, busybox_image, local_registry
):
    check = LocalImageCheck(docker_runtime)
    assert check(spec(busybox_image))[0] == busybox_image  # on the engine
    missing = f"{local_registry}/dlc-test/no-such-image:1"
    with pytest.raises(ImageNotFound) as raised:
        check(spec(missing))
    assert str(raised.value) == (
        f"image: {missing} is not on this host's Docker engine and its registry does not have "
        "it; check the name and tag (or build/pull it first)"
    )
    # a registry that cannot be reached at all (an offline laptop): the pull at launch would
    # fail the same way, so the submit is refused now (it was queued, then failed)
    offline = "127.0.0.1:9/dlc-test/somewhere:1"
    with pytest.raises(ImageNotFound) as raised:
        check(spec(offline))
    assert str(raised.value) == (
        f"image: {offline} is not on this host's Docker engine and its registry 127.0.0.1:9 "
        "cannot be reached (connection refused); pull or load it on this host first (docker "
        "pull, docker load), or check the name"
    )


def test_the_core_refuses_the_submit_and_queues_nothing(docker_runtime, local_registry):
    from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
    from dlc.store.memory import MemoryJobStore

    core = SchedulerCore(MemoryJobStore(), CoreConfig(), LocalImageCheck(docker_runtime))
    with pytest.raises(ImageNotFound, match="is not on this host's Docker engine"):
        core.submit("alice", spec(f"{local_registry}/dlc-test/typo:1"))
    assert core.all_jobs() == []
