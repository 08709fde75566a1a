"""The manifest checkers (schema, policy, flags): each passes the committed renders and fails,
naming the problem, on a broken copy."""
import os
import unittest

from retort_deploy.help_flags import check_args, parse_help_flags
from retort_deploy.schema import KUBERNETES_VERSION

from .fakes import assert_fails_naming, DEPLOY, HELP, committed_render, make_fake_binaries, replace_once, run_script, write_temp

OVERLAYS = ("cpu", "gpu", "rdma")


class HelpFlagsTest(unittest.TestCase):
    def test_help_parser_reads_value_flags_switches_and_ignores_prose(self):
        flags = parse_help_flags("Usage: x\n  --listen=VALUE\n      Address --not-a-flag.\n  --json\n  --help\n")
        self.assertEqual(list(flags), ["listen", "json", "help"])
        self.assertTrue(flags["listen"])
        self.assertFalse(flags["json"])

    def test_argument_checker_rejects_unknown_flags_and_missing_values(self):
        flags = parse_help_flags("  --listen=VALUE\n  --json\n")
        self.assertEqual(check_args(["--listen=1", "--json", "--no-json", "--listen", "x"], flags, "t"), [])
        self.assertEqual(check_args(["--lisen=1"], flags, "t"), ["t: unknown flag --lisen"])
        self.assertEqual(check_args(["--listen"], flags, "t"), ["t: --listen needs a value"])
        self.assertEqual(check_args(["--no-json=1"], flags, "t"), ["t: --no-json takes no value"])


class FlagCheckTest(unittest.TestCase):
    def check(self, bin_dir, files, readme=None):
        args = [f"--bin-dir={bin_dir}", *files]
        if readme:
            args.append(f"--readme={readme}")
        return run_script("check_flags.py", *args)

    def cpu(self, text=None):
        return write_temp(self, "cpu.yaml", committed_render("cpu") if text is None else text)

    def test_passes_the_overlays_and_readme_with_binaries_that_have_every_flag(self):
        files = [write_temp(self, f"{o}.yaml", committed_render(o)) for o in OVERLAYS]
        status, output = self.check(make_fake_binaries(self), files, DEPLOY / "README.md")
        self.assertEqual(status, 0, output)

    def test_fails_when_a_binary_lacks_a_flag_the_manifests_pass(self):
        worker = replace_once(self, HELP["retort-worker"], "  --health-listen=VALUE\n", "")
        status, output = self.check(make_fake_binaries(self, {**HELP, "retort-worker": worker}), [self.cpu()])
        self.assertEqual(status, 1, output)
        self.assertRegex(output, r"container worker: unknown flag --health-listen")

    def test_fails_and_does_not_skip_when_a_binary_is_missing(self):
        status, output = self.check(make_fake_binaries(self, {**HELP, "retort-coordinator": None}), [self.cpu()])
        self.assertEqual(status, 1, output)
        self.assertRegex(output, r"missing binary .*retort-coordinator")

    def test_fails_on_a_readme_retortctl_line_with_an_unknown_subcommand_or_flag(self):
        readme = write_temp(
            self,
            "README.md",
            "```\nretortctl --coordinator=localhost:7070 status\nretortctl frobnicate\nretortctl --jsn status\n```\n",
        )
        status, output = self.check(make_fake_binaries(self), [self.cpu()], readme)
        self.assertEqual(status, 1, output)
        self.assertRegex(output, r'README.md:3: retortctl subcommand "frobnicate"')
        self.assertRegex(output, r"README.md:4: unknown flag --jsn")
        self.assertNotRegex(output, r"README.md:2:")

    def test_rejects_an_entrypoint_that_is_not_a_retort_binary(self):
        text = replace_once(self, committed_render("cpu"), "/opt/retort/bin/retort-worker", "/usr/bin/python3")
        status, output = self.check(make_fake_binaries(self), [self.cpu(text)])
        self.assertEqual(status, 1, output)
        self.assertRegex(output, r"entrypoint /usr/bin/python3 is not")


class SchemaCheckTest(unittest.TestCase):
    def test_passes_both_overlays(self):
        for overlay in OVERLAYS:
            rendered = write_temp(self, f"{overlay}.yaml", committed_render(overlay))
            status, output = run_script("check_schema.py", rendered)
            self.assertEqual(status, 0, output)
            self.assertIn(f"Kubernetes {KUBERNETES_VERSION}, strict", output)

    def test_catches_wrong_types_and_misspelt_fields_at_any_depth(self):
        text = committed_render("cpu")
        text = replace_once(self, text, "parallelism: 1", "parallelism: one")
        text = replace_once(self, text, "fieldPath: status.podIP", "fieldPth: status.podIP")
        text = replace_once(self, text, "readinessProbe:", "readinesProbe:")
        status, output = run_script("check_schema.py", write_temp(self, "bad.yaml", text))
        self.assertEqual(status, 1, output)
        self.assertRegex(output, r"Job/retort-coordinator: spec\.parallelism: 'one' is not of type 'integer'")
        self.assertRegex(
            output, r'Job/retort-worker: spec\.template\.spec\.containers\[0\]\.env\[3\]\.valueFrom\.fieldRef: '
            r'unknown field "fieldPth"'
        )
        self.assertRegex(output, r"fieldRef: 'fieldPath' is a required property")
        self.assertRegex(
            output,
            r'Job/retort-coordinator: spec\.template\.spec\.containers\[0\]: unknown field "readinesProbe"',
        )

    def test_rejects_a_kind_the_kubernetes_version_does_not_know(self):
        text = committed_render("cpu") + "---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n"
        status, output = run_script("check_schema.py", write_temp(self, "widget.yaml", text))
        self.assertEqual(status, 1, output)
        self.assertRegex(
            output, rf"Widget/w: example.com/v1 Widget is not a known kind in Kubernetes {KUBERNETES_VERSION}"
        )

    def test_rejects_malformed_yaml_naming_the_file(self):
        status, output = run_script("check_schema.py", write_temp(self, "broken.yaml", "a: [1,\n"))
        self.assertEqual(status, 1, output)
        self.assertIn("broken.yaml", output)


class PolicyCheckTest(unittest.TestCase):
    def test_passes_each_overlay_and_names_violations_in_a_broken_one(self):
        for overlay in OVERLAYS:
            rendered = write_temp(self, f"{overlay}.yaml", committed_render(overlay))
            status, output = run_script("check_policy.py", f"--accelerator={overlay}", rendered)
            self.assertEqual(status, 0, output)
        broken = committed_render("cpu")
        for old, new in [
            ("  completions: 1\n", "  completions: 2\n"),
            ("readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false"),
            ("terminationGracePeriodSeconds: 60", "terminationGracePeriodSeconds: 5"),
            ("- ReadWriteMany", "- ReadWriteOnce"),
            ("global_batch: 256", "global_batch: 256\n    batch_size: 64"),
            ("--coordinator=retort-coordinator.", "--coordinator=coordinator."),
            ("minAvailable: 1", "maxUnavailable: 0"),  # the coordinator's budget
            ("minAvailable: 1", "minAvailable: 3"),  # the workers'

            ("  name: retort-shared\n  namespace: retort", "  name: retort-shared"),
            ("        - --tls-ca=/etc/retort/tls/ca.crt\n        - --health-listen=0.0.0.0:7072\n",
             "        - --insecure-listen\n"),
            ("        - --tls-key=/etc/retort/tls/worker.key\n", "        - --tls-key=/opt/retort/worker.key\n"),
            ("service: retort.v1.TrainingProgress", "service: \"\""),
        ]:
            broken = replace_once(self, broken, old, new)
        status, output = run_script("check_policy.py", "--accelerator=cpu", write_temp(self, "broken.yaml", broken))
        assert_fails_naming(self, status, output, [
            r"Job/retort-coordinator: completions must be 1",
            r"readOnlyRootFilesystem must be true",
            r"terminationGracePeriodSeconds must be >= 60",
            r"PersistentVolumeClaim/retort-shared: must be ReadWriteMany",
            # The coordinator's own rules (--check-job) when a built one is at hand.
            r"job spec: batch_size: unknown field" if os.environ.get("RETORT_COORDINATOR")
            else r"job spec NOT checked",
            r"--coordinator=coordinator\.\$\(POD_NAMESPACE\)\.svc:7070 is not the coordinator Service",
            r"Job/retort-worker: needs a PodDisruptionBudget with minAvailable 1 \(the job's elastic.min_workers",
            r"PersistentVolumeClaim/retort-shared: namespace must be retort \(is unset\)",
            r"Job/retort-coordinator: --insecure-listen: the coordinator must serve mutual TLS",
            r"Job/retort-coordinator: needs --tls-ca \(mutual TLS\)",
            r"Job/retort-coordinator: needs --health-listen",
            r"Job/retort-worker: --tls-key=/opt/retort/worker.key is not a file of a mounted Secret volume",
            r"Job/retort-coordinator: readinessProbe must ask for service retort.v1.TrainingProgress",
            r"Job/retort-coordinator: needs a PodDisruptionBudget with minAvailable 1 \(a drain",
        ])

    def test_names_pod_hardening_probe_image_and_secret_violations(self):
        broken = committed_render("cpu")
        for old, new in [
            ("image: retort-cpu:0.1.0", "image: retort-cpu"),
            ("--log-level=$(RETORT_LOG_LEVEL)", "--log-level=$(LOG_LEVEL)"),
            ("        readinessProbe:\n          grpc:\n            port: 7072",
             "        readinessProbe:\n          tcpSocket:\n            port: 7072"),
            ("          grpc:\n            port: 7072\n          periodSeconds: 10",
             "          grpc:\n            port: 7070\n          periodSeconds: 10"),
            ("          optional: true", "          optional: false"),
            ("          optional: false\n          secretName: retort-worker-tls",
             "          optional: true\n          secretName: retort-worker-tls"),
            ("        - name: RETORT_THREADS\n          value: \"2\"",
             "        - name: RETORT_THREADS\n          valueFrom:\n            secretKeyRef: {name: s, key: k}"),
        ]:
            broken = replace_once(self, broken, old, new)
        broken += "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: leaked\n"
        status, output = run_script("check_policy.py", "--accelerator=cpu", write_temp(self, "broken.yaml", broken))
        assert_fails_naming(self, status, output, [
            r'container coordinator: image "retort-cpu" must carry a tag or digest',
            r'container coordinator: "--log-level=\$\(LOG_LEVEL\)" uses \$\(LOG_LEVEL\) but env has no LOG_LEVEL',
            r"container coordinator: readinessProbe must be a native grpc probe",
            r"Job/retort-coordinator: livenessProbe must target --health-listen \(port 7072\)",
            r"Job/retort-coordinator: secret volume credentials must be optional",
            r"Job/retort-worker: secret volume tls holds --tls-\* files: it must not be optional",
            r"container worker: env RETORT_THREADS comes from a Secret; mount secrets as files",
            r"Secret/leaked: secrets are created by the operator, never committed",
        ])

    def test_requires_gpus_and_placement_in_the_gpu_overlay(self):
        rendered = write_temp(self, "cpu.yaml", committed_render("cpu"))
        status, output = run_script("check_policy.py", "--accelerator=gpu", rendered)
        self.assertEqual(status, 1, output)
        self.assertRegex(output, r"must request and limit nvidia.com/gpu")
        self.assertRegex(output, r"needs a nodeSelector")


if __name__ == "__main__":
    unittest.main()
