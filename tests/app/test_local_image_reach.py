"""``dlc local``'s submit-time image check tells a registry that cannot be reached (refused:
the pull at launch would fail the same way) from one that is slow or mirrored (accepted).
The engine is a stand-in here: its answers are the Docker engine's own words."""

from __future__ import annotations

import pytest

from dlc.app.local import LocalImageCheck
from dlc.errors import ImageNotFound
from dlc.scheduler.jobs.job import JobSpec


class _APIError(Exception):
    def __init__(self, explanation: str):
        super().__init__(explanation)
        self.explanation = explanation


class _Engine:
    """A Docker engine without the image, whose registry lookup fails with ``answer``."""

    def __init__(self, answer: str, mirrors: list[str] | None = None):
        self.answer, self.mirrors, self.asked = answer, mirrors or [], 0
        self._docker = type("docker", (), {"errors": type("errors", (), {"APIError": _APIError})})
        self.client = self
        self.api = self

    def image_env(self, image: str):
        return None

    def inspect_distribution(self, image: str):
        self.asked += 1
        raise _APIError(self.answer)

    def info(self) -> dict:
        return {"RegistryConfig": {"Mirrors": self.mirrors}}


NO_HOST = (
    'Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on '
    "10.255.255.53:53: no such host"
)
TIMEOUT = 'Get "https://registry-1.docker.io/v2/": dial tcp 1.2.3.4:443: i/o timeout'


def check(engine: _Engine, image: str = "nosuch/image:1"):
    return LocalImageCheck(engine)(JobSpec.from_dict({"image": image, "gpus": 1}))


def test_an_unknown_registry_host_is_refused_at_submit():
    with pytest.raises(ImageNotFound) as raised:
        check(_Engine(NO_HOST))
    assert str(raised.value) == (
        "image: nosuch/image:1 is not on this host's Docker engine and its registry docker.io "
        "cannot be reached (no such host); pull or load it on this host first (docker pull, "
        "docker load), or check the name"
    )


@pytest.mark.parametrize(
    "engine",
    [
        pytest.param(_Engine(TIMEOUT), id="slow-registry"),
        pytest.param(_Engine(NO_HOST, mirrors=["https://mirror.example"]), id="hub-mirror"),
    ],
)
def test_a_slow_or_mirrored_registry_is_accepted(engine):
    assert check(engine)[0] == "nosuch/image:1"
    assert engine.asked == 1


def test_a_mirror_of_docker_hub_does_not_serve_other_registries():
    engine = _Engine("dial tcp 127.0.0.1:9: connect: connection refused", ["https://m.example"])
    with pytest.raises(ImageNotFound, match=r"registry 127\.0\.0\.1:9 cannot be reached"):
        check(engine, "127.0.0.1:9/x:1")
