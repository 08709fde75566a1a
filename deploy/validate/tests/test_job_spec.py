"""The job spec check against the proto, and the YAML 1.2 reading it relies on."""
import unittest

from retort_deploy import yaml12
from retort_deploy.job_spec import check_job_spec, parse_proto_messages
from retort_deploy.manifests import load_manifests
from retort_deploy.policy import check_policy

from .fakes import ROOT, committed_render, replace_once, write_temp

MESSAGES = parse_proto_messages(ROOT / "proto" / "retort" / "v1" / "retort.proto")
SPEC = """\
name: t
teacher: {preset: fm-teacher}
student: {preset: fm-student}
dataset: {kind: synthetic, augment: true}
global_batch: 8
steps: 10
optimizer: {lr: 1e-3, eps: 1.0e-8}
checkpoint: {dir: /shared/checkpoints}
elastic: {min_workers: 1, max_workers: 2}
"""


class JobSpecTest(unittest.TestCase):
    def check(self, text):
        return check_job_spec(yaml12.load(text), MESSAGES)

    def test_a_valid_spec_passes_with_yaml_1_2_floats(self):
        self.assertEqual(self.check(SPEC), [])

    def test_wrong_scalar_types_and_unknown_nested_fields_are_named(self):
        spec = SPEC.replace("augment: true", "augment: yes").replace("global_batch: 8", "global_batch: 8.5")
        spec = spec.replace("lr: 1e-3", "lr: 1e-3, momentum: 0.9")
        self.assertEqual(
            self.check(spec),
            [
                'dataset.augment: expected bool, got "yes"',
                "global_batch: expected int64, got 8.5",
                "optimizer.momentum: unknown field (not in retort.v1.OptimizerSpec)",
            ],
        )

    def test_coordinator_rules(self):
        spec = SPEC.replace("steps: 10", "steps: 10\nepochs: 2").replace("max_workers: 2", "max_workers: 0")
        spec = spec.replace("{preset: fm-student}", "{}").replace("kind: synthetic", "kind: mnist")
        self.assertEqual(
            self.check(spec),
            [
                "exactly one of steps or epochs must be positive",
                "student: set exactly one of preset or torchscript_path",
                "dataset.kind: must be one of fashion-mnist, image-folder, synthetic",
                "elastic: need 1 <= min_workers <= max_workers",
            ],
        )

    def test_duplicate_keys_are_an_error(self):
        with self.assertRaises(yaml12.yaml.YAMLError):
            yaml12.load("name: a\nname: b\n")

    def test_a_job_spec_that_is_not_yaml_fails_the_policy_check(self):
        spec_line = "    global_batch: 256\n"
        text = replace_once(self, committed_render("cpu"), spec_line, spec_line + "    name: again\n")
        errors = check_policy(load_manifests(write_temp(self, "cpu.yaml", text)), "cpu", MESSAGES)
        self.assertTrue(any("job.yaml is not valid YAML" in e and "duplicate key" in e for e in errors), errors)


if __name__ == "__main__":
    unittest.main()
