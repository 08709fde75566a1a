"""One job on this machine from Python (a notebook, a script), through the local launcher
retort-run: a coordinator and `workers` workers on 127.0.0.1, the launcher's output streamed
line by line, the run folder read back when the job ends.

    run = retort.run("job.yaml", workers=2, output_dir="out/kd")     # blocks until it ends
    print(run.result.student_top1, run.metrics[-1]["loss"])

    job = retort.start(spec, workers=2, output_dir="out/kd")        # returns at once
    with job.client() as c:                                          # its coordinator
        c.scale(max_workers=4)
    run = job.wait(timeout=600)
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import binaries
from .client import Client
from .errors import JobEndedError, JobFailedError, JobSpecError
from .jobspec import JobSpec
from .results import Run, read_run

Job = str | os.PathLike[str] | JobSpec | Mapping[str, Any]

# retort-run's exit status (tools/job_runner.h).
_EXIT_FAILED, _EXIT_USAGE = 1, 2
# How long a stopped launcher gets to stop its job gracefully before it is killed.
_STOP_GRACE_S = 60.0


def _print_line(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class LocalJob:
    """A job running under retort-run (made by retort.start)."""

    def __init__(self, args: list[str], folder: pathlib.Path, spec_path: pathlib.Path,
                 tls: bool, progress: Callable[[str], None] | None) -> None:
        self.folder = folder
        self.tls = tls
        self.last_line = ""
        self._spec_path = spec_path
        self._progress = progress
        (folder / "coordinator.port").unlink(missing_ok=True)
        # retort-run --stop-on-stdin-eof holds the other end of this pipe: when this process
        # ends, however it ends, the pipe closes and the job stops instead of outliving it.
        self._process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT,
                                         text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read, name="retort-run output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for raw in self._process.stdout:
            line = raw.rstrip("\n")
            if line.strip():
                self.last_line = line
            if self._progress is not None:
                self._progress(line)

    @property
    def running(self) -> bool:
        return self._process.poll() is None

    def address(self, timeout: float = 30.0) -> str:
        """The coordinator's host:port, once retort-run has started it (JobEndedError when
        the launcher ends first, TimeoutError after `timeout` seconds)."""
        port_file = self.folder / "coordinator.port"
        end = time.monotonic() + timeout
        while True:
            text = port_file.read_text().strip() if port_file.exists() else ""
            if text:
                return f"127.0.0.1:{int(text)}"
            if not self.running:
                raise JobEndedError(f"retort-run ended before its coordinator listened: "
                                    f"{self.last_line}", "unspecified")
            if time.monotonic() > end:
                raise TimeoutError(f"no coordinator port in {port_file} after {timeout:.0f} s")
            time.sleep(0.05)

    def client(self, *, timeout: float = 5.0, start_timeout: float = 30.0) -> Client:
        """A Client of this job's coordinator (with the run's operator certificate when it
        runs with TLS)."""
        address = self.address(start_timeout)
        if not self.tls:
            return Client(address, timeout=timeout)
        d = self.folder / "tls"
        return Client(address, timeout=timeout, tls_ca=str(d / "ca.crt"),
                      tls_cert=str(d / "operator.crt"), tls_key=str(d / "operator.key"))

    def wait(self, timeout: float | None = None) -> Run:
        """Until retort-run exits; the run folder read back. JobFailedError (with the
        launcher's last line) when the job failed, JobSpecError when it refused the job,
        TimeoutError after `timeout` seconds (the job keeps running: stop() it)."""
        try:
            code = self._process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"the job in {self.folder} still runs after {timeout} s") from None
        self._reader.join(timeout=10)
        self._close_stdin()
        self._spec_path.unlink(missing_ok=True)
        if code == _EXIT_USAGE:
            raise JobSpecError(f"retort-run refused the job: {self.last_line}")
        if code == _EXIT_FAILED:
            raise JobFailedError(f"the job failed: {self.last_line}")
        if code != 0:
            raise JobFailedError(f"retort-run exited {code}: {self.last_line}")
        run = read_run(self.folder)
        if run.result is None:
            raise JobEndedError(f"the job ended without a result ({self.last_line}); run "
                                f"folder {self.folder}", "stopped")
        return run

    def stop(self) -> None:
        """Stops the job as Ctrl-C does (at a step boundary) and waits for the launcher."""
        if self.running:
            self._process.terminate()
            try:
                self._process.wait(timeout=_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._reader.join(timeout=10)
        self._close_stdin()
        self._spec_path.unlink(missing_ok=True)

    def _close_stdin(self) -> None:
        if self._process.stdin is not None and not self._process.stdin.closed:
            self._process.stdin.close()


def start(job: Job, *, workers: int = 1, output_dir: str | os.PathLike[str] | None = None,
          fresh: bool = False, tls: bool = False, timeout_s: float | None = None,
          progress: Callable[[str], None] | None = _print_line,
          extra_args: Sequence[str] = (), bin_dir: str | os.PathLike[str] | None = None
          ) -> LocalJob:
    """Starts `job` (a spec file, a JobSpec or a dict of fields) with `workers` workers under
    retort-run and returns at once. Each output line of the launcher goes to `progress`
    (None: quiet). output_dir: the run folder (default: the job's output_dir, else retort-out,
    as retort-run). fresh: start over instead of resuming an earlier run in that folder.
    tls: mutual TLS between all processes. timeout_s: retort-run stops the job after this
    long. extra_args: more retort-run flags. The job ends with this Python process, however
    that ends (retort-run --stop-on-stdin-eof). The spec is checked first (JobSpecError);
    BinaryNotFoundError when retort-run is not built."""
    launcher = binaries.find("retort-run", bin_dir)
    spec = job if isinstance(job, JobSpec) else (
        JobSpec(job) if isinstance(job, Mapping) else JobSpec.load(job))
    checked = spec.validate(check_paths=True, bin_dir=launcher.parent)
    folder = pathlib.Path(output_dir or checked.output_dir or "retort-out").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="job-", dir=folder,
                                     delete=False) as f:
        f.write(spec.text)
        spec_path = pathlib.Path(f.name)
    args = [str(launcher), f"--job={spec_path}", f"--workers={workers}",
            f"--output-dir={folder}", "--stop-on-stdin-eof"]
    if fresh:
        args.append("--fresh")
    if tls:
        args.append("--tls")
    if timeout_s is not None:
        args.append(f"--timeout-s={max(1, int(timeout_s))}")
    args.extend(extra_args)
    return LocalJob(args, folder, spec_path, tls, progress)


def run(job: Job, *, workers: int = 1, output_dir: str | os.PathLike[str] | None = None,
        fresh: bool = False, tls: bool = False, timeout_s: float | None = None,
        progress: Callable[[str], None] | None = _print_line,
        extra_args: Sequence[str] = (), bin_dir: str | os.PathLike[str] | None = None) -> Run:
    """start() and wait(): runs the job to its end and returns the run folder read back
    (Run: result.json, metrics.jsonl). Ctrl-C stops the job gracefully. Raises JobSpecError,
    JobFailedError with the launcher's last line, JobEndedError when the job ended without a
    result (stopped, timed out), BinaryNotFoundError."""
    local = start(job, workers=workers, output_dir=output_dir, fresh=fresh, tls=tls,
                  timeout_s=timeout_s, progress=progress, extra_args=extra_args, bin_dir=bin_dir)
    try:
        return local.wait()
    except KeyboardInterrupt:
        local.stop()
        raise
