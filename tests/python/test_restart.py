"""watch() across a coordinator killed (SIGKILL) and restarted from its state folder."""
from __future__ import annotations

import itertools

import retort
from conftest import Cluster, wait_for
from test_client import EventLog


def test_watch_reconnects_across_a_coordinator_restart(cluster: Cluster) -> None:
    c = cluster.coordinator()
    bounds = itertools.cycle([5, 6])
    with retort.Client(c.address, timeout=2) as client:
        log = EventLog(client, reconnect_timeout=20, timeout=40)
        # A scale makes an event ("scale"): repeated until one arrives, it proves the stream
        # open before the kill.
        wait_for(lambda: client.scale(max_workers=next(bounds)) and log.events, 10, "an event")
        c.restart()
        wait_for(lambda: "reconnected" in log.kinds(), 20, f"reconnected in {log.kinds()}")
        kinds = log.kinds()
        assert kinds.index("disconnected") < kinds.index("reconnected"), kinds
        assert c.address in log.events[kinds.index("disconnected")].message
        # The restarted coordinator's events arrive on the same iterator.
        seen = len(log.events)
        client.scale(max_workers=7)
        wait_for(lambda: any(e.kind == "scale" and "max=7" in e.message
                             for e in log.events[seen:]), 10, "the new coordinator's event")
        assert client.status().max_workers == 7
        client.stop("done")
        log.thread.join(timeout=15)
    assert log.error is None, log.error
    assert not log.thread.is_alive()
    assert log.events[-1].state == "stopped", log.events[-1]
