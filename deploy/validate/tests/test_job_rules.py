"""The Job and RDMA rules of the policy check (retort_deploy/job_rules.py, rdma_rules.py): the
committed renders pass (test_checkers.py), broken copies fail naming the object and the rule."""
import unittest

from .fakes import assert_fails_naming, committed_render, replace_once, run_script, write_temp

COORDINATOR_RULE = "        - 2\n        - 3\n"
WORKER_RULE = "        containerName: worker\n        operator: In\n        values:\n        - 2\n"
DISRUPTION_RULE = "    - action: Ignore\n      onPodConditions:\n      - status: \"True\"\n        type: DisruptionTarget\n"


def broken(test, overlay, edits):
    """The committed render of `overlay` with each (old, new) replaced once, in order."""
    text = committed_render(overlay)
    for old, new in edits:
        text = replace_once(test, text, old, new)
    return write_temp(test, f"{overlay}.yaml", text)


def policy(accelerator, path):
    return run_script("check_policy.py", f"--accelerator={accelerator}", path)


class CoordinatorJobTest(unittest.TestCase):
    def test_retries_restarts_and_failure_codes_are_checked(self):
        path = broken(self, "cpu", [
            (COORDINATOR_RULE, "        - 2\n"),  # exit 3 (job failed) would be retried
            ("      restartPolicy: Never\n", "      restartPolicy: OnFailure\n"),  # first: the coordinator's
            (DISRUPTION_RULE, ""),  # the coordinator's Ignore rule
            ("        - --signal-exit-code=143\n", ""),
            ("        - --linger-after-end-ms=120000\n", "        - --linger-after-end-ms=0\n"),
        ])
        status, output = policy("cpu", path)
        assert_fails_naming(self, status, output, [
            r"Job/retort-coordinator: podFailurePolicy must fail the Job on exit codes \[2, 3\] of "
            r"container coordinator exactly \(has \[2\]\)",
            r"Job/retort-coordinator: restartPolicy must be Never",
            r"Job/retort-coordinator: podFailurePolicy must Ignore pods with the DisruptionTarget",
            r"Job/retort-coordinator: needs --signal-exit-code=143",
            r"Job/retort-coordinator: needs --linger-after-end-ms > 0",
        ])
        self.assertNotRegex(output, r"Job/retort-worker: (restartPolicy|podFailurePolicy|needs --signal)")


class WorkerJobTest(unittest.TestCase):
    def test_indexed_size_identity_addressing_and_bounds_are_checked(self):
        path = broken(self, "cpu", [
            ("  completionMode: Indexed\n", "  completionMode: NonIndexed\n"),
            ("  completions: 2\n  parallelism: 2\n", "  completions: 3\n  parallelism: 9\n"),
            (WORKER_RULE, WORKER_RULE.replace("- 2", "- 1")),  # exit 1 would fail the Job
            ("metadata.annotations['batch.kubernetes.io/job-completion-index']", "metadata.name"),
            ("      subdomain: retort-worker\n", "      subdomain: workers\n"),
        ])
        status, output = policy("cpu", path)
        assert_fails_naming(self, status, output, [
            r"Job/retort-worker: completionMode must be Indexed",
            r"Job/retort-worker: completions \(3\) must equal parallelism \(9\)",
            r"Job/retort-worker: podFailurePolicy must fail the Job on exit codes \[2\] of container worker "
            r"exactly \(has \[1\]\)",
            r"Job/retort-worker: --local-rank must be the completion index",
            r"Job/retort-worker: subdomain must name a headless Service",
            r"Job/retort-worker: parallelism 9 outside the job's elastic bounds 1\.\.8",
        ])

    def test_the_index_the_job_controller_sets_is_a_completion_index(self):
        # JOB_COMPLETION_INDEX need not be declared: the Job controller adds it to every container.
        path = broken(self, "cpu", [("--local-rank=$(POD_INDEX)", "--local-rank=$(JOB_COMPLETION_INDEX)")])
        status, output = policy("cpu", path)
        # The policy check's own rule ($(VAR) needs an env entry) still names the undeclared variable.
        self.assertEqual(status, 1, output)
        self.assertNotIn("--local-rank must be the completion index", output)
        self.assertIn('uses $(JOB_COMPLETION_INDEX) but env has no JOB_COMPLETION_INDEX', output)


class RdmaRulesTest(unittest.TestCase):
    def test_rdma_overlay_without_its_device_capability_or_default_fails(self):
        path = broken(self, "rdma", [
            ("            - IPC_LOCK\n", ""),
            ("        envFrom:\n        - configMapRef:\n", "        envFrom:\n        - secretRef:\n"),
            ("pod-security.kubernetes.io/enforce: privileged", "pod-security.kubernetes.io/enforce: baseline"),
            ('            rdma/hca: "1"\n', ""),  # the limit
        ])
        status, output = policy("rdma", path)
        assert_fails_naming(self, status, output, [
            r"Job/retort-worker: the worker must add IPC_LOCK",
            r"Job/retort-worker: needs a default UCX_NET_DEVICES from envFrom a rendered ConfigMap",
            r"Namespace/retort: label pod-security.kubernetes.io/enforce must be privileged \(is baseline\)",
            r"Job/retort-worker: must request and limit an RDMA device-plugin resource",
        ])

    def test_capabilities_and_ucx_settings_stay_out_of_the_other_overlays(self):
        status, output = policy("gpu", write_temp(self, "rdma.yaml", committed_render("rdma")))
        assert_fails_naming(self, status, output, [
            r"Job/retort-worker container worker: adds capabilities \['IPC_LOCK'\]",
            r"Job/retort-worker: RDMA devices or UCX settings outside the rdma overlay",
            r"Namespace/retort: label pod-security.kubernetes.io/enforce must be restricted \(is privileged\)",
        ])

    def test_a_manifest_that_sets_ucx_net_devices_overrides_the_user_and_fails(self):
        path = broken(self, "cpu", [
            ("        - name: HOME\n", "        - name: UCX_NET_DEVICES\n          value: eth0\n        - name: HOME\n"),
        ])
        status, output = policy("cpu", path)
        assert_fails_naming(self, status, output, [
            r"Job/retort-worker container worker: env sets UCX_NET_DEVICES; it is the user's",
        ])


if __name__ == "__main__":
    unittest.main()
