"""A bounded slice of the HA fault run (the full run: `make ha-fault`, docs/ha.md).

Real ZooKeeper and PostgreSQL, started by scripts/zookeeper.sh and scripts/postgres.sh;
three instances; the leader is SIGKILLed or frozen until its session expires, at seeded
random points while jobs run. Nothing may be lost or doubled.
"""

from __future__ import annotations

from tests.ha.run import run


def test_killing_the_leader_loses_and_doubles_nothing():
    result = run(seed=7, kills=6)
    assert result["kills"] == 6 and result["jobs"] > 0
    assert result["jobs_lost"] == 0
    assert result["launched_twice"] == 0
    assert result["gpus_used_twice"] == 0
