"""Red-team 2026-11-26 (second pass), finding 38: ``dlc local``'s submit-time image check
remembered every image name it was asked about, forever (a user submitting and killing jobs
with a new image name each time grew the scheduler's memory without bound). It keeps at most
:attr:`LocalImageCheck.MAX_SEEN` names now.
"""

from __future__ import annotations

from dlc.app.local import LocalImageCheck
from dlc.scheduler.jobs.job import JobSpec


class _EngineHasEverything:
    def image_env(self, image: str) -> dict:
        return {}


def test_distinct_image_names_do_not_grow_the_cache_without_bound():
    now = [0.0]
    check = LocalImageCheck(_EngineHasEverything(), clock=lambda: now[0])
    last = LocalImageCheck.MAX_SEEN + 10
    for i in range(last + 1):
        now[0] += 0.001  # all within one TTL: pruning by age alone would keep them all
        check(JobSpec.from_dict({"image": f"127.0.0.1:9/probe-{i}:1", "gpus": 1}))
    assert len(check._seen) <= LocalImageCheck.MAX_SEEN
    assert f"127.0.0.1:9/probe-{last}:1" in check._seen  # the latest is remembered
