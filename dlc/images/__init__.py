"""The framework image catalog (see :mod:`dlc.images.catalog`)."""

from dlc.images.catalog import (
    Catalog,
    ImageEntry,
    current_catalog,
    driver_supports,
    load_catalog,
    resolve,
    rocm_supports,
)

__all__ = [
    "Catalog",
    "ImageEntry",
    "current_catalog",
    "driver_supports",
    "load_catalog",
    "resolve",
    "rocm_supports",
]
