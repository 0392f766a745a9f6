"""`dlc logs --since T` against a running API on loopback: the executor's time index decides
where the output starts; ages and times parse, anything else is one clear line."""

from __future__ import annotations

import datetime
import time

import click
import pytest

from dlc.api.logs import offset_in_index
from dlc.cli.logs_cmd import parse_since
from dlc.executor.runtime import TIME_INDEX_SUFFIX, TimeIndex
from tests.cli.test_submit_cmd import env, offer_json, run  # noqa: F401 (fixture)
from tests.sandboxes import agent_sandbox


def _job_with_timed_output(e, core, tmp, pieces: list[tuple[float, str]]) -> str:
    """A finished job whose sandbox stdout got ``pieces`` at the given (fake) times, indexed
    by the executor's own :class:`TimeIndex`."""
    job_id = run(e, "submit", "--image", "x", "--", "train").output.split()[0]
    core.on_offers([offer_json("o1", "a1")])
    sandbox = agent_sandbox(tmp / "agents", f"{job_id}.0.0")
    clock = iter([t for t, _ in pieces])
    index = TimeIndex(str(sandbox / "stdout") + TIME_INDEX_SUFFIX, clock=lambda: next(clock))
    written = 0
    with open(sandbox / "stdout", "w") as out:
        for _, text in pieces:
            index.note(written)
            out.write(text)
            written += len(text.encode())
    task = {"task_id": {"value": f"{job_id}.0.0"}, "agent_id": {"value": "a1"}}
    core.on_status({**task, "state": "TASK_FINISHED"})
    return job_id


def test_logs_since_starts_at_the_first_output_of_that_time(env):  # noqa: F811
    e, core, tmp = env
    now = time.time()
    pieces = [(now - 3600, "old 1\n"), (now - 3599.5, "old 2\n"), (now - 300, "recent\n"),
              (now - 5, "new\n")]  # fmt: skip
    job_id = _job_with_timed_output(e, core, tmp, pieces)
    assert run(e, "logs", job_id, "--since", "10m").output == "recent\nnew\n"
    assert run(e, "logs", job_id, "--since", "1m").output == "new\n"
    assert run(e, "logs", job_id, "--since", "2h").output == "old 1\nold 2\nrecent\nnew\n"
    stamp = datetime.datetime.fromtimestamp(now - 400).isoformat(timespec="seconds")
    assert run(e, "logs", job_id, "--since", stamp).output == "recent\nnew\n"
    assert run(e, "logs", job_id, "--since", "10m", "--tail", "1").output == "new\n"
    none = run(e, "logs", job_id, "--since", "1s")
    assert none.exit_code == 0 and "no stdout output" in none.output


def test_bad_since_is_one_line_naming_the_option(env):  # noqa: F811
    e, core, tmp = env
    job_id = _job_with_timed_output(e, core, tmp, [(time.time(), "x\n")])
    result = run(e, "logs", job_id, "--since", "yesterday")
    assert result.exit_code == 2 and "--since" in result.output and "10m" in result.output
    with pytest.raises(click.BadParameter):
        parse_since("5 weeks")
    assert parse_since("90s", now=1000.0) == 910.0
    assert parse_since("1.5h", now=10000.0) == 4600.0


def test_index_lookup_ignores_garbage_and_stops_at_the_end():
    text = "100 0\nnot a line\n105 40\n110 90\n"
    assert offset_in_index(text, 99, 120) == 0
    assert offset_in_index(text, 101, 120) == 40
    assert offset_in_index(text, 110.7, 120) == 90  # one-second resolution
    assert offset_in_index(text, 111, 120) == 120  # nothing that new
    assert offset_in_index("", 5, 0) == 0


def test_time_index_writes_one_line_per_second(tmp_path):
    ticks = iter([10.1, 10.9, 11.0, 11.2, 15.0])
    index = TimeIndex(str(tmp_path / "stdout.ts"), clock=lambda: next(ticks))
    for offset in (0, 5, 9, 12, 30):
        index.note(offset)
    assert (tmp_path / "stdout.ts").read_text() == "10 0\n11 9\n15 30\n"
