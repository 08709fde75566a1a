"""retort.run: a job run to completion through retort-run, its folder read back."""
from __future__ import annotations

import pathlib
import signal
import subprocess
import sys

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
