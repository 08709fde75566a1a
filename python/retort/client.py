"""retort.Client: every ControlService call of retort.v1, with a deadline on each, typed
results (retort.types), errors mapped from gRPC codes (retort.errors), an event iterator that
survives a coordinator restart, and wait() for scripts.

    with retort.Client("127.0.0.1:7070") as c:
        print(c.status().state)
        c.scale(max_workers=4)
        c.wait(until="completed", timeout=600)

Thread-safe as gRPC channels are: calls may be made from several threads; a watch() iterator
belongs to the thread that iterates it.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from . import errors
from ._stubs import CONTROL_SERVICE, PROTO_PACKAGE, pb, pb_grpc
from .security import DEFAULT_ADDRESS, DEFAULT_TIMEOUT_S, ClientSecurity, make_channel
from .types import (JOB_STATES, TERMINAL_STATES, CheckpointTicket, ControlResult, Event, Status,
                    TraceWindow)

# What wait(until=...) accepts: a step to reach, a job state ("running", "completed", ... or
# "finished" for any end), or a predicate on Status.
Until = int | str | Callable[[Status], bool]

# The codes after which watch() waits for the coordinator and reconnects.
_RECONNECT_CODES = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                    grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}


def _now_ms() -> int:
    return int(time.time() * 1000)


class Client:
    """A connection to one coordinator's ControlService (operators' role).

    address: host:port (default 127.0.0.1:7070, as retortctl). timeout: the deadline of each
    call in seconds (default 5, as retortctl --timeout-ms); every method takes its own too.
    tls_ca / tls_cert / tls_key / token_file / target_name_override: see retort.security.
    check_version: before the first call other than status(), check once that the coordinator
    serves this package's retort.v1 ControlService (IncompatibleCoordinator otherwise).
    """

    def __init__(self, address: str = DEFAULT_ADDRESS, *, timeout: float = DEFAULT_TIMEOUT_S,
                 tls_ca: str | None = None, tls_cert: str | None = None,
                 tls_key: str | None = None, token_file: str | None = None,
                 target_name_override: str | None = None, check_version: bool = True) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        self.address = address
        self.timeout = timeout
        self.security = ClientSecurity(tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key,
                                       token_file=token_file,
                                       target_name_override=target_name_override)
        self.security.validate()
        self._channel = make_channel(address, self.security)
        self._stub: Any = pb_grpc.ControlServiceStub(self._channel)
        self._version_checked = not check_version
        self._closed = False
        # The coordinator's version, once a status() or the version check has seen it.
        self.coordinator_version: str | None = None
        # The last terminal job state any reply or event on this client carried ("" = none):
        # wait() falls back on it when the coordinator has exited.
        self.final_state = ""

    # -- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        """Closes the channel; a watch() of this client then ends quietly."""
        self._closed = True
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the calls -------------------------------------------------------------------------
    def status(self, *, timeout: float | None = None) -> Status:
        """The job's state, generation, step, members and last checkpoint."""
        reply = self._call("Status", pb.StatusRequest(), timeout, check_version=False)
        status = Status.from_proto(reply)
        self.coordinator_version = status.version
        self._saw_state(status.state)
        self._version_checked = True
        return status

    def pause(self, *, timeout: float | None = None) -> ControlResult:
        """Pause training at the next step boundary."""
        return ControlResult.from_proto(self._call("Pause", pb.PauseRequest(), timeout))

    def resume(self, *, timeout: float | None = None) -> ControlResult:
        return ControlResult.from_proto(self._call("Resume", pb.ResumeRequest(), timeout))

    def checkpoint(self, *, timeout: float | None = None) -> CheckpointTicket:
        """Ask for a coordinated checkpoint; returns its id and the step it will be taken at."""
        r = self._call("Checkpoint", pb.CheckpointRequest(), timeout)
        return CheckpointTicket(checkpoint_id=r.checkpoint_id, step=r.step)

    def scale(self, *, min_workers: int = 0, max_workers: int = 0,
              timeout: float | None = None) -> ControlResult:
        """Change the elastic bounds live; 0 leaves a bound unchanged."""
        if min_workers == 0 and max_workers == 0:
            raise ValueError("scale needs min_workers and/or max_workers")
        request = pb.ScaleRequest(min_workers=min_workers, max_workers=max_workers)
        return ControlResult.from_proto(self._call("Scale", request, timeout))

    def drain(self, member_id: str, *, timeout: float | None = None) -> ControlResult:
        """Remove one worker gracefully at a step boundary (member ids: status().members)."""
        request = pb.DrainRequest(member_id=member_id)
        return ControlResult.from_proto(self._call("Drain", request, timeout))

    def stop(self, reason: str = "", *, timeout: float | None = None) -> ControlResult:
        """Stop the job: workers leave at a step boundary and the coordinator exits."""
        return ControlResult.from_proto(self._call("Stop", pb.StopRequest(reason=reason), timeout))

    def trace(self, first_step: int, last_step: int, *,
              timeout: float | None = None) -> TraceWindow:
        """Every worker records a Chrome trace of steps [first_step, last_step]."""
        r = self._call("Trace", pb.TraceRequest(first_step=first_step, last_step=last_step),
                       timeout)
        return TraceWindow(first_step=r.first_step, last_step=r.last_step, message=r.message)

    def check_version(self, *, timeout: float | None = None) -> str:
        """Checks that the coordinator serves retort.v1's ControlService (the package's proto
        package, from its generated descriptor); returns the coordinator's version. Raises
        IncompatibleCoordinator when it does not, naming both sides."""
        try:
            return self.status(timeout=timeout).version
        except errors.IncompatibleCoordinator as error:
            raise errors.IncompatibleCoordinator(
                error.code, f"the coordinator does not serve {CONTROL_SERVICE} (this package "
                f"speaks {PROTO_PACKAGE}): {error.details}", error.method,
                error.address) from None

    # -- events ----------------------------------------------------------------------------
    def watch(self, *, reconnect: bool = True, timeout: float | None = None,
              reconnect_timeout: float = 60.0) -> Iterator[Event]:
        """The coordinator's events as they happen. With `reconnect`, a coordinator that goes
        away (killed, restarted) yields an Event of kind "disconnected", then, once it answers
        again within `reconnect_timeout` seconds, one of kind "reconnected" and the new
        coordinator's events (those in between are lost); Unavailable when it does not come
        back. The iteration ends after `timeout` seconds (None: no limit) or when the stream
        ends after the job finished. Close the iterator (or break) to cancel the stream."""
        # Reachable now (and the version check): a later loss is a disconnection.
        last_state = self.status().state
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if end is None else max(0.0, end - time.monotonic())
            if remaining == 0.0:
                return
            call = self._stub.Watch(pb.WatchRequest(), timeout=remaining,
                                    metadata=self.security.token_metadata())
            failure: grpc.RpcError | None = None
            try:
                for reply in call:
                    event = Event.from_proto(reply)
                    last_state = event.state
                    self._saw_state(event.state)
                    yield event
            except grpc.RpcError as error:
                failure = error
            finally:
                call.cancel()
            code = failure.code() if isinstance(failure, grpc.Call) else None
            if self._closed or (code == grpc.StatusCode.DEADLINE_EXCEEDED and end is not None):
                return
            if last_state in TERMINAL_STATES and (failure is None or code in _RECONNECT_CODES):
                return  # the job ended and its coordinator exited
            if not reconnect or (failure is not None and code not in _RECONNECT_CODES):
                if failure is None:
                    return
                raise errors.error_from_grpc(failure, "Watch", self.address) from None
            away_since = time.monotonic()
            why = failure.details() if isinstance(failure, grpc.Call) else "stream ended"
            yield self._client_event(
                "disconnected", f"lost the coordinator at {self.address} ({why}); "
                f"reconnecting for up to {reconnect_timeout:.0f} s")
            if not self._await_coordinator(away_since, reconnect_timeout, end):
                return  # the watch's own time ended while waiting
            yield self._client_event(
                "reconnected", f"reconnected to the coordinator at {self.address} after "
                f"{time.monotonic() - away_since:.1f} s; events meanwhile are not replayed")

    def _await_coordinator(self, away_since: float, reconnect_timeout: float,
                           end: float | None) -> bool:
        """True once the coordinator answers status() again; False when the watch's own end
        came first; Unavailable after reconnect_timeout."""
        limit = away_since + reconnect_timeout
        if end is not None:
            limit = min(limit, end)
        while True:
            remaining = limit - time.monotonic()
            if remaining <= 0:
                if end is not None and time.monotonic() >= end:
                    return False
                raise errors.Unavailable(
                    grpc.StatusCode.UNAVAILABLE, f"the coordinator did not come back within "
                    f"{reconnect_timeout:.0f} s", "Watch", self.address)
            if self._closed:
                return False
            try:
                # Fails at once while the channel is down; the channel reconnects by itself
                # (backoff 0.1 s to 1 s, security.CHANNEL_OPTIONS).
                self.status(timeout=max(0.001, min(1.0, remaining)))
                return True
            except (errors.Unavailable, errors.DeadlineExceeded):
                time.sleep(min(0.1, max(0.0, limit - time.monotonic())))

    def _saw_state(self, state: str) -> None:
        if state in TERMINAL_STATES:
            self.final_state = state

    @staticmethod
    def _client_event(kind: str, message: str) -> Event:
        return Event(unix_ms=_now_ms(), kind=kind, message=message, generation=0, member_id="",
                     state="unspecified")

    # -- waiting ---------------------------------------------------------------------------
    def wait(self, until: Until, *, timeout: float, poll_s: float = 0.2) -> Status:
        """Blocks until the job reaches `until`: a step (int: status().step >= it), a state
        ("running", "paused", "completed", ...; "finished": completed, stopped or failed) or a
        predicate on Status; returns the Status that satisfied it. Raises JobFailedError or
        JobEndedError when the job ends otherwise, and DeadlineExceeded after `timeout`
        seconds. Polls status() every `poll_s` and follows the event stream, so a final state
        is seen even when the coordinator exits right after it (the Status returned is then
        the last one read, with the final state from the stream). A coordinator that is away
        is waited for until the timeout.

        A coordinator exits soon after its job ends: to see the end of a job you are about to
        stop, have wait() or a watch() of this client running before the job can end (the
        final state of any of its replies and events counts), or read the run folder."""
        satisfied, what = _until(until)
        end = time.monotonic() + timeout
        stream = _StateFollower(self, end)
        last: Status | None = None
        last_error: errors.RetortRpcError | None = None
        try:
            while True:
                try:
                    status: Status | None = self.status(
                        timeout=max(0.001, min(self.timeout, end - time.monotonic())))
                    last = status
                except (errors.Unavailable, errors.DeadlineExceeded) as error:
                    last_error, status = error, None
                    if last is not None and self.final_state:
                        status = dataclasses.replace(last, state=self.final_state)
                if status is not None:
                    if satisfied(status):
                        return status
                    if status.finished:
                        raise _ended(status, what)
                left = end - time.monotonic()
                if left <= 0:
                    detail = f"waiting for {what}: " + (
                        f"last seen {last.state} at step {last.step}" if last else
                        f"no answer ({last_error})")
                    raise errors.DeadlineExceeded(grpc.StatusCode.DEADLINE_EXCEEDED, detail,
                                                  "wait", self.address)
                stream.changed.wait(min(poll_s, left))
                stream.changed.clear()
        finally:
            stream.close()

    # -- plumbing --------------------------------------------------------------------------
    def _check_version_once(self, timeout: float | None) -> None:
        if not self._version_checked:
            self.check_version(timeout=timeout)

    def _call(self, method: str, request: Any, timeout: float | None, *,
              check_version: bool = True) -> Any:
        if check_version:
            self._check_version_once(timeout)
        deadline = self.timeout if timeout is None else timeout
        try:
            return getattr(self._stub, method)(request, timeout=deadline,
                                               metadata=self.security.token_metadata())
        except grpc.RpcError as error:
            raise errors.error_from_grpc(error, method, self.address) from None


class _StateFollower:
    """Follows the event stream on a thread for wait(): wakes it on every event and keeps the
    last terminal state seen (the coordinator exits soon after a job ends)."""

    def __init__(self, client: Client, end: float) -> None:
        self.changed = threading.Event()
        self._stopped = threading.Event()
        self._call: Any = None
        self._lock = threading.Lock()
        self._closed = False
        self._client = client
        self._end = end
        self._thread = threading.Thread(target=self._run, name="retort-wait", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c = self._client
        while not self._closed and time.monotonic() < self._end:
            with self._lock:
                if self._closed:
                    return
                self._call = c._stub.Watch(pb.WatchRequest(),
                                           timeout=max(0.001, self._end - time.monotonic()),
                                           metadata=c.security.token_metadata())
            try:
                for reply in self._call:
                    c._saw_state(Event.from_proto(reply).state)
                    self.changed.set()
            except grpc.RpcError:
                pass
            except ValueError:
                return  # the client's channel was closed
            # The stream broke (coordinator away): wait.poll keeps polling; retry the stream
            # once the channel is back.
            # Retried while wait() polls status(); no connectivity watcher, which would outlive
            # a channel closed meanwhile.
            self._stopped.wait(min(0.2, max(0.0, self._end - time.monotonic())))

    def close(self) -> None:
        self._stopped.set()
        with self._lock:
            self._closed = True
            if self._call is not None:
                self._call.cancel()
        self._thread.join(timeout=2)


def _until(until: Until) -> tuple[Callable[[Status], bool], str]:
    if isinstance(until, bool):
        raise TypeError("wait(until=...) takes a step, a state name or a predicate")
    if isinstance(until, int):
        step = until
        return (lambda s: s.step >= step), f"step {step}"
    if isinstance(until, str):
        if until == "finished":
            return (lambda s: s.state in TERMINAL_STATES), "the job to finish"
        if until not in JOB_STATES:
            raise ValueError(f"wait(until={until!r}): not a job state (one of "
                             f"{', '.join(JOB_STATES)}, or 'finished')")
        state = until
        return (lambda s: s.state == state), f"state {state}"
    if callable(until):
        return until, getattr(until, "__name__", "the predicate")
    raise TypeError("wait(until=...) takes a step, a state name or a predicate")


def _ended(status: Status, what: str) -> errors.JobEndedError:
    if status.state == "failed":
        why = status.failure.message if status.failure else "no reason recorded"
        return errors.JobFailedError(f"job {status.job} failed while waiting for {what}: {why}",
                                     status.failure)
    return errors.JobEndedError(
        f"job {status.job} is {status.state} at step {status.step}; it will not reach {what}",
        status.state)
