"""Job specs through the coordinator's own rules (retort-coordinator --check-job)."""
from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

import retort
from conftest import binary

SPEC = {"name": "kd", "student": {"preset": "fm-student-p7"},
        "dataset": {"kind": "synthetic", "image_size": 28, "num_classes": 10}, "steps": 20}


def test_a_built_spec_comes_back_with_the_coordinators_defaults() -> None:
    job = retort.JobSpec(SPEC).validate()
    assert job.name == "kd" and job.steps == 20
    assert job.global_batch == 128 and job.optimizer.lr == pytest.approx(1e-3)
    assert (job.elastic.min_workers, job.elastic.max_workers) == (1, 1024)
    assert retort.JobSpec.build(**SPEC).text == retort.JobSpec(SPEC).text


def test_the_coordinators_message_names_the_field() -> None:
    with pytest.raises(retort.JobSpecError, match="steps: must be >= 1, got 0"):
        retort.JobSpec(SPEC).replace(steps=0).validate()
    with pytest.raises(retort.JobSpecError, match="optimizer.momentum"):
        retort.JobSpec({**SPEC, "optimizer": {"momentum": 0.9}}).validate()
    with pytest.raises(retort.JobSpecError, match="unknown preset 'vit-huge'"):
        retort.JobSpec({**SPEC, "student": {"preset": "vit-huge"}}).validate()


def test_pre_flight_checks_see_missing_paths(tmp_path: pathlib.Path) -> None:
    spec = retort.JobSpec({**SPEC, "dataset": {"kind": "image-folder", "image_size": 28,
                                               "path": str(tmp_path / "nowhere")}})
    with pytest.raises(retort.JobSpecError, match="pre-flight"):
        spec.validate()
    assert spec.validate(check_paths=False).dataset.path == str(tmp_path / "nowhere")


def test_yaml_files_load_and_save(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("name: y\nstudent: {preset: fm-student-p7}\n"
                    "dataset: {kind: synthetic, image_size: 28}\nepochs: 2\n")
    spec = retort.JobSpec.load(path)
    assert spec.fields is not None and spec.fields["epochs"] == 2
    assert spec.validate().epochs == 2
    again = retort.JobSpec.load(spec.replace(epochs=3).save(tmp_path / "again.json"))
    assert again.validate().epochs == 3


def test_check_job_mode_of_the_coordinator(tmp_path: pathlib.Path) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.yaml"
    good.write_text(json.dumps(SPEC))
    bad.write_text("name: b\nstudent: {preset: fm-student-p7}\nglobal_batch: 0\n")
    run = [binary("retort-coordinator")]
    ok = subprocess.run([*run, f"--check-job={good}"], capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0 and "valid job spec (job 'kd')" in ok.stdout
    refused = subprocess.run([*run, f"--check-job={bad}", "--json"], capture_output=True,
                             text=True, timeout=30)
    assert refused.returncode == 2
    verdict = json.loads(refused.stdout)
    assert verdict["valid"] is False and "global_batch" in verdict["error"]
