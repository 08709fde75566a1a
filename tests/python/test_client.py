"""retort.Client against a real coordinator with control-plane workers: every ControlService
call, wait(), watch(), the fields retortctl status --json shares, and errors within deadlines."""
from __future__ import annotations

import json
import pathlib
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

import retort
from conftest import Cluster, binary

TIMEOUT_S = 15.0


def ranked(status: retort.Status) -> list[retort.Member]:
    return [m for m in status.members if m.rank >= 0]


class EventLog:
    """client.watch() on a thread, its events in a list."""

    def __init__(self, client: retort.Client, **kwargs: object) -> None:
        self.events: list[retort.Event] = []
        self.error: BaseException | None = None
        self._iter = client.watch(**kwargs)  # type: ignore[arg-type]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for e in self._iter:
                self.events.append(e)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            self.error = error

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]


def test_every_control_call(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.workers(c, 2)
    with retort.Client(c.address) as client:
        log = EventLog(client, timeout=30)
        status = client.wait(lambda s: s.state == "running" and len(ranked(s)) == 2,
                             timeout=TIMEOUT_S)
        assert status.job == "pyclient" and status.generation >= 1
        assert status.version == client.coordinator_version != ""
        assert sorted(m.node for m in ranked(status)) == ["node0", "node1"]
        assert status.min_workers == 1 and status.max_workers == 8
        assert status.last_checkpoint is None

        assert client.pause().state in ("running", "paused")
        assert client.wait(until="paused", timeout=TIMEOUT_S).state == "paused"
        client.resume()
        client.wait(until="running", timeout=TIMEOUT_S)

        ticket = client.checkpoint()
        assert ticket.checkpoint_id >= 1 and ticket.step >= 1
        window = client.trace(status.step + 1000, status.step + 1001)
        assert (window.first_step, window.last_step) == (status.step + 1000, status.step + 1001)
        with pytest.raises(retort.InvalidArgument):
            client.trace(0, 5)

        victim = ranked(status)[1]
        client.drain(victim.id)
        after = client.wait(lambda s: len(ranked(s)) == 1 and s.generation > status.generation,
                            timeout=TIMEOUT_S)
        assert victim.id not in [m.id for m in ranked(after)]
        with pytest.raises(retort.NotFound):
            client.drain("no-such-member")

        assert client.scale(max_workers=4).message
        assert client.status().max_workers == 4
        with pytest.raises(ValueError):
            client.scale()

        client.stop("python client test")
        final = client.wait(until="finished", timeout=TIMEOUT_S)
        assert final.state == "stopped"
        log.thread.join(timeout=TIMEOUT_S)
    assert not log.thread.is_alive() and log.error is None, log.error
    kinds = log.kinds()
    assert "generation" in kinds and "state" in kinds, kinds
    assert log.events[-1].state == "stopped"


def test_status_fields_match_retortctl(cluster: Cluster) -> None:
    c = cluster.coordinator()
    cluster.workers(c, 1)
    with retort.Client(c.address) as client:
        ours = client.wait(lambda s: len(ranked(s)) == 1, timeout=TIMEOUT_S).to_dict()
    out = subprocess.run([binary("retortctl"), f"--coordinator={c.address}", "status", "--json"],
                         capture_output=True, text=True, timeout=TIMEOUT_S, check=True).stdout
    theirs = json.loads(out)
    assert set(ours) == set(theirs)
    assert set(ours["members"][0]) == set(theirs["members"][0])
    for key in ("job", "state", "generation", "min_workers", "max_workers", "version",
                "failure", "awaiting_rejoin", "last_checkpoint_id", "checkpoint_failures",
                "checkpoint_consecutive_failures", "last_checkpoint_failure",
                "last_checkpoint_failure_step", "last_evaluation", "best_evaluation",
                "batch_split"):
        assert ours[key] == theirs[key], key
    assert ours["members"][0]["devices"] == ["cpu"]
    for key in ("id", "rank", "node", "local_rank", "data_address", "draining", "devices"):
        assert ours["members"][0][key] == theirs["members"][0][key], key


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def hanging_server() -> Iterator[str]:
    """A gRPC server whose ControlService methods never answer: calls to it end only by their
    deadline."""
    release = threading.Event()

    def hang(request: bytes, context: grpc.ServicerContext) -> bytes:
        release.wait(10)
        return b""

    handlers = {name: grpc.unary_unary_rpc_method_handler(hang) for name in ("Status", "Stop")}
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("retort.v1.ControlService", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        release.set()
        server.stop(0)


def test_unreachable_address_raises_within_the_deadline() -> None:
    with retort.Client(f"127.0.0.1:{closed_port()}", timeout=2.0) as client:
        start = time.monotonic()
        with pytest.raises(retort.Unavailable) as error:
            client.status()
        assert time.monotonic() - start < 2.5
        assert error.value.code == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(retort.Unavailable):
            next(iter(client.watch()))
    # Something listens but never speaks HTTP/2: refused or timed out, within the deadline.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        with retort.Client(f"127.0.0.1:{silent.getsockname()[1]}", timeout=1.0) as client:
            start = time.monotonic()
            with pytest.raises((retort.Unavailable, retort.DeadlineExceeded)):
                client.status()
            assert time.monotonic() - start < 1.5


def test_expired_deadline_raises_deadline_exceeded(hanging_server: str) -> None:
    with retort.Client(hanging_server, check_version=False) as client:
        for call in (lambda: client.status(timeout=0.5), lambda: client.stop(timeout=0.5)):
            start = time.monotonic()
            with pytest.raises(retort.DeadlineExceeded):
                call()
            assert 0.4 < time.monotonic() - start < 1.5


def test_wait_gives_up_at_its_timeout(hanging_server: str) -> None:
    with retort.Client(hanging_server, timeout=0.3) as client:
        start = time.monotonic()
        with pytest.raises(retort.DeadlineExceeded, match="waiting for step 5"):
            client.wait(until=5, timeout=1.0)
        assert time.monotonic() - start < 2.0


def test_a_server_without_retort_v1_is_incompatible() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with retort.Client(f"127.0.0.1:{port}") as client:
            with pytest.raises(retort.IncompatibleCoordinator, match="retort.v1.ControlService"):
                client.pause()
    finally:
        server.stop(0)


def test_arguments_are_checked_before_any_call(tmp_path: object) -> None:
    with pytest.raises(ValueError, match="tls_cert and tls_key go together"):
        retort.Client(tls_ca="ca.crt", tls_cert="op.crt")
    with pytest.raises(ValueError, match="tls_cert needs tls_ca"):
        retort.Client(tls_cert="op.crt", tls_key="op.key")
    with pytest.raises(ValueError, match="timeout"):
        retort.Client(timeout=0)
    with pytest.raises(ValueError, match="not a job state"):
        retort.Client().wait(until="runing", timeout=1)


# The C++ names of the channel arguments (grpc_types.h) and their string keys.
_CHANNEL_ARGS = {
    "GRPC_ARG_KEEPALIVE_TIME_MS": "grpc.keepalive_time_ms",
    "GRPC_ARG_KEEPALIVE_TIMEOUT_MS": "grpc.keepalive_timeout_ms",
    "GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS": "grpc.keepalive_permit_without_calls",
    "GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA": "grpc.http2.max_pings_without_data",
    "GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS": "grpc.initial_reconnect_backoff_ms",
    "GRPC_ARG_MIN_RECONNECT_BACKOFF_MS": "grpc.min_reconnect_backoff_ms",
    "GRPC_ARG_MAX_RECONNECT_BACKOFF_MS": "grpc.max_reconnect_backoff_ms",
}


def test_channel_and_defaults_match_the_cpp_client() -> None:
    root = pathlib.Path(__file__).resolve().parents[2]
    channel = (root / "rpc" / "client_channel.cc").read_text()
    cpp = {_CHANNEL_ARGS[name]: int(value)
           for name, value in re.findall(r"args\.SetInt\((GRPC_ARG_\w+), (\d+)\)", channel)}
    assert cpp == dict(retort.security.CHANNEL_OPTIONS)
    ctl = (root / "tools" / "retortctl.cc").read_text()
    assert f'coordinator = "{retort.security.DEFAULT_ADDRESS}"' in ctl
    timeout_ms = int(re.search(r"int64_t timeout_ms = (\d+);", ctl).group(1))  # type: ignore[union-attr]
    assert timeout_ms == retort.security.DEFAULT_TIMEOUT_S * 1000
