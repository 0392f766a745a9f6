"""import_pymesos() must leave the host program's SIGINT handler and logging alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run_python(code: str) -> str:
    """Runs ``code`` in a fresh interpreter (pymesos's side effects happen once per process)."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return result.stdout.strip()


def test_sigint_handler_is_restored() -> None:
    out = run_python(
        """
        import signal
        def mine(signum, frame):
            pass
        signal.signal(signal.SIGINT, mine)
        from dlc.mesos import import_pymesos
        import_pymesos()
        print(signal.getsignal(signal.SIGINT) is mine)
        """
    )
    assert out == "True"


def test_default_sigint_handler_is_restored() -> None:
    out = run_python(
        """
        import signal
        from dlc.mesos import import_pymesos
        import_pymesos()
        print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        """
    )
    assert out == "True"


def test_pymesos_logs_once_through_the_applications_logging() -> None:
    out = run_python(
        """
        import io, logging
        stream = io.StringIO()
        logging.basicConfig(stream=stream, level=logging.INFO, format="%(name)s %(message)s")
        from dlc.mesos import import_pymesos
        import_pymesos()
        logging.getLogger("pymesos.scheduler").info("hello")
        print(repr(stream.getvalue()))
        print(len(logging.getLogger("pymesos").handlers))
        """
    )
    assert out.splitlines() == [repr("pymesos.scheduler hello\n"), "0"]


def test_second_call_returns_the_same_module() -> None:
    out = run_python(
        """
        from dlc.mesos import import_pymesos
        print(import_pymesos() is import_pymesos())
        """
    )
    assert out == "True"
