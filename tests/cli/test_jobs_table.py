"""`dlc jobs` stays readable whatever one job holds: long names, markup, control characters."""

from __future__ import annotations

from dataclasses import replace

from click.testing import CliRunner

from dlc.api.logs import LogReader
from dlc.api.server import ApiServer
from dlc.cli.main import cli
from dlc.cli.output import CUT_NOTE, clean, cut
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore

#: the longest image the grammar accepts: a 255-character name and a 128-character tag
LONGEST_IMAGE = "r.io/" + "a" * 250 + ":" + "t" * 128


def test_cell_cuts_blanks_and_ignores_markup():
    assert cut(clean("x" * 50), 10) == "x" * 9 + "\u2026"
    assert clean("a\0b\nc\x1b") == "a b c "
    assert clean("[bold]x[/]") == "[bold]x[/]"  # shown as written, not as style


def test_one_huge_job_does_not_break_the_listing(tmp_path):
    store = JobStore(tmp_path / "db")
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")), None)
    server = ApiServer(core, LogReader(lambda: None), lambda actions: None)
    server.start()
    try:
        env = {"DLC_API": server.url, "DLC_TOKEN": store.add_token("alice")}
        huge = core.submit("alice", JobSpec.from_dict({"image": LONGEST_IMAGE}))
        # container output lands in the message: markup and control characters included
        message = "last output: [/] [bold red]boom\0\x1b[2J " + "y" * 5000
        store.save_job(replace(huge, message=message))
        plain = core.submit("alice", JobSpec.from_dict({"image": "busybox", "name": "plain"}))
        result = CliRunner().invoke(cli, ["jobs"], env=env)
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    assert huge.job_id in result.output and plain.job_id in result.output
    assert "plain" in result.output and "[/]" in result.output
    assert "\0" not in result.output and "\x1b" not in result.output
    widest = max(len(line) for line in result.output.splitlines())
    assert widest <= 150  # the message takes what the other columns leave of the line


def test_a_cut_message_is_marked_and_the_way_to_see_it_whole_is_said(tmp_path):
    store = JobStore(tmp_path / "db")
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")), None)
    server = ApiServer(core, LogReader(lambda: None), lambda actions: None)
    server.start()
    try:
        env = {"DLC_API": server.url, "DLC_TOKEN": store.add_token("alice"), "COLUMNS": "120"}
        job = core.submit("alice", JobSpec.from_dict({"image": "busybox"}))
        store.save_job(replace(job, message="waiting: " + "because " * 40 + "THE END"))
        cut_down = CliRunner().invoke(cli, ["jobs"], env=env)
        whole = CliRunner().invoke(cli, ["jobs", "-o", "wide"], env=env)
    finally:
        server.stop()
    assert "\u2026" in cut_down.stdout and "THE END" not in cut_down.stdout
    assert cut_down.stderr == CUT_NOTE + "\n"
    assert "THE END" in whole.stdout and whole.stderr == ""


def test_the_queue_marks_a_reason_cut_at_the_lines_end(capsys, monkeypatch):
    from dlc.cli.queue_cmd import print_table

    monkeypatch.setenv("COLUMNS", "150")
    long_reason = "next to run; not enough cpus beside the free GPU shares: " + "x" * 100
    print_table(("POS", "ID", "USER", "GROUP", "POOL", "PRIO", "GPUS", "REASON"),
                [(1, "jf6f2d657", "admin", "- #1", "default", 0, "0.125", long_reason)],
                width=120)  # fmt: skip
    out, err = capsys.readouterr()
    row = out.splitlines()[1]
    assert row.endswith("\u2026") and len(row) <= 150  # was cropped at 150 with no mark
    assert err == CUT_NOTE + "\n"
    print_table(("POS", "ID", "REASON"), [(1, "j1", "short")], width=120)
    assert capsys.readouterr().err == ""
