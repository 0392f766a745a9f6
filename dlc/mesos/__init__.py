"""Mesos plumbing shared by DLC's scheduler, executor and tests.

* :func:`import_pymesos` - the one place that imports pymesos and undoes its import-time side
  effects. Every DLC module that needs pymesos calls it instead of ``import pymesos``.
* :mod:`dlc.mesos.resources` - mesos-agent ``--resources``/``--attributes`` flag syntax and
  v1 JSON Resource helpers.
* :mod:`dlc.mesos.codec` - the scheduling core's engine port for Mesos: v1 offers read into
  views (:mod:`dlc.mesos.offers`), launches written as v1 TaskInfos (:mod:`dlc.mesos.task_info`).
* :mod:`dlc.mesos.executor_endpoint` - points pymesos's executor driver at the agent's real
  executor API path.
* :mod:`dlc.mesos.emulator.cluster` - the in-process Mesos master + agent emulator.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any

#: what ``signal.getsignal`` returns
SigHandler = Callable[[int, FrameType | None], Any] | int | None

_import_lock = threading.Lock()
_pymesos: ModuleType | None = None


def import_pymesos() -> ModuleType:
    """Imports pymesos once, without its process-wide side effects.

    pymesos 0.3.15 does two things at import time that a library must not do to its host
    program: ``pymesos/__init__.py`` attaches a ``StreamHandler`` to the ``pymesos`` logger (so
    every line is printed twice once the application configures root logging), and
    ``pymesos/process.py`` replaces the SIGINT handler. This removes that handler (the records
    still propagate to the application's own logging configuration) and restores the SIGINT
    handler that was installed before the import.

    Call it from the main thread first: pymesos's ``signal.signal`` call raises ``ValueError``
    when its first import happens on another thread.

    pymesos's SIGINT hook is how it re-raises a driver-thread exception in the main thread; DLC
    wraps every driver callback instead, so nothing is lost.

    Returns:
        The ``pymesos`` module.

    Raises:
        DlcError: pymesos (or its ``http-parser`` dependency) is not installed.
    """
    global _pymesos
    with _import_lock:
        if _pymesos is not None:
            return _pymesos
        on_main_thread = threading.current_thread() is threading.main_thread()
        previous = signal.getsignal(signal.SIGINT) if on_main_thread else None
        try:
            import pymesos
        except ImportError as exc:
            from dlc.errors import DlcError

            raise DlcError(
                f"cannot import pymesos ({exc}); run scripts/setup-python.sh, which installs "
                "DLC's http-parser shim from compat/http-parser before pymesos"
            ) from None
        if on_main_thread:
            _restore_sigint(previous, pymesos)
        logger = logging.getLogger("pymesos")
        for handler in list(logger.handlers):
            if type(handler) is logging.StreamHandler:
                logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
        _pymesos = pymesos
        return pymesos


def _restore_sigint(previous: SigHandler, pymesos: ModuleType) -> None:
    """Puts back the SIGINT handler pymesos replaced (or Python's default if it came first)."""
    hook = getattr(pymesos.process, "_handle_sigint", None)
    if signal.getsignal(signal.SIGINT) is not hook:
        return
    if previous is None or previous is hook:
        previous = signal.default_int_handler
    signal.signal(signal.SIGINT, previous)
