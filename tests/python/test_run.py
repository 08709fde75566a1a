"""retort.run: a job run to completion through retort-run, its folder read back."""
from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

import retort
from conftest import TOOLS


def test_a_job_runs_to_completion(tmp_path: pathlib.Path) -> None:
    lines: list[str] = []
    spec = {"name": "pyrun", "student": {"preset": "fm-student-p7"},
            "dataset": {"kind": "synthetic", "image_size": 28, "num_classes": 10,
                        "synthetic_samples": 256},
            "global_batch": 16, "steps": 3, "threads_per_worker": 1, "evaluate": False}
    run = retort.run(spec, workers=1, output_dir=tmp_path / "out", progress=lines.append,
                     timeout_s=120, bin_dir=TOOLS)
    assert run.result is not None and run.result.steps == 3 and not run.result.evaluated
    assert [m["step"] for m in run.metrics_by_step()] == [1, 2, 3]
    assert any(line.startswith("retort-run:") and "finished" in line for line in lines), lines
    assert pathlib.Path(run.result.student_weights).is_file()


def test_a_refused_spec_and_a_missing_binary_say_why(tmp_path: pathlib.Path) -> None:
    with pytest.raises(retort.JobSpecError, match="global_batch"):
        retort.run({"name": "x", "student": {"preset": "fm-student-p7"}, "global_batch": 0},
                   output_dir=tmp_path, bin_dir=TOOLS)
    with pytest.raises(retort.BinaryNotFoundError, match="scripts/build"):
        retort.binaries.find("retort-no-such-program")


def test_the_example_starts_watches_scales_and_reads_the_result(tmp_path: pathlib.Path) -> None:
    example = pathlib.Path(__file__).resolve().parents[2] / "python" / "examples"
    process = subprocess.Popen(
        [sys.executable, str(example / "start_watch_scale.py"), "--workers=2", "--steps=20",
         f"--output-dir={tmp_path / 'out'}", f"--bin-dir={TOOLS}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        # Ctrl-C: the example stops its job (job.stop()), so no launcher or worker outlives
        # the test; then everything it printed goes into the failure.
        process.send_signal(signal.SIGINT)
        try:
            out, _ = process.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
        pytest.fail(f"the example did not finish within 120 s:\n{out}")
    assert process.returncode == 0, out
    assert "scaled down" in out and "with 1 worker(s)" in out, out
    assert "event generation" in out, out


def processes_naming(text: str) -> list[int]:
    """The pids of the processes whose command line contains `text`."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile
            continue
        if text in cmdline and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


def test_the_job_ends_with_the_program_that_started_it(tmp_path: pathlib.Path) -> None:
    # A notebook kernel killed with SIGKILL runs no cleanup: the launcher's standard input (a
    # pipe from the kernel) closes, and retort-run --stop-on-stdin-eof stops the job. Paused
    # first, so that nothing is written to the dead program's output pipe (which would end the
    # launcher another way, and only while the job prints).
    folder = tmp_path / "orphan"
    marker = tmp_path / "paused"
    program = (
        "import pathlib, time, retort\n"
        "spec = {'name': 'orphan', 'student': {'preset': 'fm-student-p7'},"
        " 'dataset': {'kind': 'synthetic', 'image_size': 28, 'num_classes': 10,"
        " 'synthetic_samples': 256}, 'global_batch': 16, 'steps': 100000,"
        " 'threads_per_worker': 1, 'evaluate': False}\n"
        f"job = retort.start(spec, workers=1, output_dir={str(folder)!r}, progress=None,"
        f" bin_dir={str(TOOLS)!r})\n"
        "with job.client() as client:\n"
        "    client.wait(until='running', timeout=60)\n"
        "    client.pause()\n"
        "    client.wait(until='paused', timeout=60)\n"
        f"pathlib.Path({str(marker)!r}).touch()\n"
        "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", program])
    try:
        deadline = time.monotonic() + 90
        while not marker.exists():
            assert parent.poll() is None, "the starting program ended early"
            assert time.monotonic() < deadline, "the job was not running and paused within 90 s"
            time.sleep(0.2)
        assert len(processes_naming(str(folder))) >= 3  # launcher, coordinator, worker
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 60
    while (left := processes_naming(str(folder))) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:  # leave nothing behind, then fail
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes of the job outlived the program that started it: {left}"
