"""retort.run: one job on this machine from Python (a notebook, a script), through the local
launcher retort-run: a coordinator and `workers` workers on 127.0.0.1, progress streamed line by
line, the run folder read back when the job ends.

    run = retort.run("job.yaml", workers=2, output_dir="out/kd")
    print(run.result.student_top1, run.metrics[-1]["loss"])
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import binaries
from .errors import JobEndedError, JobFailedError, JobSpecError
from .jobspec import JobSpec
from .results import Run, read_run

Job = str | os.PathLike[str] | JobSpec | Mapping[str, Any]

# retort-run's exit status (tools/job_runner.h).
_EXIT_FAILED, _EXIT_USAGE = 1, 2


def _print_line(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run(job: Job, *, workers: int = 1, output_dir: str | os.PathLike[str] | None = None,
        fresh: bool = False, tls: bool = False, timeout_s: float | None = None,
        progress: Callable[[str], None] | None = _print_line,
        extra_args: Sequence[str] = (), bin_dir: str | os.PathLike[str] | None = None) -> Run:
    """Runs `job` (a spec file, a JobSpec or a dict of fields) with `workers` workers and
    returns the run folder read back (Run: result.json, metrics.jsonl). Each output line of the
    launcher goes to `progress` (None: quiet). output_dir: the run folder (default: the job's
    output_dir, else retort-out, as retort-run). fresh: start over instead of resuming.
    tls: mutual TLS between all processes. timeout_s: stop the job after this long
    (JobEndedError). extra_args: more retort-run flags.

    Raises JobSpecError for a spec the coordinator refuses, JobFailedError with the launcher's
    last line when the job failed, BinaryNotFoundError when retort-run is not built."""
    launcher = binaries.find("retort-run", bin_dir)
    spec = job if isinstance(job, JobSpec) else (
        JobSpec(job) if isinstance(job, Mapping) else JobSpec.load(job))
    checked = spec.validate(check_paths=True, bin_dir=launcher.parent)
    folder = pathlib.Path(output_dir or checked.output_dir or "retort-out")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="job-", dir=folder,
                                     delete=False) as f:
        f.write(spec.text)
        spec_path = pathlib.Path(f.name)
    args = [str(launcher), f"--job={spec_path}", f"--workers={workers}",
            f"--output-dir={folder}"]
    if fresh:
        args.append("--fresh")
    if tls:
        args.append("--tls")
    if timeout_s is not None:
        args.append(f"--timeout-s={max(1, int(timeout_s))}")
    args.extend(extra_args)
    last = ""
    try:
        with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              bufsize=1) as child:
            assert child.stdout is not None
            try:
                for raw in child.stdout:
                    line = raw.rstrip("\n")
                    if line.strip():
                        last = line
                    if progress is not None:
                        progress(line)
            except BaseException:
                child.terminate()  # Ctrl-C in a notebook: retort-run stops the job gracefully
                child.wait(timeout=60)
                raise
            code = child.wait()
    finally:
        spec_path.unlink(missing_ok=True)
    if code == _EXIT_USAGE:
        raise JobSpecError(f"retort-run refused the job: {last}")
    result = read_run(folder)
    if code == _EXIT_FAILED:
        raise JobFailedError(f"the job failed: {last}")
    if code != 0:
        raise JobFailedError(f"retort-run exited {code}: {last}")
    if result.result is None:
        raise JobEndedError(f"the job ended without a result ({last}); run folder {folder}",
                            "stopped")
    return result
