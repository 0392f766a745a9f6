"""Pure helpers of the Docker adapter: error wording, pull progress, image references."""

from __future__ import annotations

import pytest

from dlc.errors import ContainerError, ImageNotFound
from dlc.executor.runtime import _split_tag, explain_engine_error, pull_progress_text, registry_of


@pytest.mark.parametrize(
    ("text", "kind", "words"),
    [
        pytest.param(
            "manifest for x:1 not found: manifest unknown",
            ImageNotFound,
            "not found in registry",
            id="no-manifest",
        ),
        pytest.param(
            'Get "http://127.0.0.1:5999/v2/": dial tcp 127.0.0.1:5999: connect: connection refused',
            ContainerError,
            "unreachable",
            id="registry-down",
        ),
        pytest.param(
            'OCI runtime create failed: exec: "nosuch": executable file not found in $PATH',
            ContainerError,
            "bad command",
            id="bad-command",
        ),
        pytest.param(
            'exec: "/nosuch": stat /nosuch: no such file or directory',
            ContainerError,
            "bad command",
            id="bad-command-path",
        ),
        pytest.param(
            "pull access denied for x, repository does not exist or may require 'docker login'",
            ImageNotFound,
            "not found in registry",
            id="hub-no-repo",
        ),
        pytest.param("network foo not found", ContainerError, "docker: network", id="not-an-image"),
        pytest.param(
            "unauthorized: authentication required", ContainerError, "refused access", id="auth"
        ),
        pytest.param("something else", ContainerError, "docker: something else", id="other"),
    ],
)
def test_explain_engine_error(text, kind, words):
    err = explain_engine_error("127.0.0.1:5999/dlc/x:1", text)
    assert type(err) is kind
    assert words in str(err)


@pytest.mark.parametrize(
    ("image", "registry"),
    [
        pytest.param("pytorch/pytorch:2.3.1", "docker.io", id="hub"),
        pytest.param("busybox", "docker.io", id="library"),
        pytest.param("127.0.0.1:5000/dlc/x:1", "127.0.0.1:5000", id="local-port"),
        pytest.param("nvcr.io/nvidia/jax:24.04", "nvcr.io", id="dotted-host"),
        pytest.param("localhost/x", "localhost", id="localhost"),
    ],
)
def test_registry_of(image, registry):
    assert registry_of(image) == registry


@pytest.mark.parametrize(
    ("image", "repo", "tag"),
    [
        pytest.param("a/b:1", "a/b", "1", id="tag"),
        pytest.param("a/b", "a/b", "latest", id="no-tag"),
        pytest.param("127.0.0.1:5000/a/b", "127.0.0.1:5000/a/b", "latest", id="port-not-tag"),
        pytest.param("127.0.0.1:5000/a:2", "127.0.0.1:5000/a", "2", id="port-and-tag"),
        pytest.param("a@sha256:ab", "a", "sha256:ab", id="digest"),
    ],
)
def test_split_tag(image, repo, tag):
    assert _split_tag(image) == (repo, tag)


def test_pull_progress_text():
    mb = 1024 * 1024
    layers = {"l1": (6 * mb, 10 * mb), "l2": (6 * mb, 17 * mb)}
    assert pull_progress_text("img:1", layers) == "pulling img:1: 44% (12/27 MB)"
    assert pull_progress_text("img:1", {}) is None


def test_sandbox_copy_of_output_is_capped_and_says_so(tmp_path, monkeypatch):
    """One job printing without end must not fill the agent's disk (red-team finding)."""
    import collections

    from dlc.executor import runtime as runtime_module

    monkeypatch.setattr(runtime_module, "SANDBOX_LOG_CAP", 100)

    class Api:
        def logs(self, *args, **kwargs):
            return iter([b"x" * 60 + b"\n", b"y" * 60 + b"\n", b"last line\n"])

    class Client:
        api = Api()

    rt = runtime_module.DockerRuntime.__new__(runtime_module.DockerRuntime)
    rt.client = Client()
    import docker

    rt._docker = docker
    tail = collections.deque(maxlen=5)
    out = tmp_path / "stdout"
    rt._copy_stream("c1", str(out), True, False, tail)
    data = out.read_bytes()
    assert data.startswith(b"x" * 60 + b"\n" + b"y" * 39)
    assert b"output truncated here" in data and b"last line" not in data
    assert list(tail)[-1] == "last line"  # the terminal message still shows the real end
