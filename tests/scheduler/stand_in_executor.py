"""A stand-in for ``dlc executor`` in scheduler tests: runs the job's command without Docker.

It decodes the LaunchSpec from TaskInfo.data, writes ``gpu_ids=<ids>`` and the command's output
into the sandbox ``stdout`` (as the real executor writes container output there), and reports
TASK_RUNNING then TASK_FINISHED or TASK_FAILED. Like the real executor it names no sandbox path
in its updates: the scheduler finds the sandbox from the agent's layout (dlc/api/logs.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo, for `dlc`

from dlc.mesos import import_pymesos  # noqa: E402
from dlc.mesos.executor_endpoint import make_executor_driver  # noqa: E402
from dlc.scheduler.jobs.launch_spec import LaunchSpec  # noqa: E402


def _status(task, state, message, sandbox):
    return {
        "task_id": task["task_id"],
        "agent_id": task["agent_id"],
        "state": state,
        "message": message,
    }


class StandIn:
    def __init__(self):
        self.sandbox = os.environ.get("MESOS_SANDBOX") or os.environ.get("MESOS_DIRECTORY") or "."
        self.procs = {}

    def registered(self, driver, *args):
        pass

    def reregistered(self, driver, *args):
        pass

    def disconnected(self, driver):
        pass

    def launchTask(self, driver, task):  # noqa: N802
        threading.Thread(target=self._run, args=(driver, task), daemon=True).start()

    def _run(self, driver, task):
        spec = LaunchSpec.decode(task["data"])
        out = Path(self.sandbox, "stdout")
        with out.open("a") as fh:
            fh.write(f"gpu_ids={','.join(map(str, spec.gpu_ids))}\n")
            fh.flush()
            proc = subprocess.Popen(
                list(spec.command) or ["true"],
                stdout=fh,
                stderr=subprocess.STDOUT,
                env={**os.environ, **spec.env},
            )
            self.procs[task["task_id"]["value"]] = proc
            driver.sendStatusUpdate(_status(task, "TASK_RUNNING", "running", self.sandbox))
            code = proc.wait()
        if code == 0:
            state, msg = "TASK_FINISHED", "exit 0"
        elif code < 0:
            state, msg = "TASK_KILLED", f"signal {-code}"
        else:
            state, msg = "TASK_FAILED", f"exit {code}"
        driver.sendStatusUpdate(_status(task, state, msg, self.sandbox))
        threading.Timer(1.0, driver.stop).start()

    def killTask(self, driver, task_id):  # noqa: N802
        proc = self.procs.get(task_id["value"])
        if proc:
            proc.terminate()

    def frameworkMessage(self, driver, message):  # noqa: N802
        pass

    def shutdown(self, driver):
        for proc in self.procs.values():
            proc.terminate()

    def error(self, driver, message):
        pass


if __name__ == "__main__":
    import_pymesos()
    driver = make_executor_driver(StandIn())
    driver.run()
