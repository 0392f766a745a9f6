"""kubectl/Slurm habits in the job commands: -o json|yaml|wide, filters, --watch, --wait,
config-file contexts, completion of job ids, the `--` hint, closed pipes, "no logs yet"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import replace

import click
import pytest
import yaml
from click.testing import CliRunner

from dlc.api.logs import LogReader
from dlc.api.server import ApiServer
from dlc.cli.client_opts import complete_job_ids
from dlc.cli.job_view import exit_code
from dlc.cli.main import cli
from dlc.scheduler.core.facade import CoreConfig, SchedulerCore
from dlc.scheduler.jobs.job import JobSpec
from dlc.scheduler.placement.model import PlacementConfig
from dlc.store.sqlite import JobStore
from tests.fixture_files import FIXTURE_DIR


@pytest.fixture
def api(tmp_path):
    store = JobStore(tmp_path / "db")
    core = SchedulerCore(store, CoreConfig(placement=PlacementConfig("first-fit")), None)
    server = ApiServer(core, LogReader(lambda: None), lambda actions: None)
    server.start()
    alice = store.add_token("alice")
    admin = store.add_token("root", admin=True)
    env = {"DLC_API": server.url, "DLC_TOKEN": alice, "DLC_CONFIG": str(tmp_path / "cfg.yaml")}
    yield {"env": env, "core": core, "url": server.url, "alice": alice, "admin": admin,
           "tmp": tmp_path}  # fmt: skip
    server.stop()


def run(env, *args, input=None):
    return CliRunner().invoke(cli, [str(a) for a in args], env=env, input=input)


def submit(core, user="alice", **spec):
    return core.submit(user, JobSpec.from_dict({"image": "busybox", **spec})).job_id


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_jobs_status_kill_submit_print_the_api_objects(api, fmt):
    e, core = api["env"], api["core"]
    load = json.loads if fmt == "json" else yaml.safe_load
    job_id = submit(core, name="mnist")
    listing = run(e, "jobs", "-o", fmt)
    assert listing.exit_code == 0, listing.output
    assert [j["id"] for j in load(listing.output)] == [job_id]
    shown = load(run(e, "status", job_id, "-o", fmt).output)
    assert shown["id"] == job_id and shown["name"] == "mnist" and shown["history"]
    made = run(e, "submit", "--image", "x", "-o", fmt, "--", "true")
    assert made.exit_code == 0 and load(made.stdout)["state"] == "queued"
    killed = load(run(e, "kill", job_id, "-o", fmt).output)
    assert killed["state"] == "killed"


def test_wide_shows_more_columns_and_does_not_cut(api):
    e, core = api["env"], api["core"]
    job_id = submit(core, name="n" * 60, priority=0)
    normal = run(e, "jobs").output
    wide = run(e, "jobs", "-o", "wide").output
    assert "PRIO" in wide and "MEM" in wide and "PRIO" not in normal
    assert "n" * 60 in wide and "n" * 60 not in normal and job_id in normal


def test_message_column_uses_the_terminal_width(api):
    e, core = api["env"], api["core"]
    job_id = submit(core)
    core.store.save_job(replace(core.store.get_job(job_id), message="m" * 300))
    at200 = run({**e, "COLUMNS": "200"}, "jobs").output.splitlines()
    assert len(at200[1]) == 200 and at200[1].endswith("m\u2026")
    at300 = run({**e, "COLUMNS": "300"}, "jobs").output.splitlines()
    assert at300[1].count("m") > at200[1].count("m") > 100


def test_state_and_user_filters(api):
    e, core = api["env"], api["core"]
    mine = submit(core)
    theirs = submit(core, user="bob")
    run(e, "kill", mine)
    admin = {**e, "DLC_TOKEN": api["admin"]}
    ids = lambda *a: [j["id"] for j in json.loads(run(admin, "jobs", "-o", "json", *a).output)]  # noqa: E731
    assert set(ids()) == {mine, theirs}
    assert ids("--state", "killed") == [mine]
    assert ids("--state", "queued", "--user", "bob") == [theirs]
    assert ids("--user", "carol") == []
    bad = run(admin, "jobs", "--state", "sleeping")
    assert bad.exit_code == 2 and "'sleeping' is not one of" in bad.output


def test_jobs_watch_prints_changes_as_json_lines(api):
    e, core = api["env"], api["core"]
    job_id = submit(core)
    threading.Timer(0.3, lambda: core.kill(job_id, "alice")).start()
    result = run(e, "jobs", "--watch", "--interval", "0.2", "--rounds", "5", "-o", "json")
    assert result.exit_code == 0, result.output
    states = [json.loads(line)["state"] for line in result.output.splitlines()]
    assert states == ["queued", "killed"]


def test_status_watch_follows_until_the_end(api):
    e, core = api["env"], api["core"]
    job_id = submit(core)
    threading.Timer(0.3, lambda: core.kill(job_id, "alice")).start()
    result = run(e, "status", job_id, "--watch", "--interval", "0.1")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1].split()[2] == "killed"


@pytest.mark.parametrize(
    "state, message, code",
    [("finished", "exit code 0; last output: ok", 0), ("failed", "exit code 3; last: x", 3),
     ("failed", "agent gone", 1), ("killed", "killed by alice", 137), ("lost", "", 1)],
)  # fmt: skip
def test_exit_code_of_a_job(state, message, code):
    assert exit_code({"state": state, "message": message}) == code


def test_submit_wait_exits_with_the_jobs_code(api):
    e, core = api["env"], api["core"]
    killer = threading.Timer(0.4, lambda: core.kill(core.store.list_jobs()[0].job_id, "alice"))
    killer.start()
    result = run(e, "submit", "--image", "x", "--wait", "--interval", "0.1", "--", "sleep", "9")
    assert result.exit_code == 137, result.output
    assert "queued" in result.stderr and "killed" in result.stderr.splitlines()[-1]


def test_unknown_option_after_the_command_suggests_dashes(api):
    result = run(api["env"], "submit", "--image", "x", "ls", "-la")
    assert result.exit_code == 2
    line = result.output.strip()
    assert line.startswith("Error: No such option: -l; ") and "put the command after --" in line
    assert len(result.output.strip().splitlines()) == 1
    typo = run(api["env"], "submit", "--image", "x", "--gpu", "2")
    assert "'--gpus'?" in typo.output and "after --" not in typo.output


def test_login_contexts_and_precedence(api):
    e, url, tmp = api["env"], api["url"], api["tmp"]
    bare = {"DLC_CONFIG": e["DLC_CONFIG"], "DLC_API": None, "DLC_TOKEN": None}
    (tmp / "tok").write_text(api["admin"] + "\n")
    made = run(bare, "login", "--api", url, "--token-file", tmp / "tok", "--context", "ops")
    assert made.exit_code == 0, made.output
    assert "context ops" in made.output and "as root (admin)" in made.output
    wrong = run(bare, "login", "--api", url, "--token", "nope", "--context", "bad")
    assert wrong.exit_code == 1 and "does not accept this token" in wrong.output
    made = run(bare, "login", "--api", url, "--token", api["alice"], "--context", "me")
    assert made.exit_code == 0, made.output
    assert oct(os.stat(e["DLC_CONFIG"]).st_mode & 0o777) == "0o600"
    submit(api["core"], user="bob")
    count = lambda env, *a: len(json.loads(run(env, "jobs", "-o", "json", *a).output))  # noqa: E731
    assert count(bare) == 0  # "me" is current: alice sees none of bob's jobs
    assert count(bare, "--context", "ops") == 1
    assert count({**bare, "DLC_CONTEXT": "ops"}) == 1
    assert count({**bare, "DLC_CONTEXT": "ops"}, "--token", api["alice"]) == 0  # flag wins
    assert run(bare, "config", "use-context", "ops").exit_code == 0
    assert count(bare) == 1
    listing = json.loads(run(bare, "config", "get-contexts", "-o", "json").output)
    assert {c["name"]: c["current"] for c in listing} == {"me": False, "ops": True}
    assert api["alice"] not in run(bare, "config", "get-contexts").output
    missing = run(bare, "config", "use-context", "prod")
    assert missing.exit_code == 2
    assert "context: 'prod' is not in" in missing.output and "known: me, ops" in missing.output


def test_broken_config_file_is_one_line(api):
    bare = {"DLC_CONFIG": api["env"]["DLC_CONFIG"], "DLC_API": None, "DLC_TOKEN": None}
    with open(bare["DLC_CONFIG"], "w") as handle:
        handle.write("contexts: [1, 2\n")
    result = run(bare, "jobs")
    assert result.exit_code == 2 and result.output.startswith("Error: config: ")
    assert "not valid YAML" in result.output and len(result.output.splitlines()) == 1


def test_completion_lists_job_ids_and_stays_quiet_on_failure(api, monkeypatch):
    core = api["core"]
    one, two = submit(core), submit(core)
    monkeypatch.setenv("DLC_CONFIG", api["env"]["DLC_CONFIG"])
    ctx = click.Context(click.Command("status"))
    ctx.params = {"api": api["url"], "token": api["alice"]}
    assert sorted(complete_job_ids(ctx, None, "")) == sorted([one, two])
    assert complete_job_ids(ctx, None, one) == [one]
    ctx.params = {"api": "http://127.0.0.1:9", "token": "t"}
    assert complete_job_ids(ctx, None, "") == []


def test_completion_through_the_shell_protocol(api):
    job_id = submit(api["core"])
    env = {**os.environ, **api["env"], "_DLC_COMPLETE": "bash_complete",
           "COMP_WORDS": "dlc status ", "COMP_CWORD": "2"}  # fmt: skip
    out = subprocess.run([sys.executable, "-m", "dlc", ], env=env, capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert f"plain,{job_id}" in out.stdout, out.stderr


def test_logs_of_a_queued_job_with_follow_says_it_waits(api):
    e, core = api["env"], api["core"]
    job_id = submit(core)
    threading.Timer(0.3, lambda: core.kill(job_id, "alice")).start()
    result = run(e, "logs", "-f", "--interval", "0.1", job_id)
    assert result.exit_code == 0
    assert result.stderr.splitlines() == [
        f"job {job_id} is queued: no logs yet, waiting",
        f"job {job_id} ended (killed) with no stdout output",
    ]


@pytest.mark.parametrize("fmt", [[], ["-o", "json"]], ids=["report", "json"])
def test_closed_pipe_exits_quietly(fmt):
    dgx1 = FIXTURE_DIR / "dgx1-v100_nv1-nv2_mlx5_oneflow.txt"
    dlc = f"{sys.executable} -m dlc topology --from-file {dgx1} {' '.join(fmt)}"
    shell = f"{dlc} | head -1; exit ${{PIPESTATUS[0]}}"
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and len(done.stdout.splitlines()) == 1


DGX1 = FIXTURE_DIR / "dgx1-v100_nv1-nv2_mlx5_oneflow.txt"


@pytest.mark.parametrize(
    "args",
    [["images", "list"], ["images", "check", "--driver", "535.104.05"],
     ["topology", "--from-file", DGX1], ["node-config", "--from-file", DGX1]],
    ids=["images-list", "images-check", "topology", "node-config"],
)  # fmt: skip
def test_every_listing_speaks_json_and_yaml(args):
    as_json = CliRunner().invoke(cli, [*map(str, args), "-o", "json"])
    as_yaml = CliRunner().invoke(cli, [*map(str, args), "-o", "yaml"])
    assert as_json.exit_code == 0 and as_yaml.exit_code == 0, as_json.output + as_yaml.output
    assert json.loads(as_json.stdout) == yaml.safe_load(as_yaml.stdout)
