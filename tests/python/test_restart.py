"""watch() across a coordinator killed (SIGKILL) and restarted from its state folder."""
from __future__ import annotations

import retort
from conftest import Cluster, wait_for
from test_client import EventLog, ranked


def test_watch_reconnects_across_a_coordinator_restart(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.workers(c, 1)
    with retort.Client(c.address, timeout=2) as client:
        before = client.wait(lambda s: len(ranked(s)) == 1, timeout=15)
        log = EventLog(client, reconnect_timeout=20, timeout=40)
        # An event proves the stream open before the kill: pause and resume (two state
        # events) until one arrives.
        wait_for(lambda: client.pause() and client.resume() and log.events, 10, "an event")
        c.restart()
        wait_for(lambda: "reconnected" in log.kinds(), 20, f"reconnected in {log.kinds()}")
        kinds = log.kinds()
        assert kinds.index("disconnected") < kinds.index("reconnected"), kinds
        disconnected = log.events[kinds.index("disconnected")]
        assert c.address in disconnected.message
        # The worker re-joins the restarted coordinator: its events arrive on the same iterator.
        after = client.wait(lambda s: len(ranked(s)) == 1 and s.generation > before.generation,
                            timeout=20)
        assert after.generation > before.generation
        wait_for(lambda: any(e.kind == "generation" and e.generation >= after.generation
                             for e in log.events), 10, "the new generation's event")
        client.stop("done")
        log.thread.join(timeout=15)
    assert log.error is None, log.error
    assert not log.thread.is_alive()
