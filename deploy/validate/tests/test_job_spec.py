"""The job spec check (the coordinator's own rules through --check-job), and the YAML 1.2
reading the other policy rules rely on. Needs $RETORT_COORDINATOR (run-checks.sh selftest
BUILD_DIR sets it); skipped without it."""
import os
import unittest

from retort_deploy import yaml12
from retort_deploy.job_spec import JobSpecChecker
from retort_deploy.manifests import load_manifests
from retort_deploy.policy import check_policy

from .fakes import committed_render, replace_once, write_temp

COORDINATOR = os.environ.get("RETORT_COORDINATOR")
SPEC = """\
name: t
teacher: {preset: fm-teacher}
student: {preset: fm-student}
dataset: {kind: synthetic, augment: true, image_size: 28, num_classes: 10}
global_batch: 8
steps: 10
optimizer: {lr: 1e-3, eps: 1.0e-8}
checkpoint: {dir: /shared/checkpoints}
elastic: {min_workers: 1, max_workers: 2}
"""


@unittest.skipUnless(COORDINATOR, "needs RETORT_COORDINATOR (a built retort-coordinator)")
class JobSpecTest(unittest.TestCase):
    def check(self, text):
        return JobSpecChecker(COORDINATOR).check(text, yaml12.load(text))

    def test_a_valid_spec_passes_with_yaml_1_2_floats(self):
        self.assertEqual(self.check(SPEC), [])

    def test_the_coordinator_names_the_first_broken_rule(self):
        for old, new, message in [
            ("augment: true", "augment: yes", r"dataset\.augment"),
            ("global_batch: 8", "global_batch: 8.5", r"global_batch"),
            ("lr: 1e-3", "lr: 1e-3, momentum: 0.9", r"optimizer\.momentum: unknown field"),
            ("steps: 10", "steps: 10\nepochs: 2", r"set exactly one of steps or epochs"),
            ("{preset: fm-student}", "{}", r"student: set exactly one of preset or torchscript_path"),
            ("kind: synthetic", "kind: mnist", r"dataset\.kind: 'mnist' is not one of"),
            ("max_workers: 2", "max_workers: 0", r"elastic\.max_workers: must be in \[1, 100000\]"),
        ]:
            with self.subTest(new=new):
                errors = self.check(replace_once(self, SPEC, old, new))
                self.assertEqual(len(errors), 1, errors)
                self.assertRegex(errors[0], message)

    def test_a_deployment_needs_a_checkpoint_dir(self):
        errors = self.check(SPEC.replace("checkpoint: {dir: /shared/checkpoints}\n", ""))
        self.assertEqual(errors, ["checkpoint.dir: required (on storage shared by all pods)"])

    def test_a_job_spec_that_is_not_yaml_fails_the_policy_check(self):
        spec_line = "    global_batch: 256\n"
        text = replace_once(self, committed_render("cpu"), spec_line, spec_line + "    name: again\n")
        errors = check_policy(load_manifests(write_temp(self, "cpu.yaml", text)), "cpu",
                              JobSpecChecker(COORDINATOR))
        self.assertTrue(any("job.yaml is not valid YAML" in e and "duplicate key" in e for e in errors), errors)


class YamlTest(unittest.TestCase):
    def test_duplicate_keys_are_an_error(self):
        with self.assertRaises(yaml12.yaml.YAMLError):
            yaml12.load("name: a\nname: b\n")


if __name__ == "__main__":
    unittest.main()
