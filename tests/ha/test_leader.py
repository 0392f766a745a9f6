"""dlc.app.leader on a real ZooKeeper: one leader, a standby takes over, redirects."""

from __future__ import annotations

import json
import threading
import time

import pytest

from dlc.app.leader import LeaderElection, ZkUrl
from dlc.errors import DlcError
from tests.services import ZooKeeper


@pytest.fixture(scope="module")
def zk(tmp_path_factory):
    server = ZooKeeper(tmp_path_factory.mktemp("zk"))
    yield server
    server.stop()


@pytest.mark.parametrize(
    "url", ["zk1:2181/dlc", "zk://zk1:2181", "zk://zk1/dlc", "zk://zk1:99999/dlc"]
)
def test_bad_zk_urls_are_one_line_errors(url):
    with pytest.raises(DlcError, match="--zk"):
        ZkUrl.parse(url)


def test_a_standby_takes_over_when_the_leader_goes_and_the_old_one_stops_at_once(zk):
    url = f"zk://{zk.hosts}/t-{time.time_ns()}"
    events = []
    elected = [threading.Event(), threading.Event()]
    a = LeaderElection(url, "http://a", elected[0].set, events.append, session_timeout_s=2)
    b = LeaderElection(url, "http://b", elected[1].set, events.append, session_timeout_s=2)
    a.start()
    assert elected[0].wait(10)
    b.start()
    # b stands in line once its own node is among the contenders, behind a's: only then does
    # "b is not elected" say something (a fixed sleep could end before b even asked)
    deadline = time.monotonic() + 30
    while len(b._lock.contenders()) < 2:
        assert time.monotonic() < deadline, "b never entered the election"
        time.sleep(0.05)
    assert json.loads(b._lock.contenders()[1])["api_url"] == "http://b"
    assert not elected[1].is_set() and b.leader()["api_url"] == "http://a"
    a.client._connection._socket.close()  # the leader's connection drops
    assert elected[1].wait(15)
    assert events and events[0] in ("suspended", "lost") and not a.leading.is_set()
    assert b.leader()["api_url"] == "http://b"
    a.stop()
    b.stop()
