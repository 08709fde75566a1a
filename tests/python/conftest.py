"""Fixtures of the Python package's tests: real coordinators and workers from the build
(RETORT_BUILD_DIR, set by ctest; tests/python/CMakeLists.txt), and the package installed from
python/ into the build folder (PYTHONPATH)."""
from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

BUILD_DIR = pathlib.Path(os.environ.get("RETORT_BUILD_DIR", "build")).resolve()
TOOLS = BUILD_DIR / "tools"
START_TIMEOUT_S = 15.0

# A control-plane job: workers run with --no-train, so the dataset need not exist.
CONTROL_JOB = """name: pyclient
student: {preset: fm-student-p7}
dataset: {kind: synthetic, image_size: 28, num_classes: 10, synthetic_samples: 256}
steps: 100000
elastic: {min_workers: 1, max_workers: 8}
"""


def binary(name: str) -> str:
    path = TOOLS / name
    if not path.is_file():
        pytest.fail(f"{path} is not built (cmake --build {BUILD_DIR} --target {name})")
    return str(path)


class Process:
    """A child process with its output in a log file; killed at the end of the test."""

    def __init__(self, argv: list[str], log: pathlib.Path) -> None:
        self.argv, self.log = argv, log
        self._log_file = open(log, "ab")
        self.popen = subprocess.Popen(argv, stdout=self._log_file, stderr=subprocess.STDOUT,
                                      start_new_session=True)

    def running(self) -> bool:
        return self.popen.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.running():
            self.popen.send_signal(sig)
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        self._log_file.close()

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout=timeout)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


class Coordinator:
    """retort-coordinator on 127.0.0.1 with a state folder that survives restart()."""

    def __init__(self, folder: pathlib.Path, extra: list[str], job: str = CONTROL_JOB) -> None:
        self.folder = folder
        self.extra = extra
        (folder / "job.yaml").write_text(job)
        self.port = 0
        self.process: Process | None = None
        self.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        port_file = self.folder / "port"
        port_file.unlink(missing_ok=True)
        argv = [binary("retort-coordinator"), f"--state-dir={self.folder / 'state'}",
                f"--job={self.folder / 'job.yaml'}", f"--listen=127.0.0.1:{self.port}",
                f"--port-file={port_file}", "--heartbeat-interval-ms=200",
                "--eviction-timeout-ms=2000", "--settle-ms=100", "--rejoin-grace-ms=0",
                "--no-check-paths", *self.extra]
        self.process = Process(argv, self.folder / "coordinator.log")
        end = time.monotonic() + START_TIMEOUT_S
        while not (port_file.exists() and port_file.read_text().strip()):
            if not self.process.running() or time.monotonic() > end:
                pytest.fail(f"coordinator did not start:\n{self.process.output()}")
            time.sleep(0.02)
        self.port = int(port_file.read_text().strip())

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()

    def restart(self) -> None:
        """kill -9, then start again on the same port from the same state."""
        self.kill()
        self.start()


class Cluster:
    """Starts coordinators and control-plane workers; stops all of them after the test."""

    def __init__(self, tmp: pathlib.Path) -> None:
        self.tmp = tmp
        self.processes: list[Process] = []
        self.coordinators: list[Coordinator] = []

    def coordinator(self, *extra: str, job: str = CONTROL_JOB) -> Coordinator:
        folder = self.tmp / f"coordinator{len(self.coordinators)}"
        folder.mkdir()
        c = Coordinator(folder, list(extra), job)
        self.coordinators.append(c)
        return c

    def workers(self, coordinator: Coordinator, n: int, *extra: str) -> list[Process]:
        started = []
        for i in range(n):
            argv = [binary("retort-worker"), f"--coordinator={coordinator.address}",
                    f"--node=node{i}", "--local-rank=0", "--parameter-count=1000",
                    "--rpc-timeout-ms=1000", "--rejoin-timeout-ms=20000", "--no-train", *extra]
            p = Process(argv, self.tmp / f"worker{len(self.processes)}.log")
            self.processes.append(p)
            started.append(p)
        return started

    def close(self) -> None:
        for p in self.processes:
            p.kill()
        for c in self.coordinators:
            if c.process is not None:
                c.process.kill()


@pytest.fixture
def cluster(tmp_path: pathlib.Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A CA and coordinator/worker/operator certificates (retortctl certs)."""
    folder = tmp_path_factory.mktemp("certs")
    subprocess.run([binary("retortctl"), "certs", f"--out={folder}"], check=True,
                   capture_output=True, timeout=30)
    return folder


def wait_for(predicate: Any, timeout: float, what: str) -> Any:
    """Polls predicate() until it returns a true value (returned) or fails the test."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)
