"""The image catalog: resolution, driver rules and site overrides."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlc.errors import DlcError, ImageNotFound
from dlc.images.catalog import load_catalog, version_key


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.mark.parametrize(
    ("spec", "version", "image_part"),
    [
        pytest.param("pytorch:2.3", "2.3.1", "pytorch/pytorch:2.3.1-cuda12.1", id="minor-prefix"),
        pytest.param("pytorch:2.3.1", "2.3.1", "pytorch/pytorch:2.3.1", id="exact"),
        pytest.param("PyTorch:1.13", "1.13.1", "cuda11.7", id="name-case-insensitive"),
        pytest.param("tensorflow:2.15", "2.15.0", "tensorflow/tensorflow:2.15.0-gpu", id="tf"),
    ],
)
def test_resolve(catalog, spec, version, image_part):
    entry = catalog.resolve(spec)
    assert entry.version == version
    assert image_part in entry.image


def test_bare_name_is_newest_version(catalog):
    versions = [e.version for e in catalog.entries("pytorch")]
    assert catalog.resolve("pytorch").version == max(versions, key=version_key)


def test_prefix_does_not_match_longer_number(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text(
        'frameworks:\n  toy:\n    "2.3.0": {image: "r/toy:2.3", cuda: null}\n'
        '    "2.30.0": {image: "r/toy:2.30", cuda: null}\n'
    )
    assert load_catalog(site).resolve("toy:2.3").version == "2.3.0"


@pytest.mark.parametrize(
    ("spec", "listed"),
    [
        pytest.param("pytorch:9.9", "2.3.1", id="unknown-version-lists-versions"),
        pytest.param("caffe:1.0", "pytorch", id="unknown-framework-lists-frameworks"),
    ],
)
def test_unknown_is_image_not_found_listing_known(catalog, spec, listed):
    with pytest.raises(ImageNotFound, match=listed):
        catalog.resolve(spec)


@pytest.mark.parametrize(
    ("driver", "cuda", "minor_compat", "ok"),
    [
        pytest.param("520.61.05", "11.8", False, True, id="11.8-at-floor"),
        pytest.param("520.61.04", "11.8", False, False, id="11.8-just-below"),
        pytest.param("530.30.02", "12.1", False, True, id="12.1-at-floor"),
        pytest.param("550.54.14", "12.4", False, True, id="12.4-at-floor"),
        pytest.param("535.104.05", "12.4", False, False, id="12.4-needs-550"),
        pytest.param("535.104.05", "12.4", True, True, id="12.4-minor-compat-on-535"),
        pytest.param("525.60.12", "12.1", True, False, id="below-minor-compat-floor"),
        pytest.param("450.80.02", "12.1", True, False, id="other-major-no-compat"),
        pytest.param("390.1", None, False, True, id="cpu-image-runs-anywhere"),
    ],
)
def test_driver_supports(catalog, driver, cuda, minor_compat, ok):
    assert catalog.driver_supports(driver, cuda, minor_compat) is ok


def test_every_entry_has_a_driver_floor(catalog):
    for entry in catalog.entries():
        if entry.vendor == "amd":  # ROCm images: a known release instead of a CUDA floor
            assert entry.rocm in catalog.rocm_releases and entry.cuda is None
            continue
        assert entry.cuda in catalog.cuda_min_driver
        assert entry.min_driver == catalog.cuda_min_driver[entry.cuda]


def test_rocm_images_imply_amd_and_resolve_by_vendor(catalog):
    entry = catalog.resolve("pytorch:2.6", vendor="amd")
    assert (entry.framework, entry.rocm, entry.vendor) == ("pytorch-rocm", "6.4", "amd")
    assert entry.image.startswith("rocm/pytorch:rocm6.4")
    assert catalog.resolve("pytorch:2.6").vendor == "nvidia"  # no vendor: the CUDA build
    assert catalog.resolve("tensorflow-rocm").vendor == "amd"
    with pytest.raises(ImageNotFound, match="built for AMD ROCm, not NVIDIA"):
        catalog.resolve("pytorch-rocm:2.6", vendor="nvidia")


@pytest.mark.parametrize(
    ("agent", "image", "ok"),
    [("6.4", "6.4", True), ("6.2", "6.4", True), ("6.1", "6.4", False), ("7.2", "6.4", False),
     ("6.4.1", "6.2", True)],
)  # fmt: skip
def test_rocm_driver_within_two_releases(catalog, agent, image, ok):
    assert catalog.rocm_supports(agent, image) is ok


def test_unknown_rocm_release_is_named(catalog):
    with pytest.raises(DlcError, match="rocm: 9.9 is not a known ROCm release"):
        catalog.rocm_supports("9.9", "6.4")


def test_catalog_covers_recent_years(catalog):
    torch = {e.version.rsplit(".", 1)[0] for e in catalog.entries("pytorch")}
    tf = {e.version.rsplit(".", 1)[0] for e in catalog.entries("tensorflow")}
    assert {"1.13", "2.0", "2.1", "2.2", "2.3", "2.4", "2.5"} <= torch
    assert {"2.11", "2.12", "2.13", "2.14", "2.15", "2.16", "2.17"} <= tf


def test_site_file_overrides_and_adds(tmp_path):
    site = tmp_path / "images.yaml"
    site.write_text(
        textwrap.dedent(
            """
            frameworks:
              pytorch:
                "2.3.1": {image: "mirror.example:5000/pytorch/pytorch:2.3.1", cuda: "12.1"}
              jax:
                "0.4.30": {image: "mirror.example:5000/jax:0.4.30", cuda: "12.9"}
            """
        )
    )
    catalog = load_catalog(site)
    assert catalog.resolve("pytorch:2.3").image.startswith("mirror.example:5000/")
    assert catalog.resolve("pytorch:2.4").image.startswith("pytorch/")  # untouched
    assert catalog.resolve("jax").min_driver == "575.51.03"


def test_env_var_names_site_file(tmp_path, monkeypatch):
    site = tmp_path / "images.yaml"
    site.write_text('frameworks:\n  toy:\n    "1.0": {image: "r/toy:1"}\n')
    monkeypatch.setenv("DLC_IMAGES", str(site))
    assert load_catalog().resolve("toy").image == "r/toy:1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "frameworks:\n  toy:\n    '1.0': {cuda: '12.1'}\n", "needs an 'image'", id="no-image"
        ),
        pytest.param(
            "frameworks:\n  toy:\n    '1.0': {image: x, cuda: '99.9'}\n",
            "cuda_min_driver",
            id="cuda-without-floor",
        ),
        pytest.param("[1, 2]\n", "mapping", id="not-a-mapping"),
        pytest.param("frameworks: {toy: [1]}\n", "frameworks.toy", id="versions-not-mapping"),
        pytest.param("a: [\n", "not valid YAML", id="bad-yaml"),
    ],
)
def test_bad_site_file_is_one_line_error(tmp_path, text, message):
    site = tmp_path / "bad.yaml"
    site.write_text(text)
    with pytest.raises(DlcError, match=message) as info:
        load_catalog(site)
    assert str(site) in str(info.value) or "catalog" in str(info.value)


def test_missing_site_file(tmp_path):
    with pytest.raises(DlcError, match="cannot read"):
        load_catalog(tmp_path / "nope.yaml")


@given(
    st.lists(st.integers(0, 999), min_size=1, max_size=4),
    st.lists(st.integers(0, 999), min_size=1, max_size=4),
)
def test_version_key_orders_like_integer_tuples(a, b):
    va, vb = ".".join(map(str, a)), ".".join(map(str, b))
    assert (version_key(va) < version_key(vb)) == (tuple(a) < tuple(b))


def test_bad_driver_version_is_named():
    with pytest.raises(DlcError, match="dotted numbers"):
        load_catalog().driver_supports("latest", "12.1")


def test_shortcuts_follow_site_file_changes(tmp_path, monkeypatch):
    from dlc.images import driver_supports, resolve

    site = tmp_path / "images.yaml"
    site.write_text('frameworks:\n  toy:\n    "1.0": {image: "r/toy:1", cuda: "12.1"}\n')
    monkeypatch.setenv("DLC_IMAGES", str(site))
    assert resolve("toy").image == "r/toy:1"
    assert driver_supports("530.30.02", "12.1") is True
    site.write_text('frameworks:\n  toy:\n    "1.0": {image: "mirror/toy:1", cuda: "12.1"}\n')
    import os

    os.utime(site, ns=(1, 10**18))  # a different mtime even on coarse file systems
    assert resolve("toy").image == "mirror/toy:1"
